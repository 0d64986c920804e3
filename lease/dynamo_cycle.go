package lease

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
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
	stale := d.me.joined && now.Sub(d.roster.readAt) >= d.ClaimInterval()*9/10
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
	epoch := d.me.epoch
	rescan := d.me.joined && d.scanned != epoch
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
	wanted, lineage := d.toRead()
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
	if epoch != 0 && epoch == d.me.epoch {
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
		id  string
		m   member
		got time.Time
	}
	var todo []victim
	dead := d.roster.dead(d.id, now, d.cfg.leaseDuration, d.me.beats)
	var live []string
	for id := range d.roster.members {
		if !slices.Contains(dead, id) {
			live = append(live, id)
		}
	}
	for _, id := range dead {
		o := d.roster.beats[id]
		if r := rank(id, live); len(r) > 0 && r[0] == d.id || d.plan.load[id] > 0 {
			todo = append(todo, victim{id, o.m, o.got})
		}
	}
	d.mu.Unlock()
	for _, v := range todo {
		if err := d.declareDead(ctx, v.id, v.m, v.got); err != nil && ctx.Err() == nil {
			d.log.Warn("declare dead failed; will retry", "dead_worker", v.id, "err", err)
		}
	}
}

// placementMembersLocked are the members the placement counts: those not leaving.
func (d *Dynamo) placementMembersLocked(without string) []string {
	return d.roster.placementMembers(d.id, without)
}

// replanLocked recomputes the placement when the members or the shards changed.
func (d *Dynamo) replanLocked() {
	ms := d.placementMembersLocked("")
	k := strings.Join(ms, ",") + "|" + strconv.Itoa(d.registered)
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

// toRead updates the placement, marks held leases placed elsewhere for hand-over, and returns
// the leases to read: those placed here and not held (wanted), and the unfinished parents of
// shards this worker is to read next (lineage). The decisions are place's.
func (d *Dynamo) toRead() (wanted, lineage []string) {
	now := d.cfg.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.me.joined {
		return nil, nil
	}
	d.replanLocked()
	p := place(d.placementInputLocked(now))
	for id, to := range p.handTo {
		h := d.shards[id].held
		if to != "" && h.handTo != to {
			d.log.Info("hand-over due", "shard_id", id, "new_owner", to)
		}
		h.handTo = to
	}
	for _, id := range p.placed {
		d.shardLocked(id).pending = true
	}
	return p.wanted, p.lineage
}

// placementInputLocked is this worker's view, now, for place, claims, free and mine.
func (d *Dynamo) placementInputLocked(now time.Time) placementInput {
	return placementInput{self: d.id, epoch: d.me.epoch, now: now, owner: d.plan.owner, roster: &d.roster,
		agreed: d.agreedLocked(), settle: d.cfg.settle, leaseDuration: d.cfg.leaseDuration, shards: d.shards}
}

// relatedLocked: a parent of the shard is held, owned or finished by this worker (see
// placementInput.related).
func (d *Dynamo) relatedLocked(id string) bool {
	s := d.peekLocked(id)
	return placementInput{self: d.id, shards: d.shards}.related(&s)
}
