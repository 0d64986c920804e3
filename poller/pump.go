package poller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kinesis-esm/esm/source"
)

// The pump: the goroutine that holds a reader's enhanced fan-out subscription (subscribe.go).

// pump holds one shard's subscription and hands its events over.
type pump struct {
	e       *efo
	shardID string
	log     *slog.Logger
	events  chan<- subEvent
	pos     source.Position
	// fallback replaces pos after the first attempt while no continuation has come.
	fallback *source.Position
	last     string // the last record handed over
	bo       backoff
	now      func() time.Time
	obs      SubscriptionObserver
	made     int // subscriptions made: the later ones are renewals
	// parked is subscription.parked: while it says the reader is parked having taken all sent
	// events, an event with nothing for it (no new records, not the shard's end) is not handed
	// over.
	parked *atomic.Int64
	sent   int64 // events handed over
	// behindBy tells the reader's signals how far behind an event kept from it says it is.
	behindBy func(time.Duration)
	// wakeIdle: every event is handed over, also to a parked reader (WithUntilCaughtUp: an
	// event saying the shard is caught up is what ends the run).
	wakeIdle bool
}

// run subscribes until the shard ends or ctx ends: it resubscribes at once after a subscription
// that handed events over, and backs off after a failed subscribe or one that yielded nothing.
func (m *pump) run(ctx context.Context) {
	_ = retry(ctx, &m.bo, func(int) (step, error) { return m.subscribe(ctx) }, func(err error, d time.Duration) {
		if errors.Is(err, source.ErrInUse) {
			m.obs.SubscriptionInUse(m.shardID)
			m.log.Info("shard subscription in use; backing off", "backoff", d)
		} else {
			m.log.Warn("subscribe to shard failed; backing off", "err", err, "backoff", d)
		}
	})
}

// subscribe makes one subscription (the source's Subscribe) and consumes it. A failure to
// subscribe is retried (its error goes to run's log line), but one at the position itself is
// fatal, handed to the reader.
func (m *pump) subscribe(ctx context.Context) (step, error) {
	sctx, cancel := context.WithCancel(ctx) // the subscription's: cancelled to renew it
	defer cancel()
	sub, err := m.e.src.Subscribe(sctx, m.shardID, m.pos)
	if m.fallback != nil {
		m.pos, m.fallback = *m.fallback, nil // a continuation, once one comes, replaces it
	}
	if err != nil {
		if ctx.Err() != nil {
			return stepDone, nil
		}
		if errors.Is(err, source.ErrInvalidPosition) {
			m.send(ctx, subEvent{err: fmt.Errorf("subscribe to shard %s at %s %s: %w",
				m.shardID, m.pos.Type, m.pos.SequenceNumber, err)})
			return stepDone, nil
		}
		return stepRetry, err
	}
	m.obs.Subscribed(m.shardID, m.now(), m.made > 0)
	m.made++
	got, ended, err := m.consume(ctx, sctx, cancel, sub)
	switch {
	case ended || ctx.Err() != nil:
		return stepDone, nil
	case err != nil:
		m.log.Warn("shard subscription dropped; resubscribing", "err", err, "at", m.pos.SequenceNumber)
	default:
		m.log.Debug("shard subscription renewed", "shard_id", m.shardID, "at", m.pos.SequenceNumber)
	}
	if got {
		return stepAgain, nil
	}
	return stepRetry, nil // a subscription that yields nothing: do not spin (nothing to log)
}

// consume hands the subscription's events over until the shard ends (ended), the subscription
// ends or fails, or the renewal time comes. got says whether any event arrived. The subscription
// was made in sctx (of ctx): renewal cancels it, and its end, by renewal or by ctx's, ends the
// subscription. An event is handed over under ctx: one on its way to a busy reader when the
// renewal comes still gets there (its continuation is where the renewal starts).
func (m *pump) consume(ctx, sctx context.Context, renew context.CancelFunc, sub source.Subscription) (got, ended bool, err error) {
	defer sub.Close()
	t := time.AfterFunc(m.e.renew, renew)
	defer t.Stop()
	for {
		ev, err := sub.Next()
		if err != nil {
			if sctx.Err() != nil || errors.Is(err, io.EOF) { // renewed, stopped, or ended by the source
				return got, false, nil
			}
			return got, false, err
		}
		got = true
		handed, end := m.handOver(ctx, ev)
		if !handed || end {
			return got, handed && end, nil
		}
	}
}

// handOver hands one event over to the reader: its records after the last one handed over, and
// its continuation as the position a renewal starts from. end reports the shard's end; handed is
// false when ctx ended first.
func (m *pump) handOver(ctx context.Context, v source.Page) (handed, end bool) {
	m.obs.SubscriptionEvent(m.shardID, m.now())
	recs := v.Records
	for len(recs) > 0 && m.last != "" && compareSeq(recs[0].SequenceNumber, m.last) <= 0 {
		recs = recs[1:] // handed over before a renewal
	}
	if len(recs) > 0 {
		m.last = recs[len(recs)-1].SequenceNumber
	}
	if v.Next != "" {
		m.pos = source.Position{Type: source.AtSequenceNumber, SequenceNumber: v.Next}
	}
	end = v.Next == ""
	if len(recs) == 0 && !end && !m.wakeIdle && m.readerParked() {
		// A parked reader has no window open and nothing pending: what such an event says (how
		// far behind it is) changes none of its decisions, and its next read overwrites it.
		m.e.skipped.Add(1)
		m.behindBy(time.Duration(v.MillisBehind) * time.Millisecond) // the age follows it
		return true, false
	}
	se := subEvent{records: recs, behind: v.MillisBehind, end: end, children: v.Children}
	// events without records too: they say the reader is caught up
	return m.send(ctx, se), end
}

// readerParked reports whether the reader is parked with every event sent taken: one sent and
// not yet taken (in the channel, or just taken by a park that has not yet returned) means the
// reader is about to run, and may need what the next event says.
func (m *pump) readerParked() bool {
	p := m.parked.Load()
	return p != 0 && p-1 == m.sent
}

func (m *pump) send(ctx context.Context, ev subEvent) bool {
	select {
	case m.events <- ev:
		m.sent++
		return true
	case <-ctx.Done():
		return false
	}
}

// compareSeq orders two sequence numbers (decimal strings, of up to 128 digits in Kinesis).
func compareSeq(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}
