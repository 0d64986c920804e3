package lease

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// join makes sure the roster item exists and writes this worker's entry with a new epoch. An
// entry of the same id (a previous incarnation, killed or frozen) is replaced by a tombstone in
// the same write: that incarnation's heartbeats then fail, and leases stamped with its epoch are
// free once it can have neither read nor invoked for them (see DESIGN.md).
func (d *Dynamo) join(ctx context.Context) error {
	ms, tombs, read, err := d.createRoster(ctx)
	if err != nil {
		return err
	}
	// An attempt that failed after its bound was written drew the epoch: joining with it again
	// leaves no bound item of an epoch that never joined (see drawn). Unless that attempt
	// landed after all and the epoch was declared dead since: its tombstone's removal deletes
	// that bound.
	d.mu.Lock()
	epoch, bound := d.me.drawn, d.me.drawn != 0
	if _, dead := tombs[goneKey(d.id, epoch)]; dead {
		bound = false
	}
	if !bound {
		epoch = newEpoch(d.rnd, d.id, ms, tombs)
	}
	known, leaving := d.knownLocked(), d.stopping
	horizon := d.joinHorizonLocked()
	d.mu.Unlock()
	expr, cond := "SET #m.#me = :entry", "attribute_not_exists(#m.#me)"
	names := map[string]string{"#m": attrMembers, "#me": d.id}
	values := map[string]types.AttributeValue{":entry": entryValue(member{epoch: epoch, beat: 1, known: known, leaving: leaving, horizon: horizon})}
	prev, replaced := ms[d.id]
	if replaced && prev.epoch == epoch {
		// The previous attempt's write landed though its answer was lost: write the entry
		// again, and no tombstone of this very epoch.
		replaced, cond = false, "#m.#me.#e = :prev"
		names["#e"], values[":prev"] = memberEpoch, num(epoch)
	}
	var prevWait time.Duration
	if replaced {
		if prevWait, err = d.previousWait(ctx, prev, read); err != nil {
			return err
		}
	}
	// The bound first: a worker whose entry is there has its bound written (or counts as the
	// longest, if it lacks one).
	if !bound {
		if err := d.writeBound(ctx, epoch); err != nil {
			return err
		}
		d.mu.Lock()
		d.me.drawn = epoch
		d.mu.Unlock()
	}
	if replaced {
		expr, cond = d.replaceEntry(expr, prev, prevWait, names, values)
	}
	sent := d.cfg.now()
	out, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(rosterKey),
		UpdateExpression: aws.String(expr), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		return fmt.Errorf("join roster: %w", err)
	}
	got := d.cfg.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rejoined = d.me.epoch != 0
	d.me.epoch, d.me.beat, d.me.joined, d.me.joinedAt, d.me.leaving, d.me.publishedKnown = epoch, 1, true, sent, leaving, known
	d.me.lastBeat, d.me.drawn = sent, 0
	d.countBeatLocked(sent, got)
	d.joinedLocked(sent)
	d.log.Info("joined the lease table's workers", "epoch", epoch)
	return d.observeRosterLocked(out.Attributes, sent, got)
}

// createRoster creates the roster item unless it exists, and returns its members, its tombstones
// and when it was read (the previous incarnation's last heartbeat was sent before).
func (d *Dynamo) createRoster(ctx context.Context) (ms map[string]member, tombs map[string]time.Duration, read time.Time, err error) {
	created, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(rosterKey),
		UpdateExpression:          aws.String("SET #m = if_not_exists(#m, :empty), #g = if_not_exists(#g, :empty)"),
		ExpressionAttributeNames:  map[string]string{"#m": attrMembers, "#g": attrGone},
		ExpressionAttributeValues: map[string]types.AttributeValue{":empty": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("create roster: %w", err)
	}
	read = d.cfg.now()
	ms, tombs, err = decodeRoster(created.Attributes)
	return ms, tombs, read, err
}

// previousWait is how long the leases of this worker's previous incarnation prev, seen on the
// roster read that returned at read, stay unfree once its entry is replaced: until its last
// horizon has passed (computed before the write, so longer rather than shorter). One that
// publishes no horizon: its last heartbeat was sent before the write, its Held (0.8 of its own
// lease duration) ends within that of now, and an invocation it started then ends within its
// bound after that.
func (d *Dynamo) previousWait(ctx context.Context, prev member, read time.Time) (time.Duration, error) {
	p, err := d.readPublished(ctx, d.id, prev.epoch)
	if err != nil {
		return 0, err
	}
	if p.horizons {
		return horizonWait(prev.horizon, read, d.cfg.now()), nil
	}
	return outlast(max(d.safe, p.lease-p.lease/5) + p.bound), nil
}

// replaceEntry adds to a join's update expression the tombstone of the previous incarnation
// prev (waiting w), and returns it with the join's condition: prev's epoch and heartbeat counter
// as read, so that the horizon read is its last (its invocations end within that horizon of the
// read's return).
func (d *Dynamo) replaceEntry(expr string, prev member, w time.Duration, names map[string]string, values map[string]types.AttributeValue) (string, string) {
	names["#g"], names["#old"], names["#e"], names["#h"] = attrGone, goneKey(d.id, prev.epoch), memberEpoch, memberBeat
	values[":tomb"], values[":prev"], values[":ph"] = tombstoneValue(w), num(prev.epoch), num(prev.beat)
	return expr + ", #g.#old = :tomb", "#m.#me.#e = :prev AND #m.#me.#h = :ph"
}

// heartbeat renews this worker's entry (and with it every lease it holds), conditional on its
// epoch: a worker declared dead finds out here, drops every lease and joins again. The regular
// heartbeats and the extra ones that publish a horizon (publishHorizon) are the same write and
// count alike (countBeatLocked).
func (d *Dynamo) heartbeat(ctx context.Context) error {
	d.mu.Lock()
	// Every attempt writes a new value: after a lost response the roster may hold the last
	// attempt's, and rewriting it would look, to the others, like no heartbeat at all.
	d.me.beat++
	epoch, next, leaving, known := d.me.epoch, d.me.beat, d.me.leaving, d.knownLocked()
	var waits []string
	for id, s := range d.shards {
		if s.waiting {
			waits = append(waits, id)
		}
	}
	slices.Sort(waits)
	if len(waits) > maxWaits {
		waits = waits[:maxWaits]
	}
	sent := d.cfg.now()
	horizon := d.horizonLocked(sent)
	attempt := d.composeBeatLocked(sent, horizon)
	d.mu.Unlock()
	set := []string{"#m.#me.#h = :h", "#m.#me.#u = :u"}
	names := map[string]string{"#m": attrMembers, "#me": d.id, "#h": memberBeat, "#e": memberEpoch, "#u": memberKnown}
	values := map[string]types.AttributeValue{":h": num(next), ":e": num(epoch), ":u": num(known)}
	names["#l"], names["#w"] = memberLeave, memberWaits
	var remove []string
	if leaving {
		set = append(set, "#m.#me.#l = :t")
		values[":t"] = &types.AttributeValueMemberBOOL{Value: true}
	} else {
		remove = append(remove, "#m.#me.#l") // a flag of an earlier version's stop, or of a lost answer
	}
	if len(waits) > 0 {
		set = append(set, "#m.#me.#w = :w")
		values[":w"] = &types.AttributeValueMemberSS{Value: waits}
	} else {
		remove = append(remove, "#m.#me.#w")
	}
	expr := setHorizon(set, remove, names, values, horizon)
	out, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(rosterKey),
		UpdateExpression: aws.String(expr), ConditionExpression: aws.String("#m.#me.#e = :e"),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValues: types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		d.expel("declared dead by another worker (its heartbeat stalled for a lease duration)")
		return nil
	}
	got := d.cfg.now()
	if got.Sub(sent) >= d.cfg.leaseDuration/10 {
		// This heartbeat was held up (a stall of the table, answered or not, or cut off by
		// its deadline, L/10): the others' may have been held up as well, so their stillness
		// counts from now.
		d.mu.Lock()
		d.roster.heldUp(got)
		d.mu.Unlock()
	}
	if err != nil {
		d.mu.Lock()
		d.me.beatFailures++
		d.roster.unhealthy = d.cfg.now()
		d.mu.Unlock()
		return fmt.Errorf("heartbeat: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.me.epoch != epoch { // expelled and joined again meanwhile
		return nil
	}
	d.beatWentThroughLocked(attempt, sent, got, horizon)
	d.me.lastBeat, d.me.beatFailures, d.me.publishedKnown = sent, 0, known
	d.countBeatLocked(sent, got)
	return d.observeRosterLocked(out.Attributes, sent, got)
}

// countBeatLocked counts a heartbeat (or join) sent at sent that returned at got as healthy
// when it took at most L/10 and was sent at least 9/10 of a heartbeat period after the last one
// counted: the death rule wants two healthy heartbeats spread by the period, and a busy worker's
// extra heartbeats (one about every half claim interval, publishHorizon) postpone its regular
// ones, so they must count, but a few of them in a row, just after a stall of the table, prove
// nothing of the others' heartbeats. A slower heartbeat follows the rule roster reads follow:
// during a stall of the whole table
// (the roster is one item), the observer's own heartbeats stalled with everyone's and, returned
// at its end, they prove nothing about the others'. A slow one (as a failed one) restarts the
// standstill of every other heartbeat from its return (roster.dead; DESIGN.md, "Epoch leases").
func (d *Dynamo) countBeatLocked(sent, got time.Time) {
	if got.Sub(sent) <= d.cfg.leaseDuration/10 {
		if d.me.beats == 0 || sent.Sub(d.me.countedAt) >= d.beatInt*9/10 {
			d.me.beats++
			d.me.countedAt = sent
		}
	} else {
		d.roster.unhealthy = got
	}
}

// setHorizon completes a heartbeat's update expression (its SET clauses set, the paths remove
// removes) with the horizon r: set, or removed when nothing can run.
func setHorizon(set, remove []string, names map[string]string, values map[string]types.AttributeValue, r time.Duration) string {
	names["#r"] = memberHorizon
	if r > 0 {
		set = append(set, "#m.#me.#r = :r")
		values[":r"] = num(r.Milliseconds())
	} else {
		remove = append(remove, "#m.#me.#r")
	}
	return updateExpression(set, remove)
}

// expel forgets every lease: this worker's entry was removed or replaced. It joins again at the
// next cycle.
func (d *Dynamo) expel(why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.me.joined {
		return
	}
	d.me.joined = false
	d.roster.unhealthy = d.cfg.now() // its view of the others' heartbeats is from before
	for id, s := range d.shards {
		if s.held != nil {
			d.loseLocked(id, s.held, why)
		}
	}
	d.log.Warn("left the lease table's workers", "reason", why)
}

// readRoster reads the roster (eventually consistent: a stale read only delays what this
// worker sees; every decision that matters is a conditional write).
func (d *Dynamo) readRoster(ctx context.Context, consistent bool) error {
	sent := d.cfg.now()
	out, err := d.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &d.table, Key: key(rosterKey), ConsistentRead: aws.Bool(consistent)})
	if err != nil {
		return fmt.Errorf("read roster: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.observeRosterLocked(out.Item, sent, d.cfg.now())
}

// observeRosterLocked records a roster read: the members, and since when each heartbeat has
// not moved. A value first seen counts from when the read was sent (the write that set it
// came before the read was served), unless the read took longer than LeaseDuration/10; then
// from its return. Held keeps a margin of LeaseDuration/5 for this.
func (d *Dynamo) observeRosterLocked(item map[string]types.AttributeValue, sent, got time.Time) error {
	ms, tombs, err := decodeRoster(item)
	if err != nil {
		return err
	}
	d.noteRewindLocked(item)
	d.noteSkipLocked(item)
	at := sent
	if got.Sub(sent) > d.cfg.leaseDuration/10 {
		at = got
	}
	if me, ok := ms[d.id]; d.me.joined && (!ok || me.epoch != d.me.epoch) {
		// Our entry is gone or replaced: the next heartbeat fails and expels us; until then
		// treat ourselves as a member so as not to give leases away on a stale read.
		ms[d.id] = member{epoch: d.me.epoch, beat: d.me.beat, leaving: d.me.leaving, known: d.knownLocked()}
	}
	// Another worker waits for leases that name this one: read them (and adopt and hand on
	// those that do).
	for id, m := range ms {
		if id == d.id {
			continue
		}
		for _, s := range m.waits {
			if sh := d.shardLocked(s); sh.held == nil {
				sh.pending = true
			}
		}
	}
	d.roster.ownWaits(tombstoneBeats(item), tombs, got)
	if d.roster.observe(ms, tombs, at, got, d.me.beats) {
		d.log.Debug("roster changed", "members", len(ms))
	}
	return nil
}

// declareDead replaces a member whose heartbeat stood still by a tombstone, conditional on the
// heartbeat and epoch seen: if it beat meanwhile, nothing happens. The member's leases are free
// once this worker has seen the tombstone for the member's invocation bound (outlast), so that
// no invocation it started before its Held ended is still running when another begins.
func (d *Dynamo) declareDead(ctx context.Context, id string, m member, got time.Time) error {
	p, err := d.readPublished(ctx, id, m.epoch)
	if err != nil {
		return fmt.Errorf("declare %s dead: %w", id, err)
	}
	if p.lease > d.cfg.leaseDuration {
		// Its lease is longer than this worker's (a rolling change of the lease duration): its
		// Held lasts 0.8 of its own, so its death is judged by its own.
		d.mu.Lock()
		d.roster.learnLease(id, m.epoch, p.lease)
		still := slices.Contains(d.roster.dead(d.id, d.cfg.now(), d.cfg.leaseDuration, d.me.beats), id)
		d.mu.Unlock()
		if !still {
			return nil
		}
	}
	k, wait, tomb := goneKey(id, m.epoch), outlast(p.bound), tombstoneValue(outlast(p.bound))
	if p.horizons {
		wait = horizonWait(m.horizon, got, d.cfg.now())
		tomb = tombstoneValue(wait)
		tomb.(*types.AttributeValueMemberM).Value[goneBeat] = num(m.beat)
	}
	_, err = d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(rosterKey),
		UpdateExpression:         aws.String("REMOVE #m.#w SET #g.#k = :tomb"),
		ConditionExpression:      aws.String("#m.#w.#e = :e AND #m.#w.#h = :h"),
		ExpressionAttributeNames: map[string]string{"#m": attrMembers, "#w": id, "#e": memberEpoch, "#h": memberBeat, "#g": attrGone, "#k": k},
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": num(m.epoch), ":h": num(m.beat),
			":tomb": tomb},
	})
	switch {
	case err == nil:
		d.log.Warn("worker declared dead", "dead_worker", id, "heartbeat", m.beat, "horizon", m.horizon, "leases_free_in", wait)
	case isConditionFailed(err):
		// It beat, or another worker declared it first: a consistent read shows which at
		// once, so that this claim cycle takes what the placement now gives this worker
		// (DESIGN.md, "The takeover bound"); until then the entry holds its leases. Not
		// buried here with this worker's own wait: the first declarer's tombstone may be gone
		// already (its wait was short), and with it the bound item, which then read as the
		// longest, 900 s, and held the leases back that long here.
		if err := d.readRoster(ctx, true); err != nil {
			return fmt.Errorf("declare %s dead: %w", id, err)
		}
		return nil
	default:
		return fmt.Errorf("declare %s dead: %w", id, err)
	}
	d.mu.Lock()
	d.roster.bury(id, m.epoch, wait, d.cfg.now())
	d.mu.Unlock()
	return nil
}

// removeTombstones removes the tombstones whose wait has passed here: the member ranked first
// for each does it at once, the others a lease duration later (in case it is dead too). Their
// leases are free whether the tombstone is there or not; removing it keeps the roster small.
func (d *Dynamo) removeTombstones(ctx context.Context) {
	now := d.cfg.now()
	d.mu.Lock()
	var todo []string
	if d.aliveLocked(now) {
		todo = d.roster.tombstonesDue(d.id, now, d.cfg.leaseDuration)
	}
	d.mu.Unlock()
	for _, k := range todo {
		_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &d.table, Key: key(rosterKey),
			UpdateExpression:         aws.String("REMOVE #g.#k"),
			ConditionExpression:      aws.String("attribute_exists(#g.#k)"),
			ExpressionAttributeNames: map[string]string{"#g": attrGone, "#k": k},
		})
		switch {
		case err == nil || isConditionFailed(err):
			d.mu.Lock()
			delete(d.roster.gone, k)
			d.mu.Unlock()
			if id, epoch, ok := goneWorker(k); ok {
				d.dropBound(ctx, id, epoch)
			}
		case ctx.Err() == nil:
			d.log.Warn("remove tombstone failed; will retry", "tombstone", k, "err", err)
		}
	}
}

// leave removes this worker's entry at shutdown, once it holds nothing.
func (d *Dynamo) leave(ctx context.Context) {
	d.mu.Lock()
	joined, epoch, drawn := d.me.joined, d.me.epoch, d.me.drawn
	abandoned := slices.ContainsFunc(slices.Collect(maps.Values(d.heldShardsLocked())), func(h *heldLease) bool { return h.abandoned })
	now := d.cfg.now()
	kept := len(d.heldShardsLocked()) > 0 // held back: an invocation of it may still run
	var wait time.Duration
	if end := d.inflightEndLocked(now); !end.IsZero() {
		wait = outlastRate(end.Sub(now))
	}
	d.me.joined, d.me.drawn = false, 0
	d.mu.Unlock()
	if drawn != 0 { // a join that never went through: its bound item goes too
		d.dropBound(ctx, d.id, drawn)
	}
	if !joined {
		return
	}
	expr := "REMOVE #m.#me"
	names := map[string]string{"#m": attrMembers, "#me": d.id, "#e": memberEpoch}
	values := map[string]types.AttributeValue{":e": num(epoch)}
	if wait > 0 && (abandoned || kept) {
		// An invocation cut off at shutdown may still run: the leases it kept are free only
		// once it must have ended (its deadline), as after a death.
		expr += " SET #g.#k = :tomb"
		names["#g"], names["#k"], values[":tomb"] = attrGone, goneKey(d.id, epoch), tombstoneValue(wait)
		d.log.Warn("leaving with invocations cut off by the shutdown grace: their leases are free to others later", "leases_free_in", wait)
	}
	_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(rosterKey),
		UpdateExpression: aws.String(expr), ConditionExpression: aws.String("#m.#me.#e = :e"),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	})
	if err != nil && !isConditionFailed(err) {
		d.log.Warn("leave roster failed; the others will declare this worker dead", "err", err)
		return
	}
	d.dropBound(ctx, d.id, epoch)
}

// markLeaving tells the others at once that this worker is stopping: they stop counting it in
// the placement (its leases stay its own until it hands them over).
func (d *Dynamo) markLeaving(ctx context.Context) {
	d.mu.Lock()
	if d.me.leaving || !d.me.joined {
		d.mu.Unlock()
		return
	}
	d.me.leaving = true
	d.mu.Unlock()
	// In the heartbeat's turn, as every heartbeat: two at once would both count.
	if !d.lockBeats(ctx) {
		return
	}
	defer d.unlockBeats()
	if err := d.heartbeat(ctx); err != nil && !errors.Is(err, context.Canceled) {
		d.log.Warn("announce shutdown failed; the next heartbeat retries", "err", err)
	}
}

// agreedLocked: every member knows the shards this worker knows, so all compute the same
// placement and know the same children. Hand-overs and the deletion of finished leases wait
// for it.
func (d *Dynamo) agreedLocked() bool {
	return d.roster.agreed(d.id, d.knownLocked(), d.me.publishedKnown)
}

// knownLocked is what this worker publishes of the shards it knows (the roster entry's u): a
// digest of their ids that does not depend on the order they were registered in. A count is
// not enough: two workers that each learnt the children of a different parent from its last
// read (ChildShards, or a CHILD_SHARDS listing of DynamoDB Streams) know as many shards, and a
// worker that does not know a deleted parent's child would create its lease again (cleanUp).
func (d *Dynamo) knownLocked() int64 { return int64(d.knownSum) }

// shardDigest is one shard's part of knownLocked: the 32-bit FNV-1a of its id. 32 bits keep a
// roster entry within the write units of a count's (DESIGN.md, "Roster size"); two different
// sets of shards agree by accident with a chance of about 2⁻³².
func shardDigest(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()
}
