package poller

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Parked subscriptions. A subscribed reader with nothing pending and no tumbling window open has
// nothing to do until its pump hands it an event: no timer of its own needs it (no batching
// window runs, no window is to close). Instead of waking every poll interval to find nothing, it
// parks: it waits for the pump's next event, the end of its context, or a wake from the Poller's
// watch. The watch is one goroutine that, every PollInterval while readers are parked, asks of
// each what that reader's own wake would have found: the lease no longer held
// (Coordinator.Held turns false by itself when a worker is cut off from its lease table and its
// claims fail), the shard shown closed by ListShards (read on with GetRecords), a slot failed. It
// wakes the readers concerned, and each finds the reason where it did before its wake (read,
// readSubscription, state). The pump does not hand a parked reader an event that carries nothing
// for it (no new records, not the shard's end): with no window open and nothing pending, how far
// behind such an event says the reader is changes none of its decisions, and its next read
// overwrites it. So an idle subscription wakes its reader neither once a poll interval nor for its
// keep-alive events (Kinesis sends one every few seconds), and what the wake was for is still
// noticed within a poll interval.

// subWatch is the Poller's watch over its parked readers.
type subWatch struct {
	every time.Duration // PollInterval

	mu     sync.Mutex
	parked map[*reader]struct{}
	kick   chan struct{} // 1-buffered: the first reader parked

	sweeps atomic.Int64 // for the tests
	woken  atomic.Int64 // for the tests
}

func newSubWatch(every time.Duration) *subWatch {
	return &subWatch{every: every, parked: map[*reader]struct{}{}, kick: make(chan struct{}, 1)}
}

// run sweeps the parked readers every interval while there are any, until ctx ends. A reader
// parked is swept at most an interval later.
func (w *subWatch) run(ctx context.Context) {
	t := time.NewTimer(w.every)
	defer t.Stop()
	var parked []*reader // reused
	for {
		w.mu.Lock()
		none := len(w.parked) == 0
		w.mu.Unlock()
		if none {
			select {
			case <-ctx.Done():
				return
			case <-w.kick:
			}
		}
		t.Reset(w.every)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		parked = w.sweep(parked[:0])
		clear(parked)
	}
}

// sweep wakes the parked readers that have a reason to run. The checks run outside w.mu (Held may
// take the coordinator's lock), so a reader may have left meanwhile: its wake waits in its channel
// and ends its next park at once, which costs it one read.
func (w *subWatch) sweep(parked []*reader) []*reader {
	w.sweeps.Add(1)
	w.mu.Lock()
	for r := range w.parked {
		parked = append(parked, r)
	}
	w.mu.Unlock()
	for _, r := range parked {
		if r.parkedWakes() {
			w.woken.Add(1)
			select {
			case r.woke <- struct{}{}:
			default: // one is waiting already
			}
		}
	}
	return parked
}

func (w *subWatch) add(r *reader) {
	w.mu.Lock()
	w.parked[r] = struct{}{}
	first := len(w.parked) == 1
	w.mu.Unlock()
	if first {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

func (w *subWatch) remove(r *reader) {
	w.mu.Lock()
	delete(w.parked, r)
	w.mu.Unlock()
}

// parks reports whether the subscribed reader waits for its next event parked: nothing pending
// and no tumbling window open, so that only the pump, its context or the watch has a reason to
// wake it.
func (r *reader) parks() bool {
	return r.p.watch != nil && len(r.poll.pending) == 0 && r.openWindowState() == nil
}

// park waits, parked, for the pump's next event (then in hand), the watch's wake or the end of
// ctx (then it reports false).
func (r *reader) park(ctx context.Context) bool {
	s, w := r.sub, r.p.watch
	if r.woke == nil {
		r.woke = make(chan struct{}, 1)
	}
	w.add(r)
	defer w.remove(r)
	s.parked.Store(s.received + 1)
	defer s.parked.Store(0)
	select {
	case ev := <-s.events:
		s.took(ev)
		return true
	case <-r.woke:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// parkedWakes reports whether a parked reader has a reason to run: the watch's checks. It runs on
// the watch's goroutine, reading only what is safe there (r.slots is set before the reader's
// first state).
func (r *reader) parkedWakes() bool {
	return !r.held() || r.p.efo.isClosed(r.shardID) || (r.slots != nil && r.slots.failed() != nil)
}
