package poller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/source"
)

// Enhanced fan-out. With a source that is a Subscriber and has a consumer (source/kinesis.WithConsumer),
// a reader gets its shard's records from one subscription at a time (Kinesis' SubscribeToShard)
// instead of reading; everything after the records arrive (batching, failure rules, slots,
// filters, windows, checkpoints, leases, metrics) is the same.
//
// A pump goroutine per reader (pump.go) holds the subscription: it subscribes after the reader's
// position, renews the subscription from the last ContinuationSequenceNumber before Kinesis'
// 5-minute lifetime ends (and after a drop, or an end it did not ask for), backs off on
// ResourceInUseException, and hands events to the reader through a channel of one: while the
// reader's batches are being invoked the pump stops reading the stream, and HTTP/2 flow control
// stops Kinesis, so nothing buffers without bound. Records at or before the last one handed over
// are dropped, so a renewal repeats nothing.
//
// The shard's end: the event with ChildShards finishes it. A subscription that never says so (an
// emulator that keeps streaming a closed shard) is not waited on: once a listing shows the shard
// closed, the reader reads the rest with the source's Open and Read from its last record, to the
// end and its children, as a polling reader does. That holds on Kinesis too.

// Subscription timings.
const (
	// subscriptionRenewal is when a subscription is renewed: before Kinesis ends it at 5 minutes.
	subscriptionRenewal = 4*time.Minute + 45*time.Second
	subscribeRetryBase  = 500 * time.Millisecond
	subscribeRetryMax   = 5 * time.Second
)

// efo is a mapping's enhanced fan-out state.
type efo struct {
	src      Subscriber
	consumer string        // src's ConsumerARN
	renew    time.Duration // subscriptionRenewal; shorter in tests
	retry    backoff       // the pacing of failed subscribe calls (copied per pump)

	mu     sync.Mutex
	closed map[string]bool // shards some listing showed closed

	skipped atomic.Int64 // events not handed to a parked reader, for the tests
}

// paced is the retry pacing of one shard's pump, its jitter drawn from j (see WithRand).
func (e *efo) paced(j *jitter, shardID string) backoff {
	bo := e.retry
	bo.src = j.source(shardID + " subscribe")
	return bo
}

// useSubscriptions sets the poller up to read src's shards by subscription, through its
// consumer.
func (p *Poller) useSubscriptions(src Subscriber) {
	if p.efo == nil { // tests set their own timings
		p.efo = &efo{renew: subscriptionRenewal, retry: backoff{base: subscribeRetryBase, max: subscribeRetryMax}}
	}
	e := p.efo
	e.src, e.consumer, e.closed = src, src.ConsumerARN(), map[string]bool{}
}

// noteClosed notes the shards a listing shows closed.
func (e *efo) noteClosed(shards []source.Shard) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range shards {
		if s.Closed {
			e.closed[s.ID] = true
		}
	}
}

func (e *efo) isClosed(shardID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed[shardID]
}

// subEvent is what the pump hands the reader: one event's new records (none, for an event that
// only says how far behind the reader is), or a fatal error.
type subEvent struct {
	records  []source.Record
	behind   int64
	end      bool // the shard's end: children follow
	children []source.Shard
	err      error
}

// subscription is a reader's enhanced fan-out source. The reader goroutine owns every field but
// events, which the pump sends on.
type subscription struct {
	events chan subEvent
	stop   context.CancelFunc
	done   chan struct{}
	cur    subEvent // the event being taken apart
	has    bool     // cur holds something not yet handed to the reader
	// caughtUp is when the reader was last shown to be caught up: by a probe (see windowProbe).
	caughtUp time.Time
	probed   time.Time // the last probe
	// received counts the events taken from the channel. parked is received+1 while the reader
	// is parked (park.go), 0 otherwise: written by the reader, read by the pump, which keeps an
	// event that carries nothing for the reader only when the reader is parked having taken every
	// event sent (an event on its way means the reader is about to run).
	received int64
	parked   atomic.Int64
	// behind is the MillisBehindLatest of the last event taken: the shard's iterator age.
	behind int64
}

// took puts ev, taken from the channel, in hand.
func (s *subscription) took(ev subEvent) {
	s.cur, s.has = ev, true
	s.received++
	if ev.err == nil {
		s.behind = ev.behind
	}
}

// subscribing reports whether the reader reads through a subscription: the mapping has a
// consumer, and no listing has shown the shard closed (a closed shard is read by polling).
func (r *reader) subscribing() bool {
	e := r.p.efo
	if r.sub != nil || e == nil || e.isClosed(r.shardID) {
		return r.sub != nil
	}
	r.sub = &subscription{}
	return true
}

// subscribe (re)starts the pump at the reader's position.
func (r *reader) subscribe(ctx context.Context) error {
	r.stopSubscription()
	if err := ctx.Err(); err != nil {
		return errStopped
	}
	// As open: a LATEST start this run decided is LATEST itself the first time, and the recorded
	// start time after that (a retry must not skip what arrived since).
	first, pos := r.openPosition()
	r.atTip = false
	pctx, stop := context.WithCancel(ctx)
	fallback := pos.at()
	s := &subscription{events: make(chan subEvent, 1), stop: stop, done: make(chan struct{})}
	r.sub = s
	pm := &pump{e: r.p.efo, shardID: r.shardID, log: r.p.log.With("shard_id", r.shardID, "consumer", r.p.efo.consumer),
		events: s.events, pos: first.at(), fallback: &fallback, last: r.lastRead, bo: r.p.efo.paced(r.p.jit, r.shardID), now: r.p.now,
		obs: r.p.subscriptionObserver(), parked: &s.parked, behindBy: r.behindBy, wakeIdle: r.p.until != nil}
	go func() {
		defer close(s.done)
		pm.run(pctx)
	}()
	r.p.log.Info("shard subscribed", "shard_id", r.shardID, "consumer", r.p.efo.consumer, "type", first.kind, "seq", first.seq)
	return nil
}

// caughtUpTime is when the reader was last known to be caught up, given that a read that started
// at readStart left it so: the read's start when polling; with a subscription, the start of the
// last probe that found nothing (see windowProbe).
func (r *reader) caughtUpTime(readStart time.Time) time.Time {
	if r.sub == nil {
		return readStart
	}
	return r.sub.caughtUp
}

// stopSubscription ends the pump and waits for it. The reader is left without a source until
// open.
func (r *reader) stopSubscription() {
	if s := r.sub; s != nil && s.stop != nil {
		s.stop()
		<-s.done
		r.sub = &subscription{}
	}
}

// closeSubscription ends the pump for good (when run returns).
func (r *reader) closeSubscription() {
	r.stopSubscription()
	r.sub = nil
}

// await waits up to d before the next read: a polling reader sleeps, a subscribed one returns as
// soon as the pump has handed something over, and one with nothing due parks (park.go) instead
// of waiting d. It reports false when ctx ended.
func (r *reader) await(ctx context.Context, d time.Duration) bool {
	s := r.sub
	if s == nil {
		return ctxwait.Sleep(ctx, d)
	}
	if s.has || r.p.efo.isClosed(r.shardID) {
		return ctx.Err() == nil
	}
	if r.parks() { // nothing is due before the next event (park.go)
		return r.park(ctx)
	}
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case ev := <-s.events:
		s.took(ev)
		return true
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// subIterator stands in for the next read's iterator while a subscription is open.
const subIterator = "subscription"

// readSubscription takes what the pump has handed over, up to limit records, without waiting, as
// a read's page: no Next and the children at the shard's end. Once a listing shows the shard
// closed, it stops the subscription and reads the rest with the source's Read.
func (r *reader) readSubscription(ctx context.Context, limit int) (source.Page, error) {
	s := r.sub
	if !s.has && r.p.efo.isClosed(r.shardID) {
		r.closeSubscription()
		r.p.log.Info("shard closed; reading the rest by polling", "shard_id", r.shardID, "after", r.lastRead)
		if err := r.open(ctx); err != nil {
			return source.Page{}, fmt.Errorf("open closed shard %s: %w", r.shardID, err)
		}
		return r.next(ctx, limit)
	}
	// A subscription is reported behind unless a probe showed otherwise (see windowProbe): what
	// the reader does when caught up, closing an idle tumbling window, needs proof.
	out := source.Page{Next: subIterator, MillisBehind: 1}
	for len(out.Records) < limit {
		if !s.has {
			select {
			case ev := <-s.events:
				s.took(ev)
			default:
			}
			if !s.has {
				break
			}
		}
		if s.cur.err != nil {
			if len(out.Records) > 0 {
				break // hand over what came before the error first
			}
			err := s.cur.err
			s.cur, s.has = subEvent{}, false
			return source.Page{}, err
		}
		n := min(limit-len(out.Records), len(s.cur.records))
		out.Records = append(out.Records, s.cur.records[:n]...)
		s.cur.records = s.cur.records[n:]
		out.MillisBehind = s.cur.behind
		if len(s.cur.records) > 0 {
			out.MillisBehind = max(s.cur.behind, 1)
			break
		}
		if s.cur.end {
			out.Next, out.Children = "", s.cur.children
		}
		s.cur, s.has = subEvent{}, false
		if out.Next == "" {
			break
		}
	}
	if len(out.Records) == 0 && !s.has && r.windowProbe(ctx) {
		out.MillisBehind = 0
	}
	return out, nil
}

// windowProbe decides whether an idle tumbling window may close. Polling shows it: a read that
// started after the window's end and found nothing. A subscription cannot: an event that says
// "caught up" may have been made long before it arrives (a stalled or frozen connection), and an
// empty hand-over proves nothing. So once the open window has ended a poll ago, the reader asks
// the source (Open, Read) after its last record, at most once per poll interval: nothing there, and the window
// may close (the probe's start is when the reader was caught up); records there are left to the
// subscription, which delivers them.
func (r *reader) windowProbe(ctx context.Context) bool {
	s, cfg := r.sub, &r.p.cfg
	w := r.openWindowState()
	if w == nil {
		return false
	}
	end, now := w.Start.Add(cfg.TumblingWindow), r.p.now()
	if !s.caughtUp.Before(end) || now.Before(end.Add(cfg.PollInterval)) || now.Sub(s.probed) < cfg.PollInterval {
		return false
	}
	s.probed = now
	pos := resumePosition(r.lastRead, r.currentProgress(), cfg.StartingPositionTimestamp)
	it, err := r.p.src.Open(ctx, r.shardID, pos.at())
	if err != nil {
		return false
	}
	page, err := r.p.src.Read(ctx, r.shardID, it, 1)
	if err != nil || len(page.Records) > 0 {
		return false
	}
	s.caughtUp = now
	return true
}
