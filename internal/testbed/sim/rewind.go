package sim

import (
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// Rewinds mid-run (issue 43): a schedule may replay the window [the run's start, At − D) of
// every shard while records flow. One worker on a file or memory store: it is stopped
// gracefully, the rewind is written into the store (poller.PlanRewind, as esm does on a state
// file) and it starts again. Workers on a lease table: lease.Rewind runs as esm rewind does,
// against the live fleet; each worker that sees the request is stopped as its runner stops it,
// and starts again once the request is done (as runner.runLeaseTable).

// EvRewind replays the window [start of the run, At − D) of every shard.
const EvRewind EventKind = "rewind"

// InvRewind is judged for a run with a rewind.
const InvRewind = "a rewind's window invoked again after it, in order per key; records after it handled before it not again"

// withRewind adds a rewind to about a third of the schedules (with tumbling windows too: the
// replay aggregates its windows afresh, judged per rewind in InvWindow), drawn from its own
// source so that the rest of a seed's schedule is as it was: one worker on a store, or several
// on a lease table (the driver's lease path below). The lease path found that the Kinesis fake read a subscription's AT_TIMESTAMP (epoch
// seconds) as a float64, 100.000023 ms for the run's start at 100 ms, leaving out the records
// of that millisecond (LEASES=1 seed 37).
func (s *Schedule) withRewind(length time.Duration) {
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0x7e41d))
	if rng.IntN(3) != 0 {
		return
	}
	at := length/3 + time.Duration(rng.Int64N(int64(length/2)))
	s.Events = append(s.Events, Event{At: at, Kind: EvRewind, D: time.Duration(rng.Int64N(int64(at / 2)))})
}

// rewound is a rewind as the world saw it.
type rewound struct {
	requested, applied time.Time
	until              time.Time
	// skip: what each shard had handled before it (its replay does not invoke it again).
	skip map[string]poller.Rewind
	err  error
}

// rewindRun is a lease-table rewind in progress.
type rewindRun struct {
	done chan struct{}
	rw   *rewound
}

// rewind starts the event's rewind.
func (d *driver) rewind(e Event) {
	w := d.w
	now := time.Now()
	q := poller.RewindRequest{Timestamp: d.begin, Until: now.Add(-e.D)}
	if !q.Until.After(q.Timestamp) {
		return
	}
	rw := &rewound{requested: now, until: q.Until, skip: map[string]poller.Rewind{}}
	w.mu.Lock()
	w.rewinds = append(w.rewinds, rw)
	w.mu.Unlock()
	listed, err := kinesissrc.ListShards(context.Background(), w.fake, w.arn)
	if err != nil {
		w.violate("rewind: list shards: %v", err)
		return
	}
	listing := kinesissrc.ShardsOf(listed)
	if w.db == nil {
		for _, sl := range d.slots {
			d.stop(sl, true)
			sl.restart = time.Now()
		}
		stored, err := w.base.Load(context.Background())
		if err != nil {
			w.violate("rewind: load: %v", err)
			return
		}
		plan := poller.PlanRewind(q, listing, stored, 1)
		if err := w.base.Save(context.Background(), plan.Progress); err != nil {
			w.violate("rewind: save: %v", err)
			return
		}
		w.rewoundPlan(rw, plan.Progress)
		return
	}
	run := &rewindRun{done: make(chan struct{}), rw: rw}
	d.rewinding = run
	go func() { // owned by the driver: awaited in until and at the run's end
		defer close(run.done)
		_, err := lease.Rewind(context.Background(), w.db, leaseTable, listing, q, lease.RewindOptions{By: "sim", LeaseDuration: w.s.longestLease()})
		if err != nil {
			rw.err = err
			w.logf("rewind refused: %v", err)
			return
		}
		ls, err := lease.ListLeases(context.Background(), w.db, leaseTable)
		if err != nil {
			w.violate("rewind: list leases: %v", err)
			return
		}
		progress := map[string]poller.ShardProgress{}
		for _, l := range ls {
			progress[l.ShardID] = l.Progress
		}
		w.rewoundPlan(rw, progress)
	}()
}

// rewoundPlan records what the rewind wrote.
func (w *world) rewoundPlan(rw *rewound, progress map[string]poller.ShardProgress) {
	w.mu.Lock()
	rw.applied = time.Now()
	for id, pr := range progress {
		if pr.Rewind != nil {
			rw.skip[id] = *pr.Rewind
		}
	}
	w.mu.Unlock()
	w.logf("rewind applied: window until %s, %d shards", rw.until.Sub(epoch), len(rw.skip))
}

// rewindCases adds to cases what until waits for besides its timer and the workers' ends: the
// rewind in progress ending, and each worker seeing a rewind requested. The function it
// returns handles the i-th of them.
func (d *driver) rewindCases(cases *[]reflect.SelectCase) func(i int) {
	var handlers []func()
	if run := d.rewinding; run != nil {
		*cases = append(*cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(run.done)})
		handlers = append(handlers, d.rewindDone)
	}
	for _, sl := range d.slots {
		if sl.inc != nil && sl.inc.rewindCh != nil {
			*cases = append(*cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(sl.inc.rewindCh)})
			handlers = append(handlers, func() { d.stoppedForRewind(sl) })
		}
	}
	return func(i int) { handlers[i]() }
}

// rewindDone: the lease-table rewind in progress ended; the workers stopped for it start.
func (d *driver) rewindDone() {
	d.rewinding = nil
	for _, sl := range d.slots {
		if sl.heldForRewind {
			sl.heldForRewind, sl.restart = false, time.Now()
		}
	}
}

// stoppedForRewind: the worker saw the request; it stops as its runner stops it, and waits.
func (d *driver) stoppedForRewind(sl *slot) {
	d.stop(sl, true)
	sl.heldForRewind = true
	sl.restart = time.Now().Add(time.Hour)
	if d.rewinding == nil {
		d.rewindDone()
	}
}

// rewindRevision is the revision a worker starts under, and whether it may start now.
func (w *world) rewindRevision() (int64, bool) {
	st, err := lease.ReadRewind(context.Background(), w.db, leaseTable)
	if err != nil {
		return 0, false
	}
	return st.Revision, !st.InProgress()
}

// checkRewindsLocked judges each applied rewind: every record of its window (not trimmed, not
// filtered out) that was handled before the request is invoked again after the rewind (or,
// blocked again in the replay, goes to the destination again), the
// first times of each key in put order; a record after the window that its shard had handled
// before (its skip) is invoked in no call that started after the rewind.
func (w *world) checkRewindsLocked(j *judge, calls []*call) {
	for _, rw := range w.rewinds {
		if rw.applied.IsZero() {
			continue
		}
		seen, last := map[string]bool{}, map[string]int{}
		for _, c := range calls {
			if c.start.Before(rw.applied) {
				continue
			}
			for _, seq := range c.seqs {
				r := w.recs[seq]
				if !r.at.Before(rw.until) {
					sk, ok := rw.skip[r.shard]
					j.res.Checked[InvRewind]++
					if ok && (sk.SkipAll || sk.Skip != "" && fakekinesis.CompareSeq(seq, sk.Skip) <= 0) {
						j.bad("rewind: %s (%s:%d), after the window and handled before the rewind, invoked again at %s", seq, r.key, r.n, c.start.Sub(epoch))
					}
					continue
				}
				if seen[seq] {
					continue
				}
				seen[seq] = true
				j.res.Checked[InvRewind]++
				if n, ok := last[r.key]; ok && r.n < n {
					j.bad("rewind: replay of %s:%d at %s after %s:%d", r.key, r.n, c.start.Sub(epoch), r.key, n)
				}
				last[r.key] = max(last[r.key], r.n)
			}
		}
		for seq, r := range w.recs {
			if !r.at.Before(rw.until) || w.trimmed[r.shard] || w.excused[seq] || (w.s.Filter && r.tag == "b") || !r.at.Before(rw.requested) {
				continue
			}
			j.res.Checked[InvRewind]++
			if !seen[seq] && !w.discardedAfterLocked(seq, rw.applied) {
				j.bad("rewind: %s (%s:%d) of the window was not invoked again after the rewind", seq, r.key, r.n)
			}
		}
	}
}

// replayedLocked says whether r, first invoked at start, was in the window of a rewind applied
// before then.
func (w *world) replayedLocked(r *rec, start time.Time) bool {
	for _, rw := range w.rewinds {
		if !rw.applied.IsZero() && !start.Before(rw.applied) && r.at.Before(rw.until) {
			return true
		}
	}
	return false
}

// discardedAfterLocked says whether seq went to the destination after t.
func (w *world) discardedAfterLocked(seq string, t time.Time) bool {
	for _, d := range w.discards {
		if d.at.After(t) && slices.Contains(d.seqs, seq) {
			return true
		}
	}
	return false
}
