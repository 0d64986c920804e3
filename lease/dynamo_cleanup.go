package lease

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/poller"
)

// cleanUp deletes the leases of finished parents once every child has started, as KCL does:
// a stream that reshards does not grow the table for ever.
func (d *Dynamo) cleanUp(ctx context.Context) {
	d.mu.Lock()
	if !d.agreedLocked() {
		// A worker that has not listed the children yet could take a deleted parent for a
		// shard never read and create its lease again: wait until every member knows them.
		d.mu.Unlock()
		return
	}
	var parents []string
	for id, s := range d.shards {
		if s.cleanup {
			parents = append(parents, id)
		}
	}
	d.mu.Unlock()
	if len(parents) == 0 {
		return
	}
	deletable, nkids := d.deletableParents(ctx, parents)
	if len(deletable) == 0 {
		return
	}
	// Every member must know the children, on a consistent read of the roster made after the
	// children were read started: the roster this worker last read may lack a worker that has
	// joined since, which published what it knows in its join. (A worker that joins later reads
	// the whole table before it creates any lease: see scan and DESIGN.md, "Finished stays
	// finished".)
	if err := d.readRoster(ctx, true); err != nil {
		if ctx.Err() == nil {
			d.log.Warn("read roster failed; will retry", "err", err)
		}
		d.keepForCleanUp(deletable)
		return
	}
	d.mu.Lock()
	agreed := d.agreedLocked()
	d.mu.Unlock()
	if !agreed {
		d.keepForCleanUp(deletable)
		return
	}
	for _, p := range deletable {
		_, err := d.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: &d.table, Key: key(p),
			ConditionExpression:       aws.String("#cp = :end"),
			ExpressionAttributeNames:  map[string]string{"#cp": attrCheckpoint},
			ExpressionAttributeValues: map[string]types.AttributeValue{":end": str(sentinelShardEnd)},
		})
		if err != nil && !isConditionFailed(err) {
			d.log.Warn("delete finished lease failed", "shard_id", p, "err", err)
			continue
		}
		d.log.Info("finished lease deleted", "shard_id", p, "children", nkids[p])
	}
}

// deletableParents reads the parents and their children and returns the parents that are
// finished with every child started, with how many children each has. Every parent read is
// taken off the clean-up list.
func (d *Dynamo) deletableParents(ctx context.Context, parents []string) (deletable []string, nkids map[string]int) {
	var ids []string
	d.mu.Lock()
	for _, p := range parents {
		ids = append(ids, p)
		ids = append(ids, d.peekLocked(p).children...)
	}
	d.mu.Unlock()
	slices.Sort(ids)
	items := d.batchGet(ctx, slices.Compact(ids))
	nkids = map[string]int{}
	for _, p := range parents {
		pl := items[p]
		done := pl != nil && pl.Finished()
		d.mu.Lock()
		kids := slices.Clone(d.peekLocked(p).children)
		d.mu.Unlock()
		if pl != nil {
			kids = append(kids, pl.Children...)
		}
		for _, c := range kids {
			cl, ok := items[c]
			if !ok {
				cl, ok = d.batchGet(ctx, []string{c})[c]
			}
			if !ok || cl == nil || !started(*cl) {
				done = false
			}
		}
		d.mu.Lock()
		d.shardLocked(p).cleanup = false
		d.mu.Unlock()
		if done && len(kids) > 0 {
			deletable = append(deletable, p)
			nkids[p] = len(kids)
		}
	}
	return deletable, nkids
}

// keepForCleanUp checks the parents again at the next cycle.
func (d *Dynamo) keepForCleanUp(parents []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range parents {
		d.shardLocked(p).cleanup = true
	}
}

// started: the shard was read (a checkpoint past its starting position, or finished).
func started(l Lease) bool {
	return l.Finished() || l.Progress.Checkpoint != ""
}

// rememberLocked records an item read or written: the last one seen of its shard.
func (d *Dynamo) rememberLocked(l Lease) {
	d.shardLocked(l.ShardID).remember(l)
}

// finishedMarker stands for the lease of a finished shard whose item was deleted.
func finishedMarker(id string) Lease {
	return Lease{ShardID: id, Checkpoint: sentinelShardEnd, Progress: poller.ShardProgress{Finished: true}}
}
