package runner

import (
	"context"

	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// rewindable is a store that asks its runner to stop for a rewind: a lease.Dynamo made with
// lease.WithRewindRevision closes RewindRequested once it sees a newer rewind requested.
type rewindable interface {
	RewindRequested() <-chan struct{}
}

// runLeaseTable runs the mapping of src and mc on its lease table, and again after each rewind
// (runRewinding): before each start it waits while a rewind is in progress and starts under
// the latest revision (lease/DESIGN.md, "Rewinds"). The mapping's observer, if a
// poller.RewindObserver, sees the latest rewind at each start and while one is waited on, and
// each one this worker stopped for once it ended.
func (r *Runner) runLeaseTable(ctx context.Context, m Mapping, src *kinesissrc.Stream, mc poller.Config) error {
	if err := lease.EnsureTable(ctx, r.ddbStart, m.Store.LeaseTable, m.Store.CreateLeaseTable); err != nil {
		return err
	}
	ro, _ := m.Hooks.Observer.(poller.RewindObserver)
	seen := func(s lease.RewindState) {
		if ro != nil && s.Revision > 0 {
			ro.RewindSeen(s.Notice())
		}
	}
	return r.runRewinding(ctx, m, src, mc, func(ctx context.Context, rewound bool) (*opened, error) {
		last, err := lease.AwaitRewinds(ctx, r.ddb, m.Store.LeaseTable, m.Hooks.Logger, seen)
		if err != nil {
			return nil, err
		}
		seen(last)
		if ro != nil && rewound && last.Revision > 0 {
			ro.RewindEnded(last.Notice())
		}
		return r.openLeases(ctx, m, src.Identity().ARN, lease.WithRewindRevision(last.Revision))
	})
}

// runRewinding runs the mapping on the store open opens, and, when that store is rewindable,
// again after each rewind: a worker that sees a rewind requested stops (invoking nothing more,
// its leases released, its roster entry left) and opens its store again (rewound true), which
// waits until the rewind is applied or refused and joins as a new worker that reads the
// rewound items. esm run's lease table and esm serve's per-mapping tables (Store.Open) both
// run here.
func (r *Runner) runRewinding(ctx context.Context, m Mapping, src *kinesissrc.Stream, mc poller.Config,
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
			return r.runOn(ctx, m, src, mc, st)
		}
		rctx, stop := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() { // owned: ends with rctx, waited for below
			defer close(watched)
			select {
			case <-rw.RewindRequested():
				m.Hooks.Logger.Info("stopping for a rewind; starting again once it is applied")
				stop()
			case <-rctx.Done():
			}
		}()
		err = r.runOn(rctx, m, src, mc, st)
		rewound = ctx.Err() == nil && rctx.Err() != nil
		stop()
		<-watched
		st.close()
		if err != nil || !rewound {
			return err
		}
	}
}
