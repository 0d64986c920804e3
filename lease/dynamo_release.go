package lease

import (
	"context"
	"fmt"
	"maps"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Release implements poller.Coordinator: the lease becomes unowned, reserved for the worker a
// hand-over was requested for if there is one, conditional on this worker still holding it. A
// lease not held (never taken, lost, released already) is left alone.
func (d *Dynamo) Release(ctx context.Context, shardID string) error {
	d.mu.Lock()
	h := d.held[shardID]
	d.mu.Unlock()
	if h == nil {
		return nil
	}
	return d.release(ctx, shardID, h, "reader stopped")
}

func (d *Dynamo) release(ctx context.Context, id string, h *heldLease, why string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	d.mu.Lock()
	gone, cur, to := h.gone, h.counter, h.pending
	d.mu.Unlock()
	if gone {
		return nil
	}
	names := map[string]string{"#o": attrOwner, "#c": attrCounter, "#p": attrPendingOwner}
	values := map[string]types.AttributeValue{":me": str(d.id), ":cur": num(cur), ":next": num(cur + 1)}
	if to != "" && to != d.id {
		// The lease is released but stays reserved for the requester (pendingOwner), which
		// takes it at its next Claim; a requester that died never owned it, and after a lease
		// duration anyone may take it. Conditional on the request too: a requester that
		// withdrew it (it stopped) gets nothing, and the lease is simply released.
		tn, tv := maps.Clone(names), maps.Clone(values)
		tn["#sw"] = attrOwnerSwitches
		tv[":to"], tv[":zero"], tv[":one"] = str(to), num(0), num(1)
		_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &d.table, Key: key(id),
			UpdateExpression:          aws.String("SET #c = :next, #sw = if_not_exists(#sw, :zero) + :one REMOVE #o"),
			ConditionExpression:       aws.String("#o = :me AND #c = :cur AND #p = :to"),
			ExpressionAttributeNames:  tn,
			ExpressionAttributeValues: tv,
		})
		if err == nil {
			d.drop(id, h)
			d.log.Info("hand-over completed", "shard_id", id, "new_owner", to, "reason", why, "lease_counter", cur+1)
			return nil
		}
		if !isConditionFailed(err) {
			return d.releaseFailed(id, h, err)
		}
	}
	_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(id),
		UpdateExpression:          aws.String("SET #c = :next REMOVE #o, #p"),
		ConditionExpression:       aws.String("#o = :me AND #c = :cur"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	switch {
	case err == nil:
		d.drop(id, h)
		d.log.Info("lease released", "shard_id", id, "reason", why, "lease_counter", cur+1)
	case isConditionFailed(err):
		d.lose(id, h, "release failed its condition")
	default:
		return d.releaseFailed(id, h, err)
	}
	return nil
}

func (d *Dynamo) releaseFailed(id string, h *heldLease, err error) error {
	d.mu.Lock()
	h.announced = false // the next Claim retries it unless a reader takes it up again
	d.mu.Unlock()
	return fmt.Errorf("release lease %s: %w", id, err)
}

// withdraw, at shutdown, takes back this worker's hand-over requests, those still waiting and
// those already granted (leases released and reserved for it), and releases the leases the
// table says it owns but it does not hold (a previous incarnation's), so that nobody waits for
// them to expire. An owner cannot grant a request once it is withdrawn (see release).
func (d *Dynamo) withdraw(ctx context.Context) {
	leases, _, err := d.scan(ctx)
	if err != nil {
		d.log.Warn("withdraw hand-over requests failed", "err", err)
		return
	}
	held := d.heldLeases()
	var asked []string
	var owned []Lease
	for id, l := range leases {
		if _, ok := held[id]; ok {
			continue
		}
		if l.PendingOwner == d.id {
			asked = append(asked, id)
		}
		if l.Owner == d.id {
			owned = append(owned, l)
		}
	}
	parallel(asked, func(id string) {
		_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &d.table, Key: key(id),
			UpdateExpression:          aws.String("REMOVE #p"),
			ConditionExpression:       aws.String("#p = :me"),
			ExpressionAttributeNames:  map[string]string{"#p": attrPendingOwner},
			ExpressionAttributeValues: map[string]types.AttributeValue{":me": str(d.id)},
		})
		if err != nil && !isConditionFailed(err) {
			d.log.Warn("withdraw hand-over request failed", "shard_id", id, "err", err)
		}
	})
	parallel(owned, func(l Lease) {
		_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &d.table, Key: key(l.ShardID),
			UpdateExpression:          aws.String("SET #c = :next REMOVE #o, #p"),
			ConditionExpression:       aws.String("#o = :me AND #c = :cur"),
			ExpressionAttributeNames:  map[string]string{"#o": attrOwner, "#c": attrCounter, "#p": attrPendingOwner},
			ExpressionAttributeValues: map[string]types.AttributeValue{":me": str(d.id), ":cur": num(l.Counter), ":next": num(l.Counter + 1)},
		})
		switch {
		case err == nil:
			d.log.Info("lease released", "shard_id", l.ShardID, "reason", "owned but not held at shutdown", "lease_counter", l.Counter+1)
		case !isConditionFailed(err):
			d.log.Warn("release at shutdown failed; the lease will expire", "shard_id", l.ShardID, "err", err)
		}
	})
}

// releaseAll releases every lease still held (worker shutdown).
func (d *Dynamo) releaseAll(ctx context.Context) {
	parallel(sortedKeys(d.heldLeases()), func(id string) {
		d.mu.Lock()
		h := d.held[id]
		d.mu.Unlock()
		if h == nil {
			return
		}
		if err := d.release(ctx, id, h, "worker stopping"); err != nil {
			d.log.Warn("release at shutdown failed; the lease will expire", "shard_id", id, "err", err)
		}
	})
}
