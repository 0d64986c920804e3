package runner

import (
	"context"

	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// runLeaseTable runs the mapping of src and mc on its lease table, and again after each rewind: a
// worker that sees a rewind requested stops (invoking nothing more, its leases released, its
// roster entry left), waits until the rewind is applied or refused, and joins again as a new
// worker that reads the rewound items (lease/DESIGN.md, "Rewinds"). The mapping's observer, if
// a poller.RewindObserver, sees the latest rewind at each start and while one is waited on, and
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
	stopped := false // for a rewind, which has now ended
	for {
		last, err := lease.AwaitRewinds(ctx, r.ddb, m.Store.LeaseTable, m.Hooks.Logger, seen)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		seen(last)
		if ro != nil && stopped && last.Revision > 0 {
			ro.RewindEnded(last.Notice())
		}
		st, err := r.openLeases(ctx, m, src.Identity().ARN, lease.WithRewindRevision(last.Revision))
		if err != nil {
			return err
		}
		d, _ := st.store.(*lease.Dynamo)
		rctx, stop := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() { // owned: ends with rctx, waited for below
			defer close(watched)
			select {
			case <-d.RewindRequested():
				m.Hooks.Logger.Info("stopping for a rewind; starting again once it is applied")
				stop()
			case <-rctx.Done():
			}
		}()
		err = r.runOn(rctx, m, src, mc, st)
		rewound := ctx.Err() == nil && rctx.Err() != nil
		stop()
		<-watched
		st.close()
		if err != nil || !rewound {
			return err
		}
		stopped = true
	}
}
