package poller

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The reader's progress writes: a checkpoint after records were handled, "finished" at the
// shard's end, the window's state (window.go), each retried while the store fails for a while.

func (r *reader) checkpoint(ctx context.Context, seq string) error {
	pr := r.progress
	pr.Checkpoint = seq
	if err := r.store(ctx, pr, func(err error) error { return fmt.Errorf("checkpoint shard %s at %s: %w", r.shardID, seq, err) }); err != nil {
		return err
	}
	if r.p.detail != nil {
		r.p.detail.Checkpointed(r.shardID, seq)
	}
	return nil
}

func (r *reader) finish(ctx context.Context) error {
	pr := r.progress
	pr.Finished, pr.Rewind = true, nil
	return r.store(ctx, pr, func(err error) error { return fmt.Errorf("record shard %s finished: %w", r.shardID, err) })
}

// store saves pr as the shard's progress, stamped now, and makes it the reader's. A failure is
// wrapped by wrap (called only then: nothing is formatted on the hot path); a lost lease is errLost.
func (r *reader) store(ctx context.Context, pr ShardProgress, wrap func(error) error) error {
	pr.UpdatedAt = r.p.now()
	pr = pruneDiscarded(endReplay(pr))
	if err := r.save(ctx, pr); err != nil {
		if errors.Is(err, errLost) {
			return err
		}
		return wrap(err)
	}
	r.progress = pr
	return nil
}

// saveAttempts bounds how often a failing progress write is tried before the mapping stops. With a
// Coordinator the write goes on being tried while the lease is held, for saveHeldFor at least:
// the heartbeat shows the lease table reachable, and a lease item's writes failing for a while
// (throttled on a hot partition, one slow connection) are no reason to stop the whole mapping
// (exit 1) after 10 to 40 s; the lease's own expiry stops the reader (errLost) when the table is
// really gone, and its next owner goes on from the last checkpoint.
const (
	saveAttempts = 8
	saveHeldFor  = 2 * time.Minute
)

// save writes the shard's progress, retrying a store that fails for a while (a lease table that is
// briefly unreachable) as long as this worker still holds the shard; a write fenced off by the
// lease table is errLost at once.
func (r *reader) save(ctx context.Context, pr ShardProgress) error {
	bo := r.p.pace(r.shardID+" save "+pr.Checkpoint, r.p.retryBase/5, r.p.retryMax)
	var (
		last    error
		attempt int
	)
	first := r.p.now()
	err := retry(ctx, &bo, func(n int) (step, error) {
		err := r.p.store.Save(ctx, map[string]ShardProgress{r.shardID: pr})
		last, attempt = err, n
		switch {
		case err == nil:
			return stepDone, nil
		case errors.Is(err, ErrLeaseLost):
			return stepDone, errLost
		case ctx.Err() != nil, n >= saveAttempts && (r.p.coord == nil || r.p.now().Sub(first) >= saveHeldFor):
			return stepDone, err
		case !r.held():
			return stepDone, errLost
		}
		return stepRetry, err
	}, func(err error, d time.Duration) {
		r.p.log.Warn("saving progress failed; retrying", "shard_id", r.shardID, "err", err, "attempt", attempt, "backoff", d)
	})
	if errors.Is(err, errStopped) {
		return last // stopped during a pause: the store's error, as when it stopped before one
	}
	return err
}
