package poller

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesis-esm/esm/source"
)

// Idle polls. A caught-up polling reader (nothing pending, the last read said nothing is behind)
// hands its next polls to the Poller's idle poller instead of sleeping and reading itself: one goroutine wakes at each due time (the poll grid puts the polls of idle shards on the
// same instants), checks the lease and starts each due reader's call without waiting for it. The
// answer of an idle shard (no records, an iterator) is taken where it arrives: the read's
// bookkeeping (readDone), then, if the reader's next state is still a poll of an idle shard, the
// poll after it is queued. So an idle shard's polls wake none of its goroutines. Anything else
// wakes the reader: records, the shard's end, a failed call (its finish, which decodes, retries
// and classifies as Read does, runs on the reader's goroutine, then readFailed as after any read),
// a lost lease, a next state other than a poll. The calls start without a goroutine where the
// source is a ReadStarter (the Kinesis source's lean GetRecords path); else each is a Read on a
// caller (call).
//
// Ownership: while a reader waits in pollIdle, its state belongs to whichever of the idle poller
// and the call's completion holds its entry's lock; it takes the state back by taking the lock,
// when woken or when its context ends (then marked left: a completion that comes later drops its
// answer). Lock order: an entry's, then the idle poller's.

// idleBatch is how many calls of a due time the idle poller starts in one batch
// (ReadStarter.Batch): a batch holds back the other requests on its connections (a busy reader's)
// until it is sent, so it is kept to a few milliseconds of signing.
const idleBatch = 64

// readDone is what a started read's answer goes to: the page, or finish to run for the page or
// the error (ReadStarter.StartRead).
type readDone func(page source.Page, finish func() (source.Page, error))

// startFunc starts a read of the shard at iterator; done gets its result.
type startFunc func(ctx context.Context, shardID, iterator string, limit int, done readDone)

// callerIdle is how long a caller (idlePolls.call) waits for another call before it ends: longer
// than a poll interval, so that the callers of the polls of one due time serve the next.
const callerIdle = 10 * time.Second

// idlePolls is the Poller's idle poller: a heap of the waiting readers' entries by due time and
// the goroutine that starts their calls.
type idlePolls struct {
	start startFunc
	batch func() (send func()) // of the starter (callBatcher), or a batch of nothing

	// The callers: goroutines that make the calls no stream takes (call), each kept for the
	// next call until it has waited callerIdle, so that the calls of each due time do not start
	// goroutines (and grow their stacks) anew.
	calls   sync.WaitGroup
	work    chan func()   // unbuffered: to a caller waiting for a call
	stopped chan struct{} // closed by stop: the callers end
	callers atomic.Int64  // callers started, for the tests
	live    atomic.Int64  // callers not ended, for the tests

	mu    sync.Mutex
	queue entryHeap
	kick  chan struct{} // 1-buffered: the earliest due time moved

	taken atomic.Int64 // answers taken where they arrived, for the tests
	wakes atomic.Int64 // readers woken, for the tests
}

// idleEntry is a reader's place in the idle poller.
type idleEntry struct {
	r    *reader
	wake chan idleWake // 1-buffered: at most one wake is outstanding
	done readDone

	mu    sync.Mutex      // the reader's state while it waits in pollIdle (see above)
	ctx   context.Context // the reader's runCtx, while it waits
	left  bool            // the reader took its state back: answers are dropped
	limit int             // of the call in flight

	due   time.Time // guarded by idlePolls.mu
	index int       // in the heap, -1 when not in it; guarded by idlePolls.mu
}

// idleWake is what wakes a waiting reader: a lost lease (err), an answer to take (page, or finish
// to run for it; the call asked for the entry's limit), or nothing (the reader's next state is not
// a poll: the answer was taken).
type idleWake struct {
	err      error
	answered bool // page is an answer
	page     source.Page
	finish   func() (source.Page, error)
}

// newIdlePolls returns the idle poller of a Poller that reads src: its calls are started by src's
// StartRead where it is a ReadStarter, in its batches, and the calls it does not start are src's
// Read on a caller.
func newIdlePolls(src Source) *idlePolls {
	d := &idlePolls{kick: make(chan struct{}, 1), batch: func() func() { return func() {} },
		work: make(chan func()), stopped: make(chan struct{})}
	blocking := d.blocking(src)
	d.start = blocking
	if st, ok := src.(ReadStarter); ok {
		d.batch = st.Batch
		d.start = func(ctx context.Context, shardID, iterator string, limit int, done readDone) {
			if !st.StartRead(ctx, shardID, iterator, limit, done) {
				blocking(ctx, shardID, iterator, limit, done)
			}
		}
	}
	return d
}

// blocking makes each call with src's Read on a caller: for a source that is not a ReadStarter
// (the simulation's and the tests' fakes: the same states and hand-overs as the lean path's), and
// for the calls the lean path cannot start on a stream (HTTP/1.1).
func (d *idlePolls) blocking(src Source) startFunc {
	return func(ctx context.Context, shardID, iterator string, limit int, done readDone) {
		d.call(func() {
			page, err := src.Read(ctx, shardID, iterator, limit)
			if err != nil {
				done(source.Page{}, func() (source.Page, error) { return source.Page{}, err })
				return
			}
			done(page, nil)
		})
	}
}

// call runs f on a caller waiting for a call, or on a new one.
func (d *idlePolls) call(f func()) {
	select {
	case d.work <- f:
	default:
		d.calls.Add(1)
		d.callers.Add(1)
		d.live.Add(1)
		go d.caller(f)
	}
}

// caller runs f, then the calls it is handed, until it has waited callerIdle for one or stop.
func (d *idlePolls) caller(f func()) {
	defer d.calls.Done()
	defer d.live.Add(-1)
	t := time.NewTimer(callerIdle)
	defer t.Stop()
	for {
		f()
		t.Reset(callerIdle)
		select {
		case f = <-d.work:
		case <-t.C:
			return
		case <-d.stopped:
			return
		}
	}
}

// run starts the calls of the entries as they fall due, until ctx ends: those of a due time in
// batches of idleBatch.
func (d *idlePolls) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var fired []*idleEntry // the entries due, reused
	for {
		d.mu.Lock()
		now := time.Now()
		for d.queue.Len() > 0 && !d.queue[0].due.After(now) {
			fired = append(fired, heap.Pop(&d.queue).(*idleEntry))
		}
		next := time.Duration(-1)
		if d.queue.Len() > 0 {
			next = d.queue[0].due.Sub(now)
		}
		d.mu.Unlock()
		for i := 0; i < len(fired); i += idleBatch {
			send := d.batch()
			for _, e := range fired[i:min(i+idleBatch, len(fired))] {
				d.fire(e)
			}
			send()
		}
		clear(fired)
		fired = fired[:0]
		var at <-chan time.Time
		if next >= 0 {
			t.Reset(next)
			at = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-at:
		}
	}
}

// stop ends the callers, once their calls are done (their contexts, the readers', have ended).
func (d *idlePolls) stop() {
	close(d.stopped)
	d.calls.Wait()
}

// schedule queues e's next poll at due; e.mu is held.
func (d *idlePolls) schedule(e *idleEntry, due time.Time) {
	d.mu.Lock()
	e.due = due
	heap.Push(&d.queue, e)
	first := e.index == 0
	d.mu.Unlock()
	if first {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// remove takes e out of the queue, if it is in it; e.mu is held.
func (d *idlePolls) remove(e *idleEntry) {
	d.mu.Lock()
	if e.index >= 0 {
		heap.Remove(&d.queue, e.index)
	}
	d.mu.Unlock()
}

// fire starts e's poll, which fell due: as read does after its wait (the lease, the limit, the
// poll's time), then the call, without waiting for it.
func (d *idlePolls) fire(e *idleEntry) {
	r := e.r
	held := r.held() // not under e.mu: a reader stopping takes it, and Held may take a while
	e.mu.Lock()
	if e.left {
		e.mu.Unlock()
		return
	}
	switch {
	case e.ctx.Err() != nil: // stopping: the reader's state says so
		e.wakeLocked(idleWake{})
		e.mu.Unlock()
		return
	case !held:
		e.wakeLocked(idleWake{err: errLost})
		e.mu.Unlock()
		return
	}
	e.limit = r.readLimit()
	r.poll.lastPoll = r.p.now()
	ctx, iter, limit := e.ctx, r.iter, e.limit
	e.mu.Unlock()
	d.start(ctx, r.shardID, iter, limit, e.done)
}

// answered takes the result of e's call (done of a startFunc).
func (e *idleEntry) answered(page source.Page, finish func() (source.Page, error)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.r
	if e.left { // the reader stopped meanwhile: what was read is dropped, but it was read (an
		// answer still to finish is left unread: finish runs on the caller's goroutines only)
		if finish == nil {
			r.p.obs.RecordsPolled(r.shardID, len(page.Records))
		}
		return
	}
	if finish != nil || len(page.Records) > 0 || page.Next == "" {
		e.wakeLocked(idleWake{answered: finish == nil, page: page, finish: finish})
		return
	}
	r.readDone(page, e.limit)
	r.p.idle.taken.Add(1)
	st, wait := r.state(e.ctx)
	if st == stateRead {
		r.noteCaughtUp()
	}
	if st == stateRead && r.pollsIdle() {
		r.p.idle.schedule(e, time.Now().Add(wait))
		return
	}
	e.wakeLocked(idleWake{})
}

// wakeLocked hands w to the waiting reader; e.mu is held.
func (e *idleEntry) wakeLocked(w idleWake) {
	e.r.p.idle.wakes.Add(1)
	e.wake <- w
}

// pollsIdle reports whether the reader's next poll goes to the idle poller: it polls (no
// subscription), is caught up and has nothing pending.
func (r *reader) pollsIdle() bool {
	return r.p.idle != nil && r.sub == nil && !r.poll.behind && len(r.poll.pending) == 0
}

// pollIdle is read for a reader that pollsIdle: its polls go to the idle poller until one wakes
// it, or its context ends.
func (r *reader) pollIdle(ctx context.Context, wait time.Duration) error {
	e := r.idle
	if e == nil {
		e = &idleEntry{r: r, wake: make(chan idleWake, 1), index: -1}
		e.done = e.answered
		r.idle = e
	}
	e.mu.Lock()
	e.ctx, e.left = ctx, false
	r.p.idle.schedule(e, time.Now().Add(wait))
	e.mu.Unlock()
	var w idleWake
	select {
	case w = <-e.wake:
	case <-ctx.Done():
		e.mu.Lock()
		e.left = true
		r.p.idle.remove(e)
		e.mu.Unlock()
		select { // a wake sent before: the reader stops, dropping what was read
		case w := <-e.wake:
			if w.finish != nil { // on this goroutine, as finish wants
				var err error
				w.page, err = w.finish()
				w.answered = err == nil
			}
			if w.answered {
				r.p.obs.RecordsPolled(r.shardID, len(w.page.Records))
			}
		default:
		}
		return errStopped
	}
	// The state is the reader's again: a wake is the last thing the idle poller and the call's
	// completion do for a reader until it waits again.
	e.mu.Lock()
	limit := e.limit
	e.mu.Unlock()
	switch {
	case w.err != nil:
		return w.err
	case w.finish != nil:
		page, err := w.finish()
		if err != nil {
			return r.readFailed(ctx, err)
		}
		r.readDone(page, limit)
	case w.answered:
		r.readDone(w.page, limit)
	}
	return nil
}

// entryHeap orders entries by due time (container/heap).
type entryHeap []*idleEntry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *entryHeap) Push(x any) {
	e := x.(*idleEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}
