package lease

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Release implements poller.Coordinator. The poller calls it once the shard's reader stopped
// after its last checkpoint:
//   - a finished shard's lease is released (unowned);
//   - a lease placed on another worker is handed over: the item names the new owner and its
//     epoch, and the new owner adopts it at its next read of it;
//   - a lease released while this worker's heartbeat is late is forgotten without a write: a
//     later read adopts it again if it is still this worker's, else it was taken once this
//     worker was declared dead;
//   - any other (this worker is stopping) is handed to the worker the placement gives it to
//     without this one.
//
// A lease not held (never taken, lost, released already) is left alone.
func (d *Dynamo) Release(ctx context.Context, shardID string) error {
	// The reader stopped: a loss found while releasing (the release reads the roster first)
	// makes no orphan of it either.
	defer func() {
		d.mu.Lock()
		d.shardLocked(shardID).orphan = false
		d.mu.Unlock()
	}()
	d.mu.Lock()
	s := d.shardLocked(shardID)
	h, orphan := s.held, s.orphan
	s.orphan = false
	d.mu.Unlock()
	if h == nil || orphan {
		// The reader of a lost tenure stopped: a lease taken anew since is the next reader's.
		return nil
	}
	return d.release(ctx, shardID, h, "reader stopped")
}

func (d *Dynamo) release(ctx context.Context, id string, h *heldLease, why string) error {
	d.prepareRelease(ctx, h)
	h.mu.Lock()
	defer h.mu.Unlock()
	now := d.cfg.now()
	d.mu.Lock()
	gone, cur, to, fin := h.gone, h.counter, h.handTo, h.finished
	alive, stopping := d.aliveLocked(now), d.stopping
	// A reader stopped for no hand-over, end or release of an unwanted lease: at a stop, the
	// lease goes to the worker the placement gives it to without this one; one the poller no
	// longer asks for (a trimmed shard) is released; otherwise (a lease found lost after a late
	// heartbeat) it is kept, as while the heartbeat is late below.
	asked := d.peekLocked(id).asked
	keep := !gone && !fin && to == "" && !h.unwanted && (!alive || !stopping && asked)
	if until := d.shardInflightLocked(id, now); !gone && !keep && !until.IsZero() {
		// An invocation of it may still run (it failed after its request was sent): the lease
		// goes to its next owner only once that invocation's deadline has passed. The claim
		// cycle hands it over then (releaseIdle); a stop leaves it with a tombstone (leave).
		h.announced = false
		d.mu.Unlock()
		d.log.Info("hand-over held back: an invocation of this shard may still run", "shard_id", id, "until", until.Sub(now).Round(time.Millisecond))
		return nil
	}
	if !gone && !fin && to == "" && alive && stopping && !h.unwanted {
		to = d.successorLocked(id)
	}
	var toEpoch int64
	if m, ok := d.roster.members[to]; ok && to != d.id {
		toEpoch = m.epoch
	} else {
		to = ""
	}
	h.announced = false
	d.mu.Unlock()
	switch {
	case gone:
		return nil
	case keep || !alive && !fin:
		// No write while the heartbeat is late, nor for a reader that stopped without a stop
		// of the mapping: forget the lease; if the item still names this worker (once the
		// heartbeat is back), a read of it adopts it again.
		d.dropForRead(id, h)
		return nil
	}
	out, err := d.writeRelease(ctx, id, cur, to, toEpoch)
	switch {
	case err == nil:
		d.drop(id, h)
		if l, derr := decodeLease(out.Attributes); derr == nil {
			d.mu.Lock()
			d.rememberLocked(l)
			d.mu.Unlock()
		}
		if to != "" {
			d.log.Info("lease handed over", "shard_id", id, "new_owner", to, "reason", why, "lease_counter", cur+1)
		} else {
			d.log.Info("lease released", "shard_id", id, "reason", why, "lease_counter", cur+1)
		}
	case isConditionFailed(err):
		d.lose(id, h, "release failed its condition")
	default:
		// It may have gone through (a lost response): forget the lease either way. If the
		// item still names this worker, a later read of it adopts it again.
		d.dropForRead(id, h)
		return fmt.Errorf("release lease %s: %w", id, err)
	}
	return nil
}

// prepareRelease: a reader stopped at a stop of the mapping (Stopping) that was neither handed
// over nor finished is handed to a successor. The worker says it is leaving first (if Stopping
// has not yet), so that the others count without it and read what it hands them, and reads
// the roster consistently (at most every 100 ms) to hand over to the workers that are there
// now: another may have stopped since the last read. A reader stopped for another reason (its
// lease found lost, its shard trimmed) says nothing: the worker goes on.
func (d *Dynamo) prepareRelease(ctx context.Context, h *heldLease) {
	d.mu.Lock()
	stopping := d.stopping && h.handTo == "" && !h.finished && !h.gone && !h.unwanted
	stale := d.cfg.now().Sub(d.stopReadAt) > 100*time.Millisecond
	if stopping && stale {
		d.stopReadAt = d.cfg.now()
	}
	d.mu.Unlock()
	if stopping {
		d.markLeaving(ctx)
	}
	if stopping && stale {
		if err := d.readRoster(ctx, true); err != nil {
			d.log.Warn("read roster before hand-over failed", "err", err)
		}
	}
}

// writeRelease writes the release of a lease held at counter cur: unowned, or handed over to
// worker to (epoch toEpoch) when to is set.
func (d *Dynamo) writeRelease(ctx context.Context, id string, cur int64, to string, toEpoch int64) (*dynamodb.UpdateItemOutput, error) {
	names := map[string]string{"#o": attrOwner, "#c": attrCounter, "#e": attrOwnerEpoch, "#p": attrPendingOwner}
	values := map[string]types.AttributeValue{":me": str(d.id), ":cur": num(cur), ":next": num(cur + 1)}
	expr := "SET #c = :next REMOVE #o, #e, #p, #ho"
	names["#ho"] = attrHandedOver
	if to != "" {
		expr = "SET #c = :next, #o = :to, #e = :te, #sw = if_not_exists(#sw, :zero) + :one, #ho = :t REMOVE #p"
		names["#sw"], names["#ho"] = attrOwnerSwitches, attrHandedOver
		values[":to"], values[":te"], values[":zero"], values[":one"] = str(to), num(toEpoch), num(0), num(1)
		values[":t"] = &types.AttributeValueMemberBOOL{Value: true}
	}
	return d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(id),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("#o = :me AND #c = :cur"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
}

// dropForRead forgets a lease whose release was not written (or may not have been): if the
// item still names this worker, a later read of it adopts it again.
func (d *Dynamo) dropForRead(id string, h *heldLease) {
	d.drop(id, h)
	d.mu.Lock()
	d.shardLocked(id).pending = true
	d.mu.Unlock()
}

// successorLocked is the worker the placement gives a shard to without this worker.
func (d *Dynamo) successorLocked(id string) string {
	ms := d.placementMembersLocked(d.id)
	if len(ms) == 0 {
		return ""
	}
	if d.succKey != d.planKey || d.succ.owner == nil {
		d.succ, d.succKey = d.placeLocked(ms), d.planKey
	}
	if o := d.succ.owner[id]; o != "" {
		return o
	}
	return rank(id, ms)[0]
}

// Abandon implements poller.Abandoner: the shard's reader stopped with an invocation cut off
// by the end of the shutdown grace, which may still run. The lease is kept (not handed over),
// and this worker's leave then writes a tombstone for its epoch, as a death does: the next
// owner waits for this worker's invocation bound.
func (d *Dynamo) Abandon(shardID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.shardLocked(shardID)
	s.orphan = false
	if h := s.held; h != nil {
		h.abandoned = true
	}
}

// releaseAll hands over every lease still held (worker shutdown, after the poller returned),
// except those whose invocation was abandoned.
func (d *Dynamo) releaseAll(ctx context.Context) {
	parallel(sortedKeys(d.heldLeases()), func(id string) {
		d.mu.Lock()
		h := d.heldLocked(id)
		abandoned := h != nil && h.abandoned
		d.mu.Unlock()
		if h == nil || abandoned {
			return
		}
		if err := d.release(ctx, id, h, "worker stopping"); err != nil {
			d.log.Warn("release at shutdown failed; the lease will be taken once this worker is declared dead", "shard_id", id, "err", err)
		}
	})
	// Leases handed to this worker that it had not adopted yet go on too, placed by the
	// roster as it is now (workers that stopped meanwhile handed theirs to this one).
	if err := d.readRoster(ctx, true); err != nil {
		d.log.Warn("read roster at shutdown failed", "err", err)
	}
	// Every lease is read, with a consistent scan: a hand-over to this worker may be newer than
	// both its cached copy of the lease and its placement (the worker that handed it over placed
	// it from its own view of the roster). A scan is billed by the bytes it reads, a batch read by
	// the item: at 10,000 shards one stop read 10,000 units at once, most of the partitions'
	// capacity for a second, and the successors' take-up reads were throttled to their next
	// cycle; the scan reads about 1,600.
	all, err := scanTable(ctx, d.api, d.table)
	if err != nil {
		d.log.Warn("read leases at shutdown failed; one handed to this worker meanwhile is free once it has left the roster", "err", err)
	}
	var adopt []string
	d.mu.Lock()
	now := d.cfg.now()
	for id, l := range all {
		if s := d.shardLocked(id); s.held == nil && d.mineLocked(l, now) && !l.Finished() {
			s.held = &heldLease{counter: l.Counter}
			adopt = append(adopt, id)
		}
	}
	d.mu.Unlock()
	slices.Sort(adopt)
	parallel(adopt, func(id string) {
		d.mu.Lock()
		h := d.heldLocked(id)
		d.mu.Unlock()
		if err := d.release(ctx, id, h, "handed over to a stopping worker"); err != nil {
			d.log.Warn("release at shutdown failed; the lease will be taken once this worker is declared dead", "shard_id", id, "err", err)
		}
	})
}

func (d *Dynamo) heldLeases() map[string]*heldLease {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.heldShardsLocked()
}
