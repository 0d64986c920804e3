package poller

import (
	"context"
	"time"

	"github.com/kinesis-esm/esm/source"
)

// probeTimeout bounds one probe of a shard another worker reads (its GetShardIterator and
// GetRecords together).
const probeTimeout = 5 * time.Second

// probeOthers judges, for WithUntilCaughtUp with a Coordinator, the shards this worker does not
// read but may be read now (another worker's, or nobody's yet): from the progress the claim just
// loaded from the shared store. Run on the coordinator's goroutine after each claim. A shard
// caught up (without idle: once) is not probed again.
func (c *coordinator) probeOthers() {
	u := c.p.until
	if u == nil || c.p.coord == nil || c.runCtx.Err() != nil {
		return
	}
	pr, _ := c.p.coord.(ProgressReader)
	for _, id := range c.g.ready() {
		if u.idle <= 0 && u.has(id) {
			continue
		}
		progress := c.progress[id]
		if pr != nil { // the store's Load may not read the shards other workers hold
			p, found, err := pr.ShardProgress(c.runCtx, id)
			if err != nil {
				c.p.log.Debug("caught-up probe: progress unread", "shard_id", id, "err", err)
				continue
			}
			if found {
				progress = p
			}
		}
		c.probe(id, progress)
	}
	c.untilDone()
}

// ProgressReader is what a Coordinator may also implement: any shard's progress as the shared
// store has it now, whoever reads the shard (lease.Dynamo reads its lease item). Without it,
// WithUntilCaughtUp judges the shards other workers read by the progress the last claim loaded.
type ProgressReader interface {
	ShardProgress(ctx context.Context, shardID string) (pr ShardProgress, found bool, err error)
}

// has reports whether the shard is caught up.
func (c *caughtUp) has(shardID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.at[shardID]
	return ok
}

// probe reads the shard at its checkpoint in the shared store (AT_SEQUENCE_NUMBER, so that the
// checkpointed record comes back too), or at its start without one: the shard is caught up when
// nothing after the checkpoint is there and the read says nothing is behind it (every record
// present has been handled by whoever reads it). The checkpointed record's arrival counts as the
// time records were last read (for idle). A failed probe judges nothing.
func (c *coordinator) probe(id string, pr ShardProgress) {
	ctx, cancel := context.WithTimeout(c.runCtx, probeTimeout)
	defer cancel()
	start := c.p.now()
	at := source.Position{Type: source.AtSequenceNumber, SequenceNumber: pr.Checkpoint}
	if pr.Checkpoint == "" {
		at = resumePosition("", pr, c.p.cfg.StartingPositionTimestamp).at()
	}
	it, err := c.p.src.Open(ctx, id, at)
	if err != nil {
		c.p.log.Debug("caught-up probe failed", "shard_id", id, "err", err)
		return
	}
	page, err := c.p.src.Read(ctx, id, it, 2)
	if err != nil {
		c.p.log.Debug("caught-up probe failed", "shard_id", id, "err", err)
		return
	}
	recs := page.Records
	if len(recs) > 0 && pr.Checkpoint != "" && recs[0].SequenceNumber == pr.Checkpoint {
		if !recs[0].ArrivalTime.IsZero() {
			c.p.until.recordsRead(id, recs[0].ArrivalTime)
		}
		recs = recs[1:]
	}
	if len(recs) == 0 && page.MillisBehind == 0 && page.Next != "" {
		c.p.until.caught(id, start)
	}
}
