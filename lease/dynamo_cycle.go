package lease

import (
	"context"
	"slices"
	"strings"
)

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

// scan reads the whole table, consistently: every item is seen (see shard.seen), and the
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
		d.shardLocked(id).seen = true
		for _, p := range nonEmpty(l.Parents) {
			if ps := d.shardLocked(p); !slices.Contains(ps.itemChildren, id) {
				ps.itemChildren = append(ps.itemChildren, id)
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
			for _, s := range d.shards {
				s.unlisted = false
			}
			for id, l := range all {
				if !d.peekLocked(id).registered && !slices.ContainsFunc(nonEmpty(l.Parents), func(p string) bool {
					return d.peekLocked(p).registered
				}) && len(nonEmpty(l.Parents)) > 0 {
					d.shardLocked(id).unlisted = true
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
	k := strings.Join(ms, ",") + "|" + itoa(d.registered)
	if k == d.planKey {
		return
	}
	d.planKey = k
	d.plan = d.placeLocked(ms)
	for _, s := range d.shards { // a new placement: look again at once
		if !s.missing { // except at leases read as absent, which name nobody
			s.poll = pollState{}
		}
	}
}

// placeLocked places the shards on members: the open shards (those that are nobody's parent)
// with fair shares, and the closed ones (parents, read to their end and then done) among the
// same members on their own, so that the balance of the shards being read does not depend on
// how many closed ones each worker knows of.
func (d *Dynamo) placeLocked(members []string) assignment {
	var open, closed []string
	for id, s := range d.shards {
		if !s.registered {
			continue
		}
		if len(s.children) > 0 {
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
	for id, s := range d.shards {
		h := s.held
		if h == nil {
			continue
		}
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
	for id, s := range d.shards {
		if !s.registered || s.known && s.last.Finished() {
			continue
		}
		settled := d.settledLocked(id, now)
		// A lease read as absent is not wanted again: Claim creates it, and a create that finds
		// the item gets it back (a cold start waiting for the fleet would read every absent
		// lease at every cycle: at 10,000 shards a third of the partitions' read capacity). It
		// stays watched (pending, below), read with a backoff.
		if (mine(id) && settled || !settled && s.asked) && s.held == nil && !s.missing {
			if !now.Before(s.poll.next) {
				wanted = append(wanted, id)
			}
		}
		// Parents of a shard this worker may read next: placed here, or a child of a shard it
		// holds, held or finished (see Claim: whoever finished a parent creates the child too).
		ps := nonEmpty(s.info.Parents)
		if !mine(id) && s.held == nil && !d.relatedLocked(id) {
			continue
		}
		for _, p := range ps {
			// A parent the listing no longer shows (trimmed) is read too until the child is
			// held: another worker may still be reading its last batch (see Claim).
			if pp := d.peekLocked(p); (!pp.known || !pp.last.Finished()) && pp.held == nil && (pp.info.ShardID != "" || s.held == nil) {
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
		d.shardLocked(id).pending = true
		placed[id] = true
	}
	var watched []string
	for id, s := range d.shards {
		if s.pending && !placed[id] && s.held == nil {
			if !now.Before(s.poll.next) {
				watched = append(watched, id)
			}
		}
	}
	slices.Sort(watched)
	wanted = append(wanted, watched...)
	lineage = slices.Compact(slices.Sorted(slices.Values(lineage)))
	return wanted, lineage
}

// relatedLocked: a parent of the shard is held, owned or finished by this worker, which then
// reads the shard's parents and creates the shard once they are done, whatever the placement.
func (d *Dynamo) relatedLocked(id string) bool {
	return slices.ContainsFunc(d.parentsLocked(id), func(p string) bool {
		s := d.peekLocked(p)
		return s.last.Owner == d.id || s.held != nil || s.finishedHere
	})
}
