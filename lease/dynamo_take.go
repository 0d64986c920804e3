package lease

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/poller"
)

// take takes (or adopts) a lease this worker found free, conditional on the counter and owner
// it read, stamping its epoch.
func (d *Dynamo) take(ctx context.Context, l Lease) {
	d.mu.Lock()
	epoch := d.me.epoch
	// The owner's tombstone's wait, when it has not ended yet (takeableLocked): it comes with
	// the lease, whatever a later (stale) roster read shows.
	inherit := d.roster.buriedUntil(l.Owner, l.OwnerEpoch)
	if l.Owner == d.id && l.OwnerEpoch == epoch && !l.HandedOver { // ours already: nothing to write
		d.mu.Unlock()
		if d.hold(ctx, l, epoch, time.Time{}) {
			d.log.Info("lease taken", "shard_id", l.ShardID, "reason", "handed over", "lease_counter", l.Counter)
		}
		return
	}
	d.mu.Unlock()
	names := map[string]string{"#o": attrOwner, "#c": attrCounter, "#e": attrOwnerEpoch, "#p": attrPendingOwner, "#ho": attrHandedOver}
	values := map[string]types.AttributeValue{":me": str(d.id), ":cur": num(l.Counter), ":next": num(l.Counter + 1), ":ep": num(epoch)}
	expr := "SET #o = :me, #e = :ep, #c = :next"
	cond := "#c = :cur AND "
	reason := "unowned"
	switch l.Owner {
	case "":
		cond += "attribute_not_exists(#o)"
	default:
		cond += "#o = :old"
		values[":old"] = str(l.Owner)
		reason = "owner gone"
		switch {
		case l.Owner == d.id && l.HandedOver:
			reason = "handed over"
		case l.HandedOver:
			reason = "handed over, not taken up"
		case l.Owner == d.id:
			reason = "owned by this worker's previous run"
		}
		if l.Owner != d.id {
			expr += ", #sw = if_not_exists(#sw, :zero) + :one"
			names["#sw"], values[":zero"], values[":one"] = attrOwnerSwitches, num(0), num(1)
		}
	}
	out, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(l.ShardID),
		UpdateExpression:                    aws.String(expr + " REMOVE #p, #ho"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		d.noteFailure(l.ShardID, err, "take lease")
		return
	}
	nl, derr := decodeLease(out.Attributes)
	d.mu.Lock()
	if derr == nil {
		d.rememberLocked(nl)
	}
	d.mu.Unlock()
	l.Counter++
	if d.hold(ctx, l, epoch, inherit) {
		if l.HandedOver && l.Owner == d.id { // a hand-over names the taker as owner: the one before is not recorded
			l.Owner = ""
		}
		d.log.Info("lease taken", "shard_id", l.ShardID, "reason", reason, "previous_owner", l.Owner, "lease_counter", l.Counter)
	}
}

// hold makes a lease this worker has just taken or adopted under epoch its own, unless
// stillUnfinished says it is not to be held (then false). A lease taken under an epoch this
// worker has lost since is not held. Its previous owner's invocations may run until inherit:
// none of this worker's is admitted before.
func (d *Dynamo) hold(ctx context.Context, l Lease, epoch int64, inherit time.Time) bool {
	if !d.stillUnfinished(ctx, l, false) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.me.epoch == epoch && d.me.joined {
		d.inheritLocked(l.ShardID, inherit, d.cfg.now())
		d.shardLocked(l.ShardID).held = &heldLease{counter: l.Counter}
	}
	return true
}

// create creates the lease of a shard placed here, owned by this worker. A shard with a
// descendant that has an item was finished and deleted (see cleanUp), as was one this worker
// saw an item of and then read absent (see pollAndTake): it is never created again. The
// descendants are read again after the write: a check made before it may be stale by the
// time it lands (see stillUnfinished).
func (d *Dynamo) create(ctx context.Context, id string) {
	d.mu.Lock()
	s := d.peekLocked(id)
	si, ok := s.info, s.registered
	epoch := d.me.epoch
	d.mu.Unlock()
	if !ok {
		si = poller.ShardInfo{ShardID: id}
	}
	switch found, read := d.descendantHasItem(ctx, id, true); {
	case !read:
		return // could not tell: next cycle
	case found:
		d.mu.Lock()
		s := d.shardLocked(id)
		s.markFinished(id)
		s.missing = false
		d.mu.Unlock()
		return
	}
	item, err := newItem(si)
	if err != nil {
		d.log.Warn("create lease failed", "shard_id", id, "err", err)
		return
	}
	item[attrOwner], item[attrOwnerEpoch], item[attrCounter] = str(d.id), num(epoch), num(1)
	retries := 0
	if len(nonEmpty(si.Parents)) > 0 {
		retries = childRetries
	}
	for try := 0; ; try++ {
		_, err = d.api.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: &d.table, Item: item,
			ConditionExpression:                 aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames:            map[string]string{"#k": attrKey},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil || isConditionFailed(err) || try >= retries || !ctxwait.Sleep(ctx, time.Duration(try+1)*retryPause) {
			break
		}
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// The item exists: ours when an earlier attempt went through and its response was lost.
		if l, derr := decodeLease(ccf.Item); derr == nil && l.Owner == d.id && l.OwnerEpoch == epoch && l.Counter == 1 && !l.HandedOver {
			err = nil
		}
	}
	if err != nil {
		d.noteFailure(id, err, "create lease")
		d.mu.Lock()
		d.shardLocked(id).missing = false
		d.mu.Unlock()
		return
	}
	l, _ := decodeLease(item)
	d.mu.Lock()
	d.shardLocked(id).missing = false
	d.rememberLocked(l)
	d.mu.Unlock()
	if !d.stillUnfinished(ctx, l, true) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.me.epoch == epoch && d.me.joined {
		// The poller starts it from the Initial it registered, which is what the item holds.
		// A start the table replaced reaches the poller through the next Load first.
		s := d.shardLocked(id)
		s.held = &heldLease{counter: 1, fresh: !s.restarted}
	}
	d.log.Info("lease taken", "shard_id", id, "reason", "created", "lease_counter", 1)
}

// stillUnfinished is called with a lease this worker has just created, taken or adopted, before
// it holds it: a lease nobody has read yet (no checkpoint) of a shard with known descendants is
// checked again against its descendants, consistently, after the write that gave it to this
// worker. A descendant that has started (for a lease just created: that has an item at all)
// means the shard was finished and its lease deleted, and this one was created again by a
// worker whose checks came before that (it paused between its checks and its write): the lease
// is recorded finished, and nobody reads it. False when the lease is not to be held (finished,
// or the read failed).
func (d *Dynamo) stillUnfinished(ctx context.Context, l Lease, created bool) bool {
	if l.Finished() {
		return false
	}
	if l.Progress.Checkpoint != "" {
		return true // read before: its shard's children have not started
	}
	switch found, read := d.descendantHasItem(ctx, l.ShardID, created); {
	case !read:
		return false // could not tell: a later cycle adopts it again
	case found:
		d.refinish(ctx, l)
		return false
	}
	return true
}

// descendantHasItem reports whether a descendant of the shard, among those this worker knows,
// has an item (that has started, unless anyItem: some KCL versions create children's leases
// with their ancestors', before those are read). A child is read only once its parents are
// finished (or trimmed), and a finished lease is deleted only once every child has started, so
// from its deletion on some descendant always has a started item. It reads one generation at a time, each consistently
// and taken from what this worker knows when it comes to it, so that a generation deleted
// during the reads leaves its children to the next one. read is false when a read failed.
func (d *Dynamo) descendantHasItem(ctx context.Context, id string, anyItem bool) (found, read bool) {
	visited := map[string]bool{id: true}
	for level := []string{id}; ; {
		var next []string
		d.mu.Lock()
		for _, s := range level {
			sh := d.peekLocked(s)
			for _, c := range append(slices.Clone(sh.children), sh.itemChildren...) {
				if !visited[c] {
					visited[c] = true
					next = append(next, c)
				}
			}
		}
		d.mu.Unlock()
		if len(next) == 0 {
			return false, true
		}
		items := d.batchGetRetry(ctx, next, childRetries)
		if len(items) < len(next) {
			return false, false
		}
		for _, it := range items {
			if it != nil && (anyItem || started(*it)) {
				return true, true
			}
		}
		level = next
	}
}

// refinish records finished a lease this worker created or took of a shard found finished
// (stillUnfinished): checkpoint SHARD_END, unowned, conditional on this worker owning it at the
// counter it has.
func (d *Dynamo) refinish(ctx context.Context, l Lease) {
	d.mu.Lock()
	s := d.shardLocked(l.ShardID)
	s.markFinished(l.ShardID)
	s.missing = false
	d.mu.Unlock()
	out, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(l.ShardID),
		UpdateExpression:    aws.String("SET #cp = :end, #c = :next REMOVE #o, #e, #ho"),
		ConditionExpression: aws.String("#o = :me AND #c = :cur"),
		ExpressionAttributeNames: map[string]string{"#cp": attrCheckpoint, "#c": attrCounter, "#o": attrOwner,
			"#e": attrOwnerEpoch, "#ho": attrHandedOver},
		ExpressionAttributeValues: map[string]types.AttributeValue{":end": str(sentinelShardEnd), ":me": str(d.id),
			":cur": num(l.Counter), ":next": num(l.Counter + 1)},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		// Taken since (its next owner checks it too), or not written: a later adoption retries.
		d.log.Warn("recording a finished shard's lease finished failed", "shard_id", l.ShardID, "err", err)
		return
	}
	if nl, derr := decodeLease(out.Attributes); derr == nil {
		d.mu.Lock()
		d.rememberLocked(nl)
		d.mu.Unlock()
	}
	d.log.Warn("lease of a finished shard found again; recorded finished", "shard_id", l.ShardID, "lease_counter", l.Counter+1)
}

// grab claims a candidate the placement does not cover yet (a new child): create it, or take
// it if it turns out free.
func (d *Dynamo) grab(ctx context.Context, id string) {
	d.mu.Lock()
	l, known := d.cachedLocked(id)
	d.mu.Unlock()
	if !known {
		d.create(ctx, id)
		return
	}
	if len(d.confirmFree(ctx, []Lease{l})) == 0 {
		return
	}
	d.take(ctx, l)
	d.mu.Lock()
	if s := d.peekLocked(id); s.held != nil {
		// The poller starts it from what the last Load returned, which was the item as read
		// before the take: fine unless the take showed other progress.
		s.held.fresh = reflect.DeepEqual(s.last.Progress, l.Progress)
	}
	d.mu.Unlock()
}

// childRetries is how many times a call on a child's path (the reads of its parents, its
// creation) is retried at once after a failure or throttling: each would otherwise cost the
// child a claim cycle. (The SDK's own retries, in production, come on top.)
const childRetries = 2

// retryPause is the pause before the first retry of childRetries; each further one waits
// once more.
const retryPause = 20 * time.Millisecond
