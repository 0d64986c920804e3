package poller

import (
	"sync"
	"time"
)

// UntilCaughtUp makes Run end on its own once every shard of the mapping is caught up (see
// WithUntilCaughtUp and DESIGN.md, "Until caught up").
type UntilCaughtUp struct {
	// Idle, when positive, ends the run at the tips of the stream once it was idle that long
	// (no read returned a record for Idle); zero ends it at the tips of the start.
	Idle time.Duration
	// Reached, when set, is called once, when every shard is caught up, before Run stops.
	Reached func()
}

// WithUntilCaughtUp makes Run stop gracefully once every shard of the mapping is caught up, as u
// says, instead of polling until its context ends: in-flight invocations end, checkpoints are
// written and Run returns nil. A shard is caught up once a read of it since Run started answered
// that nothing is behind it (MillisBehindLatest 0, fewer records than asked, or a subscription's
// event saying so) and every record read up to that read has been handled (invoked and
// checkpointed, discarded, or filtered out), or once it is finished. The run ends at the first
// moment every shard the mapping knows (listed at the start, or learnt since from a parent's
// ChildShards or a listing) is finished or caught up, and, with u.Idle, no read of any shard has
// returned records for u.Idle before the shards' reads that showed them caught up. Shards this
// worker does not read (a Coordinator's other workers') are judged by the shared store: see
// DESIGN.md.
func WithUntilCaughtUp(u UntilCaughtUp) Option {
	return func(p *Poller) { p.until = newCaughtUp(u) }
}

// caughtUp follows which shards are caught up for WithUntilCaughtUp. The readers tell it (from
// their goroutines, the idle poller's and the slots'); the coordinator asks it when kicked.
type caughtUp struct {
	idle    time.Duration
	reached func()
	kick    chan struct{} // 1-buffered: a shard became caught up

	mu sync.Mutex
	// at: the shards caught up, each with when it was last shown (the start of the read that
	// showed it). With idle, records read take a shard out until it is caught up again.
	at map[string]time.Time
	// records: when a read last returned records (the run's start before any did).
	records time.Time
}

func newCaughtUp(u UntilCaughtUp) *caughtUp {
	return &caughtUp{idle: u.Idle, reached: u.Reached, kick: make(chan struct{}, 1), at: map[string]time.Time{}}
}

// started marks the run's start: with idle, the stream's idle time counts from it.
func (c *caughtUp) started(now time.Time) {
	c.mu.Lock()
	c.records = now
	c.mu.Unlock()
}

// recordsRead: a read of the shard that answered at now returned records. With idle, the shard is
// no longer caught up (its records are to be handled) and the stream was not idle until now.
func (c *caughtUp) recordsRead(shardID string, now time.Time) {
	if c.idle <= 0 {
		return // the tips of the start: once caught up, a shard stays so
	}
	c.mu.Lock()
	delete(c.at, shardID)
	if now.After(c.records) {
		c.records = now
	}
	c.mu.Unlock()
}

// caught: the shard is caught up, shown by a read that started at readStart, and the coordinator
// is kicked. Without idle the first time counts; with it the latest.
func (c *caughtUp) caught(shardID string, readStart time.Time) {
	c.mu.Lock()
	if _, ok := c.at[shardID]; !ok || c.idle > 0 {
		c.at[shardID] = readStart
	}
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// done reports whether every shard of unfinished is caught up (and, with idle, the stream was
// idle for it before each of them was shown caught up).
func (c *caughtUp) done(unfinished []string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range unfinished {
		at, ok := c.at[id]
		if !ok || (c.idle > 0 && at.Sub(c.records) < c.idle) {
			return false
		}
	}
	return true
}

// kicked is the channel the coordinator waits on for a shard caught up (nil without
// WithUntilCaughtUp: never ready).
func (c *caughtUp) kicked() <-chan struct{} {
	if c == nil {
		return nil
	}
	return c.kick
}

// noteRecords tells the tracker, if any, that a read of the reader's shard returned records.
func (r *reader) noteRecords() {
	if u := r.p.until; u != nil {
		u.recordsRead(r.shardID, r.p.now())
	}
}

// noteCaughtUp tells the tracker, if any, that the reader is caught up, when it is: it is about
// to read again (its state is stateRead), the last read left nothing behind it (with a
// subscription: the last event taken said so, and nothing of it is left), nothing read is
// pending, and with slots nothing dispatched is outstanding (else the slot that ends the last of
// it tells, see slotsIdle).
func (r *reader) noteCaughtUp() {
	u := r.p.until
	if u == nil || len(r.poll.pending) > 0 {
		return
	}
	behind, at := r.poll.behind, r.poll.caughtUpAt
	if s := r.sub; s != nil && s.events != nil {
		// A subscription reads as behind unless a probe showed otherwise (windowProbe): the
		// last event taken, made after the run started, says whether the shard was caught up.
		behind, at = s.received == 0 || s.has || s.behind > 0, r.p.now()
	}
	if behind {
		return
	}
	if r.slots != nil {
		r.slots.tip(at)
		if r.slots.track.outstanding() > 0 {
			return
		}
	}
	u.caught(r.shardID, at)
}

// tip records that the reader was caught up by a read that started at at, with every record read
// dispatched: once the slots finish what is outstanding, the shard is caught up (slotsIdle).
func (s *slots) tip(at time.Time) {
	s.mu.Lock()
	s.tipAt, s.atTip = at, true
	s.mu.Unlock()
}

// slotsIdle is called after the slots acked records: when none is outstanding and the reader
// was caught up with everything dispatched, the shard is caught up.
func (s *slots) slotsIdle() {
	u := s.r.p.until
	if u == nil || s.track.outstanding() > 0 {
		return
	}
	s.mu.Lock()
	at, ok := s.tipAt, s.atTip
	s.mu.Unlock()
	if ok {
		u.caught(s.r.shardID, at)
	}
}

// untilDone is the coordinator's check, when kicked or when a shard finished: once every shard
// it knows is finished or caught up, it stops the run (Reached first).
func (c *coordinator) untilDone() {
	u := c.p.until
	if u == nil || c.runCtx.Err() != nil {
		return
	}
	var unfinished []string
	for id := range c.g.shards {
		if !c.g.isFinished(id) {
			unfinished = append(unfinished, id)
		}
	}
	if !u.done(unfinished) {
		return
	}
	c.p.log.Info("every shard caught up; stopping", "shards", len(c.g.shards), "unfinished", len(unfinished))
	if u.reached != nil {
		u.reached()
	}
	c.stopRun()
}
