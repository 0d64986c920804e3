package poller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/invoke"
)

// DefaultInvocationBound is the invocation bound when none is given (WithInvocationBound): the
// default function timeout (3 s) plus the 10 s Lambda allows before it.
const DefaultInvocationBound = invoke.DefaultTimeout + 10*time.Second

// WithInvocationBound sets B, how long an invocation may run from the moment it is sent (default
// DefaultInvocationBound): the function's timeout plus what may come before it (an init, a cold
// start). The lease table's takers of a dead worker's leases wait for the same bound; here, after
// an invocation whose outcome is unknown (see send), the shard's next invocation waits for it.
// Zero or negative keeps the default.
func WithInvocationBound(b time.Duration) Option {
	return func(p *Poller) {
		if b > 0 {
			p.bound = b
		}
	}
}

// lane is where one invocation at a time is sent: a shard's (ParallelizationFactor 1, and every
// final invocation of a tumbling window) or one slot's (the partition keys hashed to it).
type lane struct {
	mu sync.Mutex
	// until: an invocation sent on this lane whose outcome is unknown may run until then; the
	// lane's next invocation is not sent before.
	until time.Time
}

// invocation is one invocation for send to make.
type invocation struct {
	lane *lane
	// run ends the wait for the lane (a stop); ctx is the invocation's own (the work context,
	// with its span's trace header when traced).
	run, ctx context.Context
	// span, when set, starts the invocation's span (a batch's, when traced) and returns the
	// context it is made with.
	span func(ctx context.Context) context.Context
	call func(ctx context.Context) (invoke.Response, error)
}

// sent is what send knows of an invocation once it has returned.
type sent struct {
	resp invoke.Response
	err  error
	took time.Duration
	// ambiguous: the invocation failed after its request may have reached the function (a reset,
	// an EOF or a timeout after it was written, or the work context ending while it was in
	// flight). It may have run, and may still run, until the lane's until.
	ambiguous bool
}

// send is the one way an invocation leaves the poller: each attempt of a batch (failure.go, which
// also runs each half of a bisected batch, with or without slots) and each final invocation of a
// tumbling window (window.go, also at a shard's end). No invoker is called anywhere else, so every
// invocation gets, in this order:
//
//  1. the lane's wait: after an invocation whose outcome is unknown, the next one on its lane is
//     not sent until the invocation bound B has passed since that one was sent (a stop ends the
//     wait with errStopped, and the reader's lease is then abandoned, not handed over);
//  2. the lease check: Held before the call (errLost when not), and the start check
//     (invoke.WithStartCheck) that every invoker asks again just before it sends, after whatever
//     it waited for (a concurrency slot, an endpoint, an environment) and before each retry of its
//     own. The check's last yes is the invocation's send time. A Coordinator that is an
//     InvocationGate admits the invocation instead of Held, and its ticket is the start check;
//  3. the end: the outcome, and when it is ambiguous the lane's new until (send time + B); an
//     InvocationGate's ticket is told whether the invocation surely ended.
//
// An invocation is in flight from step 2's first yes (sending) to the call's return (ended).
func (r *reader) send(inv invocation) sent {
	if err := r.awaitLane(inv.run, inv.lane); err != nil {
		return sent{err: err}
	}
	check, ticket := r.held, InvocationTicket(nil)
	if g, ok := r.p.coord.(InvocationGate); ok {
		if ticket, ok = g.StartInvocation(inv.ctx, r.shardID); !ok {
			return sent{err: errLost}
		}
		check = ticket.Recheck
	} else if !r.held() {
		return sent{err: errLost}
	}
	if inv.ctx.Err() != nil { // the shutdown grace is over: nothing is sent any more
		return sent{err: errStopped}
	}
	ctx := inv.ctx
	if arn := r.p.functionARN; arn != "" {
		ctx = invoke.WithFunctionARN(ctx, arn) // what the mapping reports is what its function is invoked as
	}
	if inv.span != nil {
		ctx = inv.span(ctx)
	}
	var sentAt atomic.Int64 // UnixNano of the start check's last yes
	ctx = invoke.WithStartCheck(ctx, func() bool {
		if !check() {
			return false
		}
		sentAt.Store(time.Now().UnixNano()) // sending: the request may leave from now on
		return true
	})
	called := time.Now()
	resp, err := inv.call(ctx)
	s := sent{resp: resp, err: err, took: time.Since(called)}
	// ended: the call returned.
	if err != nil && (errors.Is(err, invoke.ErrAmbiguous) || inv.ctx.Err() != nil) {
		at := time.Unix(0, sentAt.Load())
		if sentAt.Load() == 0 { // an invoker that sends at once, without asking the check
			at = time.Now() // (or never sent: the work context ended first; then it costs a wait)
		}
		s.ambiguous = true
		r.mayRunUntil(inv.lane, at.Add(r.p.bound))
	}
	if ticket != nil {
		ticket.End(!s.ambiguous)
	}
	return s
}

// awaitLane waits until no invocation sent on l before may still run.
func (r *reader) awaitLane(run context.Context, l *lane) error {
	l.mu.Lock()
	until := l.until
	l.mu.Unlock()
	wait := time.Until(until)
	if wait <= 0 {
		return nil
	}
	r.p.log.Warn("an invocation of this shard whose outcome is unknown may still run: the next waits for the invocation bound",
		"shard_id", r.shardID, "wait", wait.Round(time.Millisecond))
	if !ctxwait.Sleep(run, wait) {
		return errStopped
	}
	return nil
}

// mayRunUntil records that an invocation of lane l may run until t.
func (r *reader) mayRunUntil(l *lane, t time.Time) {
	l.mu.Lock()
	if t.After(l.until) {
		l.until = t
	}
	l.mu.Unlock()
	for {
		cur := r.runsUntil.Load()
		if t.UnixNano() <= cur || r.runsUntil.CompareAndSwap(cur, t.UnixNano()) {
			return
		}
	}
}

// awaitRunning waits until no invocation of the shard may still run (mayStillRun), or ctx ends
// (false).
func (r *reader) awaitRunning(ctx context.Context) bool {
	wait := time.Until(time.Unix(0, r.runsUntil.Load()))
	return wait <= 0 || ctxwait.Sleep(ctx, wait)
}

// mayStillRun reports whether an invocation of the shard may still run: one failed ambiguously, or
// was cut off by the end of the shutdown grace, less than the invocation bound ago. Its lease must
// then not be handed over as if the invocation had ended (Abandoner).
func (r *reader) mayStillRun() bool { return time.Now().UnixNano() < r.runsUntil.Load() }
