package lease

import (
	"context"
	"slices"
	"time"
)

// Claim implements poller.Coordinator: it runs a claim cycle (or uses the one Load ran just
// before), creates the leases of candidates placed on this worker that have none yet, takes
// free candidates that the placement does not cover yet (children of a recent split or merge),
// and returns the candidates it holds, minus those placed on another worker (to be handed
// over: the poller stops the reader and calls Release) and those whose current progress the
// last Load did not return.
func (d *Dynamo) Claim(ctx context.Context, candidates []string) ([]string, error) {
	d.cycleMu.Lock()
	defer d.cycleMu.Unlock()
	cand := make(map[string]bool, len(candidates))
	for _, id := range candidates {
		cand[id] = true
	}
	if reuse := d.startClaim(cand); !reuse {
		if err := d.cycle(ctx); err != nil {
			return nil, err
		}
	}
	now := d.cfg.now()
	create, grab := d.claimTargets(candidates, now)
	done := d.parentsDone(ctx, append(slices.Clone(create), grab...))
	create = slices.DeleteFunc(create, func(id string) bool { return !done[id] })
	grab = slices.DeleteFunc(grab, func(id string) bool { return !done[id] })
	parallel(create, func(id string) { d.create(ctx, id) })
	parallel(grab, func(id string) { d.grab(ctx, id) })
	d.releaseIdle(ctx, cand)
	return d.announce(candidates, now), nil
}

// startClaim records the candidates of this Claim and says whether the cycle Load ran just
// before serves it.
func (d *Dynamo) startClaim(cand map[string]bool) (reuse bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// The cycle takes only leases the poller asks for (see pollAndTake): the first Claim
	// runs its own, since Load's ran before any candidates were known.
	reuse = !d.lastLoad.IsZero() && d.cfg.now().Sub(d.lastLoad) < cycleReuse && d.claims > 0
	d.lastLoad = time.Time{}
	for id, s := range d.shards {
		s.asked = cand[id]
	}
	for id := range cand {
		d.shardLocked(id).asked = true
	}
	d.claims++
	return reuse
}

// claimTargets picks, among the candidates, the leases to create (placed here, or children of
// a shard this worker finished) and those to grab (not placed yet: new children).
func (d *Dynamo) claimTargets(candidates []string, now time.Time) (create, grab []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	in := d.placementInputLocked(now)
	in.ready = d.me.joined && now.Sub(d.me.joinedAt) >= d.beatInt && d.aliveLocked(now)
	// Nothing is created before the whole table was read under this epoch, nor while it shows
	// shards a listing older than them cannot link to those it knows (see scan).
	in.scanned = d.scanned == d.me.epoch && (!d.unlistedLocked() || now.Sub(d.unlistedAt) >= d.cfg.settle)
	in.fleetQuiet = now.Sub(d.roster.fleetChanged) >= d.beatInt+d.ClaimInterval() || now.Sub(d.me.joinedAt) >= coldStartMax
	return claims(in, candidates)
}

// releaseIdle hands over the leases placed elsewhere that no reader runs here (adopted after
// another worker asked), and releases those the poller does not ask for (a shard trimmed from
// its listing, adopted after a lost response), so that no idle holder keeps a parent's
// children waiting (see parentsDone).
func (d *Dynamo) releaseIdle(ctx context.Context, cand map[string]bool) {
	d.mu.Lock()
	var idle []string
	for id, s := range d.shards {
		h := s.held
		switch {
		case h == nil:
		case h.announced || h.finished:
		case h.handTo != "":
			idle = append(idle, id)
		case !cand[id]:
			h.unwanted = true
			idle = append(idle, id)
		}
	}
	d.mu.Unlock()
	parallel(idle, func(id string) {
		d.mu.Lock()
		h := d.heldLocked(id)
		why := "no reader here"
		if h != nil && h.unwanted {
			why = "not asked for by the poller"
		}
		d.mu.Unlock()
		if h != nil {
			if err := d.release(ctx, id, h, why); err != nil && ctx.Err() == nil {
				d.log.Warn("hand-over failed; will retry", "shard_id", id, "err", err)
			}
		}
	})
}

// announce returns the candidates held here for the poller to read, and marks them announced.
func (d *Dynamo) announce(candidates []string, now time.Time) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, id := range candidates {
		s := d.peekLocked(id)
		h := s.held
		if h == nil || h.handTo != "" || !h.fresh || h.finished || s.orphan || !d.aliveLocked(now) {
			continue
		}
		h.announced = true
		out = append(out, id)
	}
	return out
}

// parentsDone returns which of the shards (about to be created or taken) have every parent
// done: finished, or read just now and held by no live worker but this one. The poller counts
// a parent the listing no longer shows (trimmed by retention) as finished, but its owner
// elsewhere may still be invoking its last batch: the child waits for its checkpoint
// (invariant 3) or for the owner to stop (hand-over, release) or die. A cached copy of the
// parent does not do: the lease may have been taken since (sim LEASES=1 seed 60). Nobody
// reads a trimmed parent after such a read (its records are gone), and a finished lease stays
// finished, so a child whose item exists has parents that are done.
//
// A parent done without having been read (no item: trimmed before anyone created it; or an
// item nobody started) says nothing of its own parents, whose last batch may still run
// elsewhere: their children never waited for it. The child then waits on those too, one
// generation at a time, up to ancestors that were read (sim LEASES=1 seed 207: a child of a
// trimmed, never-read shard invoked while its grandparent's last batch ran elsewhere).
func (d *Dynamo) parentsDone(ctx context.Context, ids []string) map[string]bool {
	out := make(map[string]bool, len(ids))
	gen := map[string][]string{} // the ancestors to check next, each with the shards it gates
	d.mu.Lock()
	for _, id := range ids {
		out[id] = true
		for _, p := range d.parentsLocked(id) {
			gen[p] = append(gen[p], id)
		}
	}
	d.mu.Unlock()
	checked := map[string]bool{}
	for len(gen) > 0 {
		read, ok := d.readAncestors(ctx, gen)
		if !ok {
			return nil
		}
		now := d.cfg.now()
		next := map[string][]string{}
		d.mu.Lock()
		for a, kids := range gen {
			checked[a] = true
			done, above := d.ancestorDoneLocked(a, read, now)
			for _, id := range kids {
				out[id] = out[id] && done
			}
			if !above {
				continue
			}
			for _, p := range d.parentsLocked(a) {
				if !checked[p] {
					next[p] = append(next[p], kids...)
				}
			}
		}
		d.mu.Unlock()
		gen = next
	}
	return out
}

// readAncestors reads consistently the ancestors of gen that this worker neither holds nor
// knows finished, and when one names an owner its roster lacks, the roster too (consistently:
// that owner may have joined since; see confirmFree). ok is false when that roster read failed.
func (d *Dynamo) readAncestors(ctx context.Context, gen map[string][]string) (read map[string]*Lease, ok bool) {
	d.mu.Lock()
	var ps []string
	for p := range gen {
		if s := d.peekLocked(p); !s.last.Finished() && s.held == nil {
			ps = append(ps, p)
		}
	}
	d.mu.Unlock()
	read = map[string]*Lease{}
	if len(ps) == 0 {
		return read, true
	}
	slices.Sort(ps)
	read = d.batchGetRetry(ctx, ps, childRetries)
	now := d.cfg.now()
	d.mu.Lock()
	gone := false
	for _, l := range read {
		gone = gone || l != nil && d.ownerGoneLocked(*l, now)
	}
	d.mu.Unlock()
	if gone {
		if err := d.readRoster(ctx, true); err != nil {
			if ctx.Err() == nil {
				d.log.Warn("read roster failed; will retry", "err", err)
			}
			return nil, false
		}
	}
	return read, true
}

// ancestorDoneLocked judges ancestor a of a shard about to be read, from what readAncestors
// read of it: done when it is held here (the poller waits for its reader), known finished, or
// read unfinished and held by no other live worker. above says its own parents are to be
// checked too: it was done without being read (no item, or an item nobody started).
func (d *Dynamo) ancestorDoneLocked(a string, read map[string]*Lease, now time.Time) (done, above bool) {
	s := d.peekLocked(a)
	switch {
	case s.held != nil:
		return true, false
	case s.last.Finished():
		return true, s.item == itemFinished
	}
	l, got := read[a]
	switch {
	case !got: // not read (throttled)
		return false, false
	case l == nil:
		return true, true
	case d.parentBusyLocked(*l, now):
		return false, false
	}
	return true, !started(*l)
}

// parentBusyLocked: the parent's lease, as just read, is unfinished and held by another live
// worker.
func (d *Dynamo) parentBusyLocked(l Lease, now time.Time) bool {
	return !l.Finished() && l.Owner != "" && l.Owner != d.id && !d.freeLocked(l, now)
}

// ownerGoneLocked: the lease names another worker, with an epoch, that the roster as this
// worker last read it does not show.
func (d *Dynamo) ownerGoneLocked(l Lease, now time.Time) bool {
	return !l.Finished() && l.Owner != "" && l.Owner != d.id && !l.HandedOver && l.OwnerEpoch != 0 && d.freeLocked(l, now)
}

// settledLocked: the placement applies to the shard (see placementInput.settled).
func (d *Dynamo) settledLocked(id string, now time.Time) bool {
	s := d.peekLocked(id)
	return shardSettled(&s, d.agreedLocked(), d.cfg.settle, now)
}

// mineLocked: the lease names this worker, and no incarnation of it that may still be
// invoking (see placementInput.mine).
func (d *Dynamo) mineLocked(l Lease, now time.Time) bool {
	return d.placementInputLocked(now).mine(l)
}

// freeLocked: nobody alive holds the lease as far as this worker knows (see
// placementInput.free).
func (d *Dynamo) freeLocked(l Lease, now time.Time) bool {
	return d.placementInputLocked(now).free(l)
}

// takeableLocked: the lease is free or this worker's (freeLocked, mineLocked), or will be within
// a claim interval: its owner is dead (or a previous run of this worker) and its tombstone's
// wait ends by then. Such a lease is taken at once and its shard read, but no invocation of it
// is admitted before that wait ends (inheritLocked, StartInvocation): the reader starts at the
// last claim cycle before, and the first invocation comes when the dead owner's last may have
// ended, not up to a claim interval later.
func (d *Dynamo) takeableLocked(l Lease, now time.Time) bool {
	in := d.placementInputLocked(now)
	in.early = d.ClaimInterval()
	return in.free(l) || in.mine(l)
}
