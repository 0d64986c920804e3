package lease

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/poller"
)

// maxPollsPerCycle bounds the lease items one claim cycle reads.
const maxPollsPerCycle = 5 * batchGetMax

// cycle is one claim cycle: roster, dead workers, placement, reads and takes of the leases
// placed here. Failures are logged and retried at the next cycle; only a cancelled ctx ends it
// early.
func (d *Dynamo) cycle(ctx context.Context) error {
	d.mu.Lock()
	d.cycles++
	d.lastCycle = d.cfg.now()
	d.mu.Unlock()
	d.beatOnce(ctx)
	now := d.cfg.now()
	d.mu.Lock()
	stale := d.joined && now.Sub(d.rosterAt) >= d.ClaimInterval()*9/10
	d.mu.Unlock()
	if stale {
		if err := d.readRoster(ctx, false); err != nil && ctx.Err() == nil {
			d.log.Warn("read roster failed; will retry", "err", err)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	d.mu.Lock()
	epoch := d.epoch
	rescan := d.joined && d.scanned != epoch
	d.mu.Unlock()
	if rescan {
		all, err := d.scan(ctx, epoch)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d.log.Warn("read lease table failed; will retry", "err", err)
		}
		d.mu.Lock()
		d.lastScan = all
		d.mu.Unlock()
	}
	d.declareDeadMembers(ctx)
	d.removeTombstones(ctx)
	wanted, lineage := d.plan1()
	d.pollAndTake(ctx, wanted, lineage)
	d.cleanUp(ctx)
	return nil
}

// scan reads the whole table, consistently: every item is seen (see Dynamo.seen), and the
// parents each names. Under epoch (0: not joined) it is the read after the join that Claim
// waits for before it creates a lease: a worker that comes back after it was declared dead
// (paused, cut off) learns which items were created or deleted meanwhile (DESIGN.md, "Finished
// stays finished").
func (d *Dynamo) scan(ctx context.Context, epoch int64) (map[string]Lease, error) {
	all, err := scanTable(ctx, d.api, d.table)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, l := range all {
		d.seen[id] = true
		for _, p := range nonEmpty(l.Parents) {
			if !slices.Contains(d.itemChildren[p], id) {
				d.itemChildren[p] = append(d.itemChildren[p], id)
			}
		}
	}
	if epoch != 0 && epoch == d.epoch {
		d.scanned = epoch
		if d.rejoined {
			// A worker back after it was declared dead may hold a listing from before its
			// pause: the items of shards it never listed, whose parents it never listed
			// either, are descendants it cannot link to the shards it knows (their parents'
			// items may be gone). Its next listing links them.
			clear(d.unlisted)
			for id, l := range all {
				if _, known := d.infos[id]; !known && !slices.ContainsFunc(nonEmpty(l.Parents), func(p string) bool {
					_, known := d.infos[p]
					return known
				}) && len(nonEmpty(l.Parents)) > 0 {
					d.unlisted[id] = true
				}
			}
			d.unlistedAt = d.cfg.now()
		}
	}
	return all, nil
}

// declareDeadMembers declares dead the members whose heartbeat stood still for a lease
// duration. The member ranked first for the duty does it at once, the others a claim
// interval later (in case it is dead too).
func (d *Dynamo) declareDeadMembers(ctx context.Context) {
	now := d.cfg.now()
	d.mu.Lock()
	if !d.aliveLocked(now) {
		d.mu.Unlock()
		return
	}
	type victim struct {
		id string
		m  member
	}
	var todo []victim
	dead := d.deadMembersLocked(now)
	var live []string
	for id := range d.members {
		if !slices.Contains(dead, id) {
			live = append(live, id)
		}
	}
	for _, id := range dead {
		o := d.beats2[id]
		if r := rank(id, live); len(r) > 0 && r[0] == d.id || d.plan.load[id] > 0 {
			todo = append(todo, victim{id, o.m})
		}
	}
	d.mu.Unlock()
	for _, v := range todo {
		if err := d.declareDead(ctx, v.id, v.m); err != nil && ctx.Err() == nil {
			d.log.Warn("declare dead failed; will retry", "dead_worker", v.id, "err", err)
		}
	}
}

// placementMembersLocked are the members the placement counts: those not leaving.
func (d *Dynamo) placementMembersLocked(without string) []string {
	var out []string
	for id, m := range d.members {
		if (!m.leaving || id == d.id) && id != without { // our own flag never moves our leases
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// replanLocked recomputes the placement when the members or the shards changed.
func (d *Dynamo) replanLocked() {
	ms := d.placementMembersLocked("")
	k := strings.Join(ms, ",") + "|" + itoa(len(d.infos))
	if k == d.planKey {
		return
	}
	d.planKey = k
	d.plan = d.placeLocked(ms)
	for id := range d.polls { // a new placement: look again at once
		if !d.missing[id] { // except at leases read as absent, which name nobody
			delete(d.polls, id)
		}
	}
}

// placeLocked places the shards on members: the open shards (those that are nobody's parent)
// with fair shares, and the closed ones (parents, read to their end and then done) among the
// same members on their own, so that the balance of the shards being read does not depend on
// how many closed ones each worker knows of.
func (d *Dynamo) placeLocked(members []string) assignment {
	var open, closed []string
	for id := range d.infos {
		if len(d.children[id]) > 0 {
			closed = append(closed, id)
		} else {
			open = append(open, id)
		}
	}
	a := assign(open, members)
	for id, m := range assign(closed, members).owner {
		a.owner[id] = m
	}
	return a
}

// plan1 updates the placement, marks held leases placed elsewhere for hand-over, and returns
// the leases to read: those placed here and not held (wanted), and the unfinished parents of
// shards this worker is to read next (lineage).
func (d *Dynamo) plan1() (wanted, lineage []string) {
	now := d.cfg.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.joined {
		return nil, nil
	}
	d.replanLocked()
	for id, h := range d.held {
		to := d.plan.owner[id]
		if to != "" && to != d.id && d.settledLocked(id, now) && d.agreedLocked() && !d.members[to].leaving && !h.finished {
			if h.handTo != to {
				d.log.Info("hand-over due", "shard_id", id, "new_owner", to)
			}
			h.handTo = to
		} else {
			h.handTo = ""
		}
	}
	mine := func(id string) bool { return d.plan.owner[id] == d.id }
	for id := range d.infos {
		l, known := d.cache[id]
		if known && l.Finished() {
			continue
		}
		settled := d.settledLocked(id, now)
		// A lease read as absent is not wanted again: Claim creates it, and a create that finds
		// the item gets it back (a cold start waiting for the fleet would read every absent
		// lease at every cycle: at 10,000 shards a third of the partitions' read capacity). It
		// stays watched (pending, below), read with a backoff.
		if (mine(id) && settled || !settled && d.lastCand[id]) && d.held[id] == nil && !d.missing[id] {
			if p, ok := d.polls[id]; !ok || !now.Before(p.next) {
				wanted = append(wanted, id)
			}
		}
		// Parents of a shard this worker may read next: placed here, or a child of a shard it
		// holds, held or finished (see Claim: whoever finished a parent creates the child too).
		ps := nonEmpty(d.infos[id].Parents)
		if !mine(id) && d.held[id] == nil && !d.relatedLocked(id) {
			continue
		}
		for _, p := range ps {
			// A parent the listing no longer shows (trimmed) is read too until the child is
			// held: another worker may still be reading its last batch (see Claim).
			if pl, ok := d.cache[p]; (!ok || !pl.Finished()) && d.held[p] == nil && (d.infos[p].ShardID != "" || d.held[id] == nil) {
				lineage = append(lineage, p)
			}
		}
	}
	// Leases placed here under an earlier placement stay watched until they are seen owned by
	// someone else: one handed over to this worker just before the placement moved it
	// elsewhere names this worker, which adopts it and hands it on. They come after the
	// leases placed here now, so that a cycle that cannot read them all reads those first.
	slices.Sort(wanted)
	placed := make(map[string]bool, len(wanted))
	for _, id := range wanted {
		d.pending[id] = true
		placed[id] = true
	}
	var watched []string
	for id := range d.pending {
		if !placed[id] && d.held[id] == nil {
			if p, ok := d.polls[id]; !ok || !now.Before(p.next) {
				watched = append(watched, id)
			}
		}
	}
	slices.Sort(watched)
	wanted = append(wanted, watched...)
	lineage = slices.Compact(slices.Sorted(slices.Values(lineage)))
	return wanted, lineage
}

// readOrder lists the leases a cycle reads, at most maxPollsPerCycle, most urgent first: the
// parents a child waits on, then the wanted leases in the order plan1 gives them (placed here
// now, then watched). A cycle that cut a sorted list instead read the same watched leases at
// every cycle and never reached the ones placed here (a staggered start: the first worker
// watches every shard it was once given).
func readOrder(wanted, lineage []string) []string {
	seen := make(map[string]bool, len(wanted)+len(lineage))
	var ids []string
	for _, id := range append(slices.Clone(lineage), wanted...) {
		if len(ids) == maxPollsPerCycle {
			break
		}
		if !seen[id] { // BatchGetItem refuses duplicate keys
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// pollAndTake reads the wanted and lineage leases (consistently, in batches) and takes the
// wanted ones that are free.
func (d *Dynamo) pollAndTake(ctx context.Context, wanted, lineage []string) {
	ids := readOrder(wanted, lineage)
	if len(ids) == 0 {
		return
	}
	retries := 0
	if len(lineage) > 0 { // a child waits on these reads: a fault would cost it a cycle
		retries = childRetries
	}
	items := d.batchGetRetry(ctx, ids, retries)
	now := d.cfg.now()
	d.mu.Lock()
	var take []Lease
	for _, id := range wanted {
		it, ok := items[id]
		if !ok {
			continue // not read (throttled): next cycle
		}
		if it == nil && d.seen[id] {
			// Seen before and gone now: deleted, so finished (see cleanUp). Never created
			// again, whatever this worker's listing says of the shard's children.
			d.cache[id] = finishedMarker(id)
			delete(d.missing, id)
			delete(d.pending, id)
			delete(d.waiting, id)
			continue
		}
		if it == nil {
			d.missing[id] = true
			delete(d.cache, id)
			// An absent lease names nobody: nothing to adopt. Claim creates it if it is placed
			// here; a watched one placed elsewhere is read less and less often (a worker of a
			// staggered start watches every shard it was once given, none created yet).
			d.backoffLocked(id, now)
			continue
		}
		delete(d.missing, id)
		if d.held[id] != nil || it.Finished() {
			delete(d.pending, id)
			delete(d.waiting, id)
			continue
		}
		if d.plan.owner[id] != d.id && it.Owner != d.id {
			delete(d.pending, id) // placed elsewhere now, and not ours
			continue
		}
		if it.OwnerEpoch == 0 && it.Owner != "" && it.Owner != d.id {
			if o, ok := d.legacy[id]; !ok || o.counter != it.Counter {
				d.legacy[id] = observation{counter: it.Counter, since: now}
			}
		}
		ours := it.Owner == d.id && it.OwnerEpoch == d.epoch && !it.HandedOver
		if ours || (d.freeLocked(*it, now) || d.mineLocked(*it, now)) && d.lastCand[id] {
			// Free, or handed over to this worker, and asked for by the poller: a lease
			// taken for a shard the poller does not read (trimmed from its listing) would keep
			// the shard's children waiting for good (see parentsDone).
			delete(d.waiting, id)
			take = append(take, *it)
			continue
		}
		if d.freeLocked(*it, now) || d.mineLocked(*it, now) {
			d.backoffLocked(id, now)
			continue
		}
		if g, ok := d.gone[goneKey(it.Owner, it.OwnerEpoch)]; ok {
			// Its owner is dead or replaced: free once the tombstone's wait has passed here.
			// Read it again then, not after a back-off.
			d.polls[id] = pollState{next: g.seen.Add(g.wait)}
			continue
		}
		if d.plan.owner[id] == d.id && d.polls[id].tries >= pollEager {
			d.waiting[id] = true // ask the owner, through the roster, to look at it
		}
		d.backoffLocked(id, now)
	}
	for _, p := range lineage {
		// A trimmed parent without an item is not read by anyone: never created (it was
		// closed before a LATEST start) or finished and deleted. One seen before was deleted.
		if it, ok := items[p]; ok && it == nil && (d.infos[p].ShardID == "" || d.seen[p]) {
			d.cache[p] = finishedMarker(p)
		}
	}
	for _, p := range append(slices.Clone(lineage), wanted...) {
		// A parent without an item whose child has one was finished and deleted (children
		// get items only once their parents are finished; see cleanUp).
		if it, ok := items[p]; ok && it == nil && slices.ContainsFunc(d.children[p], func(c string) bool {
			_, known := d.cache[c]
			return known || d.held[c] != nil
		}) {
			d.cache[p] = finishedMarker(p)
		}
	}
	d.mu.Unlock()
	parallel(d.confirmFree(ctx, take), func(l Lease) { d.take(ctx, l) })
}

// confirmFree keeps the leases that are free by a consistent read of the roster made after
// they were read: a worker that joined since this worker's last (eventually consistent) read
// would otherwise look gone. An entry, once replaced or removed, never comes back, so an owner
// whose entry a consistent read does not show with the lease's epoch is gone for good.
func (d *Dynamo) confirmFree(ctx context.Context, ls []Lease) []Lease {
	others := slices.ContainsFunc(ls, func(l Lease) bool { return l.Owner != "" && l.Owner != d.id && l.OwnerEpoch != 0 })
	if !others {
		return ls
	}
	if err := d.readRoster(ctx, true); err != nil {
		if ctx.Err() == nil {
			d.log.Warn("read roster failed; will retry", "err", err)
		}
		return slices.DeleteFunc(ls, func(l Lease) bool { return l.Owner != "" && l.Owner != d.id && l.OwnerEpoch != 0 })
	}
	now := d.cfg.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.DeleteFunc(ls, func(l Lease) bool { return !d.mineLocked(l, now) && !d.freeLocked(l, now) })
}

// batchGet reads leases consistently: id → item, nil when absent; ids not read are left out.
func (d *Dynamo) batchGet(ctx context.Context, ids []string) map[string]*Lease {
	return d.batchGetRetry(ctx, ids, 0)
}

// batchGetRetry is batchGet, retrying a failed or throttled read up to retries times at once.
func (d *Dynamo) batchGetRetry(ctx context.Context, ids []string, retries int) map[string]*Lease {
	out := map[string]*Lease{}
	for chunk := range slices.Chunk(ids, batchGetMax) {
		keys := make([]map[string]types.AttributeValue, len(chunk))
		for i, id := range chunk {
			keys[i] = key(id)
		}
		req := map[string]types.KeysAndAttributes{d.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for try := 0; len(req) > 0 && ctx.Err() == nil; try++ {
			if try > 0 && !ctxwait.Sleep(ctx, time.Duration(try)*retryPause) {
				break
			}
			res, err := d.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				if try < retries {
					continue
				}
				if ctx.Err() == nil {
					d.log.Warn("read leases failed; will retry", "err", err)
				}
				return out
			}
			for _, it := range res.Responses[d.table] {
				l, err := decodeLease(it)
				if err != nil {
					d.log.Warn("unreadable lease item", "err", err)
					continue
				}
				out[l.ShardID] = &l
			}
			unprocessed := map[string]bool{}
			for _, k := range res.UnprocessedKeys[d.table].Keys {
				if v, ok := k[attrKey].(*types.AttributeValueMemberS); ok {
					unprocessed[v.Value] = true
				}
			}
			for _, id := range chunk {
				if _, ok := out[id]; !ok && !unprocessed[id] {
					out[id] = nil
				}
			}
			// Unprocessed keys (throttled) are retried, or wait for the next cycle.
			req = nil
			if u := res.UnprocessedKeys[d.table]; len(u.Keys) > 0 && try < retries {
				req = map[string]types.KeysAndAttributes{d.table: u}
			}
		}
	}
	d.mu.Lock()
	for _, l := range out {
		if l != nil {
			d.rememberLocked(*l)
		}
	}
	d.mu.Unlock()
	return out
}

// take takes (or adopts) a lease this worker found free, conditional on the counter and owner
// it read, stamping its epoch.
func (d *Dynamo) take(ctx context.Context, l Lease) {
	d.mu.Lock()
	epoch := d.epoch
	if l.Owner == d.id && l.OwnerEpoch == epoch && !l.HandedOver { // ours already: nothing to write
		d.mu.Unlock()
		if !d.stillUnfinished(ctx, l, false) {
			return
		}
		d.mu.Lock()
		if d.epoch == epoch && d.joined {
			d.held[l.ShardID] = &heldLease{counter: l.Counter}
		}
		d.mu.Unlock()
		d.log.Info("lease taken", "shard_id", l.ShardID, "reason", "handed over", "lease_counter", l.Counter)
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
	if !d.stillUnfinished(ctx, l, false) {
		return
	}
	d.mu.Lock()
	if d.epoch == epoch && d.joined {
		d.held[l.ShardID] = &heldLease{counter: l.Counter}
	}
	d.mu.Unlock()
	d.log.Info("lease taken", "shard_id", l.ShardID, "reason", reason, "previous_owner", l.Owner, "lease_counter", l.Counter)
}

// noteFailure records what a failed conditional write returned, or logs another failure.
func (d *Dynamo) noteFailure(id string, err error, what string) {
	var ccf *types.ConditionalCheckFailedException
	if ok := asCCF(err, &ccf); ok {
		d.mu.Lock()
		if l, derr := decodeLease(ccf.Item); derr == nil && len(ccf.Item) > 0 {
			d.rememberLocked(l)
			d.backoffLocked(id, d.cfg.now())
		} else {
			// No item came back (dynalite ignores ReturnValuesOnConditionCheckFailure): read it
			// at once. A back-off here, renewed by each failed create, would defer that read
			// for good, and a lease handed over to this worker would never be taken.
			d.pending[id] = true
			delete(d.polls, id)
		}
		d.mu.Unlock()
		d.log.Debug(what+": another worker was first", "shard_id", id)
		return
	}
	d.mu.Lock()
	d.pending[id] = true // it may have gone through: read it again, at once
	delete(d.polls, id)
	d.mu.Unlock()
	d.log.Warn(what+" failed; will retry", "shard_id", id, "err", err)
}

func asCCF(err error, target **types.ConditionalCheckFailedException) bool {
	return err != nil && errorsAs(err, target)
}

// create creates the lease of a shard placed here, owned by this worker. A shard with a
// descendant that has an item was finished and deleted (see cleanUp), as was one this worker
// saw an item of and then read absent (see pollAndTake): it is never created again. The
// descendants are read again after the write: a check made before it may be stale by the
// time it lands (see stillUnfinished).
func (d *Dynamo) create(ctx context.Context, id string, _ bool) {
	d.mu.Lock()
	si, ok := d.infos[id]
	epoch := d.epoch
	d.mu.Unlock()
	if !ok {
		si = poller.ShardInfo{ShardID: id}
	}
	switch found, read := d.descendantHasItem(ctx, id, true); {
	case !read:
		return // could not tell: next cycle
	case found:
		d.mu.Lock()
		d.cache[id] = finishedMarker(id)
		delete(d.missing, id)
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
	if asCCF(err, &ccf) {
		// The item exists: ours when an earlier attempt went through and its response was lost.
		if l, derr := decodeLease(ccf.Item); derr == nil && l.Owner == d.id && l.OwnerEpoch == epoch && l.Counter == 1 && !l.HandedOver {
			err = nil
		}
	}
	if err != nil {
		d.noteFailure(id, err, "create lease")
		d.mu.Lock()
		delete(d.missing, id)
		d.mu.Unlock()
		return
	}
	l, _ := decodeLease(item)
	d.mu.Lock()
	delete(d.missing, id)
	d.rememberLocked(l)
	d.mu.Unlock()
	if !d.stillUnfinished(ctx, l, true) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.epoch == epoch && d.joined {
		// The poller starts it from the Initial it registered, which is what the item holds.
		// A start the table replaced reaches the poller through the next Load first.
		d.held[id] = &heldLease{counter: 1, fresh: !d.restarted[id]}
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
			for _, c := range append(slices.Clone(d.children[s]), d.itemChildren[s]...) {
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
	d.cache[l.ShardID] = finishedMarker(l.ShardID)
	delete(d.missing, l.ShardID)
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
	l, known := d.cache[id]
	d.mu.Unlock()
	if !known {
		d.create(ctx, id, false)
		return
	}
	if len(d.confirmFree(ctx, []Lease{l})) == 0 {
		return
	}
	d.take(ctx, l)
	d.mu.Lock()
	if h := d.held[id]; h != nil {
		// The poller starts it from what the last Load returned, which was the item as read
		// before the take: fine unless the take showed other progress.
		h.fresh = d.cache[id].Progress == l.Progress
	}
	d.mu.Unlock()
}

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
	var ids []string
	for p := range d.cleanup {
		parents = append(parents, p)
		ids = append(ids, p)
		ids = append(ids, d.children[p]...)
	}
	d.mu.Unlock()
	if len(parents) == 0 {
		return
	}
	slices.Sort(ids)
	items := d.batchGet(ctx, slices.Compact(ids))
	var deletable []string
	nkids := map[string]int{}
	for _, p := range parents {
		pl := items[p]
		done := pl != nil && pl.Finished()
		d.mu.Lock()
		kids := append(slices.Clone(d.children[p]), func() []string {
			if pl != nil {
				return pl.Children
			}
			return nil
		}()...)
		d.mu.Unlock()
		for _, c := range kids {
			cl, ok := items[c]
			if !ok {
				cl2, got := d.batchGet(ctx, []string{c})[c]
				cl, ok = cl2, got
			}
			if !ok || cl == nil || !started(*cl) {
				done = false
			}
		}
		d.mu.Lock()
		delete(d.cleanup, p)
		d.mu.Unlock()
		if done && len(kids) > 0 {
			deletable = append(deletable, p)
			nkids[p] = len(kids)
		}
	}
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

// keepForCleanUp checks the parents again at the next cycle.
func (d *Dynamo) keepForCleanUp(parents []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range parents {
		d.cleanup[p] = true
	}
}

// started: the shard was read (a checkpoint past its starting position, or finished).
func started(l Lease) bool {
	return l.Finished() || l.Progress.Checkpoint != ""
}

// rememberLocked records an item read or written: the last one seen of its shard.
func (d *Dynamo) rememberLocked(l Lease) {
	d.cache[l.ShardID] = l
	d.seen[l.ShardID] = true
}

// finishedMarker stands for the lease of a finished shard whose item was deleted.
func finishedMarker(id string) Lease {
	return Lease{ShardID: id, Checkpoint: sentinelShardEnd, Progress: poller.ShardProgress{Finished: true}}
}

// childRetries is how many times a call on a child's path (the reads of its parents, its
// creation) is retried at once after a failure or throttling: each would otherwise cost the
// child a claim cycle. (The SDK's own retries, in production, come on top.)
const childRetries = 2

// retryPause is the pause before the first retry of childRetries; each further one waits
// once more.
const retryPause = 20 * time.Millisecond

// relatedLocked: a parent of the shard is held, owned or finished by this worker, which then
// reads the shard's parents and creates the shard once they are done, whatever the placement.
func (d *Dynamo) relatedLocked(id string) bool {
	return slices.ContainsFunc(nonEmpty(d.infos[id].Parents), func(p string) bool {
		return d.cache[p].Owner == d.id || d.held[p] != nil || d.finishedHere[p]
	})
}

// backoffLocked schedules the next read of a lease another worker holds: every claim cycle
// for the first few (a hand-over is on its way), then less and less often, up to pollMax.
func (d *Dynamo) backoffLocked(id string, now time.Time) {
	p := d.polls[id]
	p.tries++
	if p.tries > pollEager {
		p.backoff = min(max(2*p.backoff, pollMin), pollMax)
	}
	p.next = now.Add(p.backoff)
	d.polls[id] = p
}
