package chaos

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/kinesis-esm/esm/internal/ctxwait"
)

// reshape deals, under load, the changes of the stream's shards (the feed's: Kinesis reshards
// or DynamoDB rotations) and the process fault drawn before each: a worker paused past its lease
// or killed, mid-invocation, just before the change, so that the others finish (and clean up)
// the parents while it is gone.
func (r *runner) reshape(ctx context.Context, rng *rand.Rand) {
	var faults sync.WaitGroup
	defer faults.Wait()
	for _, c := range r.feed.changes(time.Now(), r.cfg.Duration, rng) {
		if kind := c.fault(rng); kind != "" {
			faultAt := c.at.Add(-1300 * time.Millisecond)
			if !ctxwait.Sleep(ctx, time.Until(faultAt)) {
				return
			}
			if i, ok := r.claimInvoking(ctx, rng); ok {
				switch {
				case strings.HasPrefix(kind, "sigkill"):
					down := time.Duration(500+rng.IntN(2500)) * time.Millisecond
					faults.Go(func() { r.kill(ctx, i, down, kind) })
				default:
					d := r.cfg.LeaseDuration + time.Duration(2000+rng.IntN(3000))*time.Millisecond
					faults.Go(func() { r.pause(ctx, i, d, kind) })
				}
			}
		}
		if !ctxwait.Sleep(ctx, time.Until(c.at)) {
			return
		}
		if c.do == nil {
			continue
		}
		what, err := c.do(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logf("reshard %s: %v", c.name, err)
				r.counts.AddKind("reshard failed")
			}
			continue
		}
		r.counts.AddKind(c.name)
		r.mu.Lock()
		r.reshards = append(r.reshards, what)
		r.mu.Unlock()
	}
}

// claim picks a running worker that is under no other fault and marks it busy.
func (r *runner) claim(rng *rand.Rand) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var free []int
	for i, w := range r.workers {
		if !r.busy[i] && w.Running() {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return 0, false
	}
	i := free[rng.IntN(len(free))]
	r.busy[i] = true
	return i, true
}

// restartExited starts again the workers that exited on their own.
func (r *runner) restartExited() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.workers {
		if !r.busy[i] && !w.Running() {
			if err := w.Start(); err != nil {
				r.cfg.Logf("restart %s: %v", w.ID, err)
			}
		}
	}
}

func (r *runner) release(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.busy[i] = false
}

func (r *runner) record(kind string, i int, from time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, FaultEvent{Kind: kind, Worker: r.workers[i].ID, From: from, To: time.Now()})
	r.counts.AddKind(kind)
}

// kill ends worker i with SIGKILL and starts it again after down.
// slowWindow is how long claimInvoking waits for a free worker to start a long invocation.
const slowWindow = 5 * time.Second

// claimInvoking claims a worker to fault mid-invocation: it makes the invocations every free
// worker starts long (SlowFor) and claims the first whose long invocation runs (AwaitSlow), at
// most slowWindow later; when none invokes meanwhile, a free worker at random. Picking the
// worker first and waiting a fixed second landed mid-invocation for 0 of 9 faults in a 25-s
// seed on a loaded machine (a worker invoked every 2-3 s, or held no shard with records).
func (r *runner) claimInvoking(ctx context.Context, rng *rand.Rand) (int, bool) {
	r.mu.Lock()
	var ids []string
	for i, w := range r.workers {
		if !r.busy[i] && w.Running() {
			ids = append(ids, w.ID)
		}
	}
	r.mu.Unlock()
	for _, id := range ids {
		r.fn.SlowFor(id, slowWindow)
	}
	first, ok := r.fn.AwaitSlow(ctx, ids, slowWindow)
	for _, id := range ids {
		r.fn.SlowFor(id, 0)
	}
	if ok {
		if i, claimed := r.claimID(first); claimed {
			return i, true
		}
	}
	return r.claim(rng)
}

// claimID claims the worker of that id if it is running and under no other fault.
func (r *runner) claimID(id string) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.workers {
		if w.ID == id && !r.busy[i] && w.Running() {
			r.busy[i] = true
			return i, true
		}
	}
	return 0, false
}

func (r *runner) kill(ctx context.Context, i int, down time.Duration, kind string) {
	defer r.release(i)
	w := r.workers[i]
	from := time.Now()
	w.Kill()
	r.record(kind, i, from)
	ctxwait.Sleep(context.WithoutCancel(ctx), down)
	if err := w.Start(); err != nil {
		r.cfg.Logf("restart %s: %v", w.ID, err)
	}
}

// pause stops worker i for d (past its lease), then resumes it.
func (r *runner) pause(ctx context.Context, i int, d time.Duration, kind string) {
	defer r.release(i)
	w := r.workers[i]
	from := time.Now()
	w.Pause()
	ctxwait.Sleep(ctx, d)
	w.Resume()
	r.record(kind, i, from)
}

// faultKinds are the faults the schedule deals, one worker at a time, to the workers of a stream
// read through stream (Kinesis or DynamoDB Streams): partitions from the services named, and
// process faults.
func faultKinds(stream Service) []string {
	return []string{"partition dynamodb", "partition " + stream.String(), "partition dynamodb+" + stream.String(), "partition function",
		"sigkill", "sigstop", "sigterm"}
}

// partitionOf is the services a partition's kind names ("partition dynamodb+kinesis": DynamoDB
// and Kinesis), or nil for a kind that is no partition.
func partitionOf(kind string) []Service {
	names, ok := strings.CutPrefix(kind, "partition ")
	if !ok {
		return nil
	}
	var out []Service
	for _, name := range strings.Split(names, "+") {
		for s := range numServices {
			if s.String() == name {
				out = append(out, s)
			}
		}
	}
	return out
}

// faults deals faults to the workers from a shuffled deck of every kind, one every 1–3 s after
// the previous one ended, after a 2–4 s start; each but a SIGTERM to a worker running a long
// invocation when one does within slowWindow (claimInvoking). It restarts a worker that exited on its own (the
// judge reports the exit).
func (r *runner) faults(ctx context.Context, rng *rand.Rand) {
	if !ctxwait.Sleep(ctx, time.Duration(2000+rng.IntN(2000))*time.Millisecond) {
		return
	}
	var deck []string
	for {
		r.restartExited()
		if len(deck) == 0 {
			deck = faultKinds(r.feed.service())
			rng.Shuffle(len(deck), func(a, b int) { deck[a], deck[b] = deck[b], deck[a] })
		}
		kind := deck[0]
		deck = deck[1:]
		claim := r.claimInvoking
		if kind == "sigterm" { // a stop waits for its invocations anyway
			claim = func(context.Context, *rand.Rand) (int, bool) { return r.claim(rng) }
		}
		if i, ok := claim(ctx, rng); ok {
			r.inject(ctx, rng, i, kind)
		}
		if !ctxwait.Sleep(ctx, time.Duration(1000+rng.IntN(2000))*time.Millisecond) {
			return
		}
	}
}

// inject applies one fault to worker i (claimed) and waits for its end.
func (r *runner) inject(ctx context.Context, rng *rand.Rand, i int, kind string) {
	w := r.workers[i]
	lease := r.cfg.LeaseDuration
	from := time.Now()
	switch kind {
	case "sigstop":
		r.pause(ctx, i, lease+time.Duration(500+rng.IntN(4500))*time.Millisecond, kind)
		return
	case "sigkill":
		r.kill(ctx, i, time.Duration(500+rng.IntN(2500))*time.Millisecond, kind)
		return
	case "sigterm":
		defer r.release(i)
		w.AwaitLogging(10 * time.Second)
		from = time.Now()
		if err := w.Term(termWait); err != nil {
			r.cfg.Logf("%v", err)
		}
		r.record(kind, i, from)
		if err := w.Start(); err != nil {
			r.cfg.Logf("restart %s: %v", w.ID, err)
			return
		}
		if rng.IntN(2) == 0 { // again, while it starts (describing the stream and the lease table)
			w.AwaitLogging(10 * time.Second)
			ctxwait.Sleep(context.WithoutCancel(ctx), time.Duration(rng.IntN(1000))*time.Millisecond)
			from = time.Now()
			if err := w.Term(termWait); err != nil {
				r.cfg.Logf("%v", err)
			}
			r.record("sigterm at start-up", i, from)
			if err := w.Start(); err != nil {
				r.cfg.Logf("restart %s: %v", w.ID, err)
			}
		}
		return
	}
	defer r.release(i)
	cut := partitionOf(kind)
	for _, s := range cut {
		w.Proxy.Partition(s)
	}
	ctxwait.Sleep(ctx, lease+time.Duration(500+rng.IntN(4500))*time.Millisecond)
	for _, s := range cut {
		w.Proxy.Heal(s)
	}
	r.record(kind, i, from)
}
