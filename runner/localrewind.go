package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source"
)

// Rewinds of a mapping that keeps its progress in a store of its own (a state file, memory: esm
// run without --lease-table). Only the running process can write its store (the state file is
// locked), so the rewind is done by it: the request is checked against the stream, the poller
// is stopped as at SIGTERM (in-flight invocations end and checkpoint), the rewind is written into
// the store (poller.PlanRewind, as a lease table's items are written) and the poller starts
// again from it. Nothing of the old position is invoked once the new one is read: the poller
// that read it has returned.

// LocalRewinds is where rewinds reach such a mapping (Hooks.Rewinds): the caller keeps it and
// calls Rewind. Safe for concurrent use; one rewind is done at a time.
type LocalRewinds struct {
	ch  chan *localRewind
	mu  sync.Mutex
	rev int64 // the last revision applied
}

// NewLocalRewinds returns a LocalRewinds to give to Hooks.Rewinds.
func NewLocalRewinds() *LocalRewinds { return &LocalRewinds{ch: make(chan *localRewind)} }

// localRewind is one request: checked against the stream's listing (shards) before the mapping
// stops for it, then answered once.
type localRewind struct {
	q        poller.RewindRequest
	by       string
	at       time.Time
	shards   []source.Shard
	checked  RewindOutcome
	stopping time.Time
	done     chan struct{}
	out      RewindOutcome
	err      error
}

func (l *localRewind) answer(out RewindOutcome, err error) {
	l.out, l.err = out, err
	close(l.done)
}

// Rewind asks the running mapping to apply q (asked by by) and waits for the outcome. A
// request at fault is a *poller.ValidationError; one the mapping did not take up before ctx
// ended (it is not running, or is starting) wraps lease.ErrRewindRefused. Once taken up it
// completes, whatever ctx.
func (l *LocalRewinds) Rewind(ctx context.Context, q poller.RewindRequest, by string) (RewindOutcome, error) {
	req := &localRewind{q: q, by: by, at: time.Now(), done: make(chan struct{})}
	select {
	case l.ch <- req:
	case <-ctx.Done():
		return RewindOutcome{}, fmt.Errorf("%w: the mapping is not running (or still starting); nothing was changed", lease.ErrRewindRefused)
	}
	<-req.done
	return req.out, req.err
}

// runLocal runs the mapping on st, a store of its own, and applies the rewinds m.Hooks.Rewinds
// hands it: each stops the poller, is written into the store, and the poller starts again.
func (r *Runner) runLocal(ctx context.Context, m Mapping, e engine, st *opened) error {
	for {
		rctx, stop := context.WithCancel(ctx)
		var req *localRewind
		taken := make(chan struct{})
		go func() { // owned: ends with rctx, waited for below
			defer close(taken)
			if req = r.awaitLocalRewind(rctx, m, e.src); req != nil {
				stop()
			}
		}()
		err := r.runOn(rctx, m, e, st)
		stop()
		<-taken
		if req == nil {
			return err
		}
		if err != nil {
			req.answer(RewindOutcome{}, fmt.Errorf("%w: the mapping failed while it stopped for the rewind: %w", lease.ErrRewindRefused, err))
			return err
		}
		out, err := m.Hooks.Rewinds.apply(context.WithoutCancel(ctx), st.store, req)
		tellLocalRewind(m, req, out.Revision, err)
		req.answer(out, err)
		if err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// awaitLocalRewind waits for a rewind request and checks it against the stream: one at fault
// is answered at once and the mapping goes on; a valid one is returned, the mapping to be
// stopped for it. Nil when ctx ended first.
func (r *Runner) awaitLocalRewind(ctx context.Context, m Mapping, src poller.Source) *localRewind {
	for {
		select {
		case <-ctx.Done():
			return nil
		case req := <-m.Hooks.Rewinds.ch:
			shards, out, err := checkRewind(ctx, r.kin, src.Identity().ARN, req.q, time.Now(), m.Hooks.Logger)
			if err != nil {
				req.answer(RewindOutcome{}, err)
				continue
			}
			req.shards, req.checked, req.stopping = shards, out, time.Now()
			m.Hooks.Logger.Info("stopping for a rewind; starting again once it is applied", "by", req.by, "rewind", req.q.String())
			tellLocalRewind(m, req, 0, nil)
			return req
		}
	}
}

// apply writes req into store, read with no poller running: the rewound shards and their
// descendants (poller.PlanRewind), under the next revision.
func (l *LocalRewinds) apply(ctx context.Context, store poller.Store, req *localRewind) (RewindOutcome, error) {
	stored, err := store.Load(ctx)
	if err != nil {
		return RewindOutcome{}, fmt.Errorf("%w: read the progress: %w", lease.ErrRewindRefused, err)
	}
	l.mu.Lock()
	for _, pr := range stored {
		if pr.Rewind != nil {
			l.rev = max(l.rev, pr.Rewind.Revision)
		}
	}
	l.rev++
	rev := l.rev
	l.mu.Unlock()
	plan := poller.PlanRewind(req.q, req.shards, stored, rev)
	if err := store.Save(ctx, plan.Progress); err != nil {
		return RewindOutcome{}, fmt.Errorf("%w: write the rewind: %w", lease.ErrRewindRefused, err)
	}
	out := req.checked
	out.Revision, out.Rewound, out.Reset, out.Stopped = rev, plan.Rewound, plan.Reset, time.Since(req.stopping)
	return out, nil
}

// tellLocalRewind tells the mapping's observer, if a poller.RewindObserver, of req: in progress
// (rev 0: stopping for it), then applied or refused (err).
func tellLocalRewind(m Mapping, req *localRewind, rev int64, err error) {
	ro, ok := m.Hooks.Observer.(poller.RewindObserver)
	if !ok {
		return
	}
	n := poller.RewindNotice{Revision: rev, State: lease.RewindRequested, InProgress: true, Request: req.q, By: req.by, RequestedAt: req.at}
	if rev == 0 && err == nil {
		ro.RewindSeen(n)
		return
	}
	n.InProgress, n.DoneAt, n.State = false, time.Now(), lease.RewindApplied
	if err != nil {
		n.State, n.Report = lease.RewindRefused, err.Error()
	}
	ro.RewindSeen(n)
	ro.RewindEnded(n)
}
