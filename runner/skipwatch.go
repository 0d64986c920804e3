package runner

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
)

// skipTable is a store through which skips are asked of the fleet (lease.Dynamo: the request on
// the lease table, lease/DESIGN.md "Skips through the table").
type skipTable interface {
	SkipAsked() <-chan struct{}
	LatestSkip(ctx context.Context) (lease.SkipState, error)
	AnswerSkip(ctx context.Context, rev int64, a lease.SkipAnswer) (bool, error)
	Held(shardID string) bool
}

// skipRecheck is how often a pending request is read again while this worker does not hold
// its shard: a worker that takes the lease over (its owner lost) takes the request up.
const skipRecheck = time.Second

// watchSkips does the skips asked through st whose shard this worker holds, with skips (the
// poller's), and answers them on the table, until ctx ends. A request for a shard read
// elsewhere is left to its owner; while one is pending it is read again every skipRecheck.
func watchSkips(ctx context.Context, st skipTable, skips *poller.Skips, log *slog.Logger) {
	pending := false
	for {
		var tick <-chan time.Time
		t := time.NewTimer(skipRecheck)
		if pending {
			tick = t.C
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-st.SkipAsked():
		case <-tick:
		}
		t.Stop()
		req, err := st.LatestSkip(ctx)
		if err != nil {
			log.Warn("read the skip request", "error", err)
			pending = ctxwait.Sleep(ctx, skipRecheck)
			continue
		}
		pending = req.Pending(time.Now())
		if !pending || !st.Held(req.Request.ShardID) {
			continue
		}
		sctx, cancel := context.WithDeadline(ctx, req.Deadline)
		res, err := skips.Skip(sctx, req.Request)
		cancel()
		if errors.Is(err, poller.ErrSkipNotHere) {
			continue // not read here (yet): its reader starts, or another worker holds it
		}
		if ok, aerr := st.AnswerSkip(context.WithoutCancel(ctx), req.Revision, lease.NewSkipAnswer(res, err)); aerr != nil || !ok {
			log.Warn("the answer to a skip asked through the lease table was not written", "revision", req.Revision, "shard_id", req.Request.ShardID, "error", aerr)
		}
		pending = false
	}
}
