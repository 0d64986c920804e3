package poller

import (
	"context"
	"sync"
	"time"

	"github.com/kinesis-esm/esm/source"
)

// A shard's two signals on the clock: its iterator age and whether it is blocked.
//
// The iterator age follows every answer: each GetRecords answer's MillisBehindLatest, each
// subscription event's, the pump's kept idle events included. Records read and not yet sent (the
// batching window) and batches being handled (sent, retried, their failure records delivered)
// count too, by the arrival of their last record: the age is the largest of the last answer's and
// theirs, and grows on the clock while they are there (the Poller's clock reports it again every
// second while a batch is in flight). So a shard that caught up reports 0 at its next answer, and
// one stuck on a batch reports an age that grows while an invocation hangs.
//
// A shard is blocked when one of its batches was first sent (or its failure record first offered
// to the destination) longer than WithBlockedAfter ago and is still not done: the clock judges it
// at that instant, whether the batch is between retries or one invocation hangs.

// signals is what a shard's age and blocked state are made of, shared by its reader, its slots,
// its pump and the Poller's clock; mu orders the reports.
type signals struct {
	mu       sync.Mutex
	behind   time.Duration // what the last answer said
	waiting  time.Time     // the arrival of the last record read and not yet sent; zero: none
	flying   []*stall      // the batches being handled, in the order they began
	blocked  int           // of which reported blocked
	age      time.Duration // as last reported
	reported bool          // age was reported
}

// stall is one batch (or one failure record's delivery) being handled. Once it is in flight its
// fields are written under the shard's signals.mu, which the clock reads them under; the batch's
// owner (the reader or a slot) also reads them without it.
type stall struct {
	since       time.Time // first sent; zero before
	newest      time.Time // the arrival of the batch's last record; zero: not counted in the age
	flying      bool      // in signals.flying
	first, last string    // the batch's sequence numbers
	cause       string    // the last failure's; "" while none
	failedAt    time.Time // the last failure's time
	failures    int       // failed attempts
	reported    bool      // reported blocked
	told        bool      // a DetailObserver was told the batch is failing
}

// failure is what a DetailObserver is told of st.
func (st *stall) failure() BatchFailure {
	return BatchFailure{First: st.first, Last: st.last, Cause: st.cause, FailedAt: st.failedAt, Since: st.since,
		Attempts: st.failures, Blocked: st.reported}
}

// tellLocked tells a DetailObserver that st is failing.
func (r *reader) tellLocked(st *stall) {
	if r.p.detail != nil {
		st.told = true
		r.p.detail.BatchFailing(r.shardID, st.failure())
	}
}

// behindBy notes what an answer said: how far the shard's reader is behind the stream's tip.
func (r *reader) behindBy(d time.Duration) {
	s := &r.sig
	s.mu.Lock()
	defer s.mu.Unlock()
	s.behind = d
	r.reportAgeLocked(time.Time{})
}

// answered notes a read's answer, its MillisBehindLatest (for a subscription, the last
// event's), and the records it left pending.
func (r *reader) answered(millisBehind int64) {
	s := &r.sig
	s.mu.Lock()
	defer s.mu.Unlock()
	s.behind = time.Duration(millisBehind) * time.Millisecond
	s.waiting = r.lastPending()
	r.reportAgeLocked(time.Time{})
}

// sent notes that records pending were sent (they are in flight, or handled). With slots they
// were only handed to them: they count until a slot sends the last of them (begin).
func (r *reader) sent() {
	if r.slots != nil {
		return
	}
	s := &r.sig
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting = r.lastPending()
	r.reportAgeLocked(time.Time{})
}

// lastPending is the arrival of the last record pending; zero when none.
func (r *reader) lastPending() time.Time {
	if n := len(r.poll.pending); n > 0 {
		return r.poll.pending[n-1].ArrivalTime
	}
	return time.Time{}
}

// reportAgeLocked tells the observer the shard's age when it changed. now is read only when
// records are pending or in flight (zero: not yet read).
func (r *reader) reportAgeLocked(now time.Time) {
	s := &r.sig
	age := s.behind
	if !s.waiting.IsZero() {
		if now.IsZero() {
			now = r.p.now()
		}
		age = max(age, now.Sub(s.waiting))
	}
	for _, st := range s.flying {
		if st.newest.IsZero() {
			continue
		}
		if now.IsZero() {
			now = r.p.now()
		}
		age = max(age, now.Sub(st.newest))
	}
	if s.reported && age == s.age {
		return
	}
	s.age, s.reported = age, true
	r.p.obs.IteratorAge(r.shardID, age)
}

// sending notes that st's batch, recs, is being sent: the first time, it begins (its time
// towards blocked runs from now, unless it was set: a bisected half keeps its batch's) and joins
// the shard's batches in flight.
func (r *reader) sending(st *stall, recs []source.Record) {
	newest := recs[len(recs)-1].ArrivalTime
	if !st.flying {
		st.first, st.last = recs[0].SequenceNumber, recs[len(recs)-1].SequenceNumber
	}
	r.begin(st, newest)
}

// begin puts st in flight, if it is not.
func (r *reader) begin(st *stall, newest time.Time) {
	s := &r.sig
	s.mu.Lock()
	defer s.mu.Unlock()
	now := r.p.now()
	if !st.flying {
		if st.since.IsZero() {
			st.since = now
		}
		st.flying, st.newest = true, newest
		s.flying = append(s.flying, st)
		if !newest.IsZero() && !newest.Before(s.waiting) { // the last record waiting is in flight now
			s.waiting = time.Time{}
		}
		if len(s.flying) == 1 {
			r.p.sigClock.add(r)
		}
	}
	r.reportAgeLocked(now)
}

// ended takes st out of flight: its batch went through or was discarded (handled), or is no
// longer handled here (a stop, a lost lease). A shard blocked on it alone is reported unblocked;
// "no longer blocked" is logged only when the batch was handled.
func (r *reader) ended(st *stall, handled bool) {
	s := &r.sig
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.flying {
		for i, f := range s.flying {
			if f == st {
				s.flying = append(s.flying[:i], s.flying[i+1:]...)
				break
			}
		}
		if len(s.flying) == 0 {
			r.p.sigClock.remove(r)
		}
	}
	wasBlocked, told := st.reported, st.told
	*st = stall{}
	if told { // the shard's other batch that failed last, if any, is what fails now
		r.retellLocked()
	}
	if wasBlocked {
		if s.blocked--; s.blocked == 0 {
			r.p.obs.ShardBlocked(r.shardID, false)
			if handled {
				r.p.log.Info("shard no longer blocked", "shard_id", r.shardID)
			} else {
				r.p.log.Info("shard still blocked when its reader stopped: the batch was not handled here", "shard_id", r.shardID)
			}
		}
	}
	r.reportAgeLocked(time.Time{})
}

// retellLocked tells a DetailObserver the failure of the shard's batch in flight that failed
// last, or that none is failing.
func (r *reader) retellLocked() {
	s := &r.sig
	for i := len(s.flying) - 1; i >= 0; i-- {
		if st := s.flying[i]; st.told {
			r.p.detail.BatchFailing(r.shardID, st.failure())
			return
		}
	}
	r.p.detail.BatchFailing(r.shardID, BatchFailure{})
}

// judgeLocked reports the shard's batches in flight that have gone on for blockedAfter by now
// as blocked, and its age; it returns the earliest time another would be (zero: none).
func (r *reader) judgeLocked(now time.Time) (next time.Time) {
	s := &r.sig
	for _, st := range s.flying {
		due := st.since.Add(r.p.blockedAfter)
		if st.reported {
			continue
		}
		if now.Before(due) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		st.reported = true
		if st.cause == "" {
			st.cause = causeHanging
		}
		r.tellLocked(st) // blocked now, and failing or hanging
		if s.blocked++; s.blocked == 1 {
			r.p.obs.ShardBlocked(r.shardID, true)
			r.p.log.Warn("shard blocked: retrying the same batch", "shard_id", r.shardID,
				"failing_for", now.Sub(st.since).Round(time.Millisecond), "blocked_after", r.p.blockedAfter, "cause", s.causeLocked())
		}
	}
	r.reportAgeLocked(now)
	return next
}

// causeLocked is why the shard is blocked: the failure of its batches in flight that began last
// (a failure record's delivery, a bisected half: what its batch waits for).
func (s *signals) causeLocked() string {
	for i := len(s.flying) - 1; i >= 0; i-- {
		if c := s.flying[i].cause; c != "" {
			return c
		}
	}
	return causeHanging
}

// causeHanging is the cause of a batch blocked before any failure.
const causeHanging = "an invocation has not returned"

// clockTick is how often the clock reports the age of shards with batches in flight.
const clockTick = time.Second

// signalClock is the Poller's goroutine that judges the shards with batches in flight on the clock:
// blocked at the instant their time is up, and their growing age every clockTick. It is owned by
// Run (started before the readers, stopped after them) and sleeps while no batch is in flight.
type signalClock struct {
	mu      sync.Mutex
	readers map[*reader]struct{}
	kick    chan struct{} // 1-buffered: the first reader added
}

func newSignalClock() *signalClock {
	return &signalClock{readers: map[*reader]struct{}{}, kick: make(chan struct{}, 1)}
}

// add watches r's batches in flight.
func (c *signalClock) add(r *reader) {
	c.mu.Lock()
	c.readers[r] = struct{}{}
	first := len(c.readers) == 1
	c.mu.Unlock()
	if first {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// remove stops watching r.
func (c *signalClock) remove(r *reader) {
	c.mu.Lock()
	delete(c.readers, r)
	c.mu.Unlock()
}

// run judges the readers added every clockTick, and at the instant one's batch is due to be
// blocked, until ctx ends.
func (c *signalClock) run(ctx context.Context, p *Poller) {
	t := time.NewTimer(clockTick)
	defer t.Stop()
	var readers []*reader // reused
	for {
		c.mu.Lock()
		none := len(c.readers) == 0
		c.mu.Unlock()
		if none {
			select {
			case <-ctx.Done():
				return
			case <-c.kick:
			}
		}
		wait := min(clockTick, p.blockedAfter)
		now := p.now()
		readers = c.sweep(readers[:0])
		for _, r := range readers {
			r.sig.mu.Lock()
			if next := r.judgeLocked(now); !next.IsZero() {
				wait = min(wait, max(next.Sub(now), time.Millisecond))
			}
			r.sig.mu.Unlock()
		}
		clear(readers)
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep appends the readers watched to rs.
func (c *signalClock) sweep(rs []*reader) []*reader {
	c.mu.Lock()
	defer c.mu.Unlock()
	for r := range c.readers {
		rs = append(rs, r)
	}
	return rs
}
