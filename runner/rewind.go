package runner

import (
	"context"

	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
)

// rewindable is a store that asks its runner to stop for a rewind: a lease.Dynamo made with
// lease.WithRewindRevision closes RewindRequested once it sees a newer rewind requested, and
// LatestRewind reads the rewind its table holds.
type rewindable interface {
	RewindRequested() <-chan struct{}
	LatestRewind(ctx context.Context) (lease.RewindState, error)
}

// runLeaseTable runs the mapping's engine e on its lease table, and again after each rewind
// (runRewinding): before each start it waits while a rewind is in progress and starts under
// the latest revision (lease/DESIGN.md, "Rewinds").
func (r *Runner) runLeaseTable(ctx context.Context, m Mapping, e engine) error {
	if err := lease.EnsureTable(ctx, r.ddbStart, m.Store.LeaseTable, m.Store.CreateLeaseTable); err != nil {
		return err
	}
	return r.runRewinding(ctx, m, e, func(ctx context.Context, _ bool) (*opened, error) {
		last, err := lease.AwaitRewinds(ctx, r.ddb, m.Store.LeaseTable, m.Hooks.Logger)
		if err != nil {
			return nil, err
		}
		return r.openLeases(ctx, m, e.src.Identity().ARN, lease.WithRewindRevision(last.Revision))
	})
}

// tellRewind tells the mapping's observer, if a poller.RewindObserver, of the latest rewind of
// the store's table: at each start (ended true after a rewind this worker stopped for: it is
// then told once it ended) and when the worker stops for one. A failed read is logged: the
// run goes on.
func tellRewind(ctx context.Context, m Mapping, rw rewindable, ended bool) {
	ro, ok := m.Hooks.Observer.(poller.RewindObserver)
	if !ok {
		return
	}
	st, err := rw.LatestRewind(ctx)
	if err != nil {
		m.Hooks.Logger.Warn("read the mapping's latest rewind", "error", err)
		return
	}
	if st.Revision == 0 {
		return
	}
	ro.RewindSeen(st.Notice())
	if ended && !st.InProgress() {
		ro.RewindEnded(st.Notice())
	}
}

// runRewinding runs the mapping on the store open opens, and, when that store is rewindable,
// again after each rewind: a worker that sees a rewind requested stops (invoking nothing more,
// its leases released, its roster entry left) and opens its store again (rewound true), which
// waits until the rewind is applied or refused and joins as a new worker that reads the
// rewound items. esm run's lease table and esm serve's per-mapping tables (Store.Open) both
// run here.
func (r *Runner) runRewinding(ctx context.Context, m Mapping, e engine,
	open func(ctx context.Context, rewound bool) (*opened, error)) error {
	for rewound := false; ; {
		st, err := open(ctx, rewound)
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped while it waited or opened: a clean stop
			}
			return err
		}
		rw, ok := st.store.(rewindable)
		if !ok {
			defer st.close()
			if m.Hooks.Rewinds != nil {
				return r.runLocal(ctx, m, e, st)
			}
			return r.runOn(ctx, m, e, st)
		}
		tellRewind(ctx, m, rw, rewound)
		rctx, stop := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() { // owned: ends with rctx, waited for below
			defer close(watched)
			select {
			case <-rw.RewindRequested():
				m.Hooks.Logger.Info("stopping for a rewind; starting again once it is applied")
				// Read before this worker stops: the rewind cannot be applied before, so it is
				// seen in progress (the worker invokes nothing meanwhile).
				tellRewind(ctx, m, rw, false)
				stop()
			case <-rctx.Done():
			}
		}()
		skipsDone := make(chan struct{})
		go func() { // owned: ends with rctx, waited for below
			defer close(skipsDone)
			if sk, ok := st.store.(skipTable); ok && m.Hooks.Skips != nil {
				watchSkips(rctx, sk, m.Hooks.Skips, m.Hooks.Logger)
			}
		}()
		err = r.runOn(rctx, m, e, st)
		rewound = ctx.Err() == nil && rctx.Err() != nil
		stop()
		<-watched
		<-skipsDone
		st.close()
		if err != nil || !rewound {
			return err
		}
	}
}
