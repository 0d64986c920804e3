package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/kinesis-esm/esm/poller"
)

// Register implements poller.Coordinator: it records the shards (the placement is computed
// over every shard registered) and, for a shard whose parents this worker finished, adds it to
// the parents' childShardIds. It creates no lease: each is created by the worker it is placed
// on, when the shard may be read.
func (d *Dynamo) Register(ctx context.Context, shards []poller.ShardInfo) error {
	shards, err := d.shareLatestStart(ctx, shards)
	if err != nil {
		return err
	}
	now := d.cfg.now()
	d.mu.Lock()
	first := d.registered == 0
	var links [][2]string
	for _, si := range shards {
		s := d.shardLocked(si.ShardID)
		if old := s.info; !s.registered {
			s.firstSeen, s.registered = now, true
			s.initial = s.initial || first
			d.registered++
			d.knownSum += shardDigest(si.ShardID)
		} else {
			// Keep what the first registration said, completing what it lacked.
			if len(old.Parents) == 0 {
				old.Parents = si.Parents
			}
			old.StartingHashKey, old.EndingHashKey = cmp.Or(old.StartingHashKey, si.StartingHashKey), cmp.Or(old.EndingHashKey, si.EndingHashKey)
			si = old
		}
		s.info, s.unlisted = si, false
		for _, p := range nonEmpty(si.Parents) {
			if ps := d.shardLocked(p); !slices.Contains(ps.children, si.ShardID) {
				ps.children = append(ps.children, si.ShardID)
				if ps.held != nil || ps.last.Owner == d.id {
					links = append(links, [2]string{p, si.ShardID})
				}
			}
		}
	}
	publish := d.me.joined && d.me.publishedKnown != d.knownLocked()
	d.mu.Unlock()
	if publish && d.lockBeats(ctx) { // tell the others at once how many shards this worker knows of
		if err := d.heartbeat(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("heartbeat failed; retrying", "err", err)
		}
		d.unlockBeats()
	}
	var mu sync.Mutex
	var errs []error
	parallel(links, func(l [2]string) {
		_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &d.table, Key: key(l[0]),
			UpdateExpression:          aws.String("ADD #ch :c"),
			ConditionExpression:       aws.String("attribute_exists(#k)"),
			ExpressionAttributeNames:  map[string]string{"#ch": attrChildren, "#k": attrKey},
			ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberSS{Value: []string{l[1]}}},
		})
		if err != nil && !isConditionFailed(err) {
			mu.Lock()
			errs = append(errs, fmt.Errorf("record child %s of lease %s: %w", l[1], l[0], err))
			mu.Unlock()
		}
	})
	return errors.Join(errs...)
}

// attrLatestStart, on the mapping item, is when the mapping's first worker decided a LATEST start.
const attrLatestStart = "latestStart"

// shareLatestStart makes every worker of a new LATEST mapping start where the first one
// decided: leases are created only at claim time, so a worker that joins before any exists
// sees an empty table and decides a later start of its own, skipping what arrived between the
// two (sim LEASES=1 seed 4). One conditional write (SET if_not_exists) on the mapping item
// decides; shards registered with a later start get the stored one.
func (d *Dynamo) shareLatestStart(ctx context.Context, shards []poller.ShardInfo) ([]poller.ShardInfo, error) {
	var ts time.Time
	d.mu.Lock()
	for _, si := range shards {
		if !d.peekLocked(si.ShardID).registered && si.Initial.Start == poller.Latest && !si.Initial.StartTimestamp.IsZero() {
			if ts.IsZero() || si.Initial.StartTimestamp.Before(ts) {
				ts = si.Initial.StartTimestamp
			}
		}
	}
	d.mu.Unlock()
	if ts.IsZero() {
		return shards, nil
	}
	out, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(mappingItemKey),
		UpdateExpression:          aws.String("SET #s = if_not_exists(#s, :s)"),
		ExpressionAttributeNames:  map[string]string{"#s": attrLatestStart},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": str(ts.UTC().Format(time.RFC3339Nano))},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return nil, fmt.Errorf("record the mapping's start in lease table %s: %w", d.table, err)
	}
	v, ok := out.Attributes[attrLatestStart].(*types.AttributeValueMemberS)
	if !ok {
		return shards, nil
	}
	first, err := time.Parse(time.RFC3339Nano, v.Value)
	if err != nil || !first.Before(ts) {
		return shards, nil
	}
	shards = slices.Clone(shards)
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, si := range shards {
		if si.Initial.Start == poller.Latest && first.Before(si.Initial.StartTimestamp) {
			shards[i].Initial.StartTimestamp = first
			d.shardLocked(si.ShardID).restarted = true
		}
	}
	return shards, nil
}

// Load implements poller.Store. It runs this worker's claim cycle (roster, declarations of
// dead workers, reads and takes of the leases placed on it) and returns the progress of every
// shard it knows of: the leases it holds (their current progress), and the others it has read
// (finished parents unblock their children).
func (d *Dynamo) Load(ctx context.Context) (map[string]poller.ShardProgress, error) {
	d.cycleMu.Lock()
	defer d.cycleMu.Unlock()
	if err := d.cycle(ctx); err != nil {
		return nil, err
	}
	// The first Load reads the whole table: the poller takes an empty answer for a mapping that
	// never ran (a LATEST start decided now, lineage ignored), and the items seen (shard.last) are only the
	// leases placed on this worker, none yet.
	var all map[string]Lease
	d.mu.Lock()
	first := !d.loaded
	all, d.lastScan = d.lastScan, nil
	d.mu.Unlock()
	if first && all == nil {
		m, err := d.scan(ctx, 0)
		if err != nil {
			return nil, err
		}
		all = m
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]poller.ShardProgress, len(d.shards)+len(all))
	for id, l := range all {
		out[id] = l.Progress
	}
	for id, s := range d.shards {
		if s.known() {
			out[id] = s.last.Progress
		}
		if s.held != nil {
			s.held.fresh = true
		}
	}
	d.lastLoad, d.loaded = d.cfg.now(), true
	return out, nil
}

// Save implements poller.Store. Each shard is written on its own, conditional on this worker
// owning its lease with the counter it took it at (a checkpoint leaves the counter alone, so
// an SDK retry after a lost response passes again); a shard whose lease this worker does not
// hold fails with an error wrapping poller.ErrLeaseLost. A write resets
// ownerSwitchesSinceCheckpoint. A finished shard's write also records its children.
func (d *Dynamo) Save(ctx context.Context, updates map[string]poller.ShardProgress) error {
	for _, id := range sortedKeys(updates) {
		if err := d.save(ctx, id, updates[id]); err != nil {
			return err
		}
	}
	return nil
}

func (d *Dynamo) save(ctx context.Context, id string, pr poller.ShardProgress) error {
	d.mu.Lock()
	s := d.peekLocked(id)
	h, orphan := s.held, s.orphan
	children := slices.Clone(s.children)
	d.mu.Unlock()
	if h == nil || orphan { // an orphan's checkpoint is of the lost tenure's reader
		return fmt.Errorf("checkpoint shard %s: %w", id, poller.ErrLeaseLost)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	d.mu.Lock()
	gone, cur := h.gone, h.counter
	d.mu.Unlock()
	if gone {
		return fmt.Errorf("checkpoint shard %s: %w", id, poller.ErrLeaseLost)
	}
	u, err := newProgressUpdate(pr)
	if err != nil {
		return fmt.Errorf("checkpoint shard %s: %w", id, err)
	}
	names := maps.Clone(progressNames)
	names["#o"], names["#c"] = attrOwner, attrCounter
	u.values[":me"], u.values[":cur"] = str(d.id), num(cur)
	expr := updateExpression(u.set, u.remove)
	if pr.Finished && len(children) > 0 {
		expr += " ADD #ch :ch"
		names["#ch"], u.values[":ch"] = attrChildren, &types.AttributeValueMemberSS{Value: children}
	}
	out, err := d.api.UpdateItem(asCheckpoint(ctx), &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(id),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("#o = :me AND #c = :cur"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: u.values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		d.lose(id, h, "checkpoint failed its condition")
		return fmt.Errorf("checkpoint shard %s: %w", id, poller.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("checkpoint shard %s: %w", id, err)
	}
	l, derr := decodeLease(out.Attributes)
	d.mu.Lock()
	if derr == nil {
		d.rememberLocked(l)
	}
	if pr.Finished {
		h.finished = true
		d.shardLocked(id).finishedHere = true
	}
	if pr.Checkpoint != "" || pr.Finished {
		for _, p := range d.parentsLocked(id) {
			d.shardLocked(p).cleanup = true
		}
	}
	d.mu.Unlock()
	d.log.Debug("checkpoint written", "shard_id", id, "checkpoint", checkpointAttr(pr), "lease_counter", cur)
	return nil
}
