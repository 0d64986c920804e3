package lease

import (
	"slices"
	"time"
)

// placementInput is what one claim cycle's placement decisions go by: this worker's view of
// the roster and of every shard, at one instant. place reads it and changes nothing.
type placementInput struct {
	self          string
	epoch         int64 // this worker's
	now           time.Time
	owner         map[string]string // the assignment of the current members: shard → member
	roster        *roster
	agreed        bool          // every member knows the shards this worker knows (agreedLocked)
	settle        time.Duration // the shard settle time (WithShardSettle)
	leaseDuration time.Duration
	shards        map[string]*shard
	// early: a lease whose owner's tombstone's wait ends within early of now counts as free
	// (or this worker's) already. Only for takes, which then admit no invocation of it before
	// that wait ends (see Dynamo.takeableLocked).
	early time.Duration

	// For claims only.
	ready   bool // joined for a heartbeat interval, and alive
	scanned bool // the whole table was read under this epoch, and no item it showed holds creates back (see scan)
	// fleetQuiet: no member came or went for a heartbeat interval and a claim interval, as this
	// worker saw the roster, or coldStartMax passed since it joined. The lease of a shard of a
	// new mapping (one without parents that has no item yet) is created only then: a fleet still
	// starting one worker after another would otherwise have the first ones create leases they
	// hand on at each join (see DESIGN.md, "Cold start"). A child is created at once.
	fleetQuiet bool
}

// placement is what a claim cycle does with the leases, given a placementInput.
type placement struct {
	// handTo gives, for each lease held, the member to hand it over to ("": keep it).
	handTo map[string]string
	// placed are the leases placed here now and not held, due to be read (sorted): they
	// become pending.
	placed []string
	// wanted are the leases to read and take when free: placed, then the pending ones placed
	// here under an earlier placement and not seen owned elsewhere since (watched), each
	// part sorted.
	wanted []string
	// lineage are the unfinished parents of the shards this worker is to read next (sorted).
	lineage []string
}

// place decides, for one claim cycle, which held leases to hand over and which leases to read
// (and take when free). A held lease is handed over once the placement puts it on another
// member that is not leaving, the shard is settled, every member agrees, and the shard is not
// finished. A lease is read when it is placed here (a settled shard) or was a candidate of
// the last Claim (an unsettled one), is not held, was not read absent, and its back-off has
// run out; parents are read while they are unfinished and not held, for the shards placed
// here, held, or children of a shard this worker holds, owns or finished.
func place(in placementInput) placement {
	out := placement{handTo: map[string]string{}}
	for id, s := range in.shards {
		if h := s.held; h != nil {
			to := in.owner[id]
			if to != "" && to != in.self && in.settled(s) && in.agreed && !in.roster.members[to].leaving && !h.finished {
				out.handTo[id] = to
			} else {
				out.handTo[id] = ""
			}
		}
	}
	for id, s := range in.shards {
		if !s.registered || s.known() && s.last.Finished() {
			continue
		}
		mine, settled := in.owner[id] == in.self, in.settled(s)
		// A lease read as absent is not wanted again: Claim creates it, and a create that finds
		// the item gets it back (a cold start waiting for the fleet would read every absent
		// lease at every cycle: at 10,000 shards a third of the partitions' read capacity). It
		// stays watched (pending, below), read with a backoff.
		if (mine && settled || !settled && s.asked) && s.held == nil && !s.missing && !in.now.Before(s.poll.next) {
			out.placed = append(out.placed, id)
		}
		// Parents of a shard this worker may read next: placed here, or a child of a shard it
		// holds, held or finished (see Claim: whoever finished a parent creates the child too).
		if !mine && s.held == nil && !in.related(s) {
			continue
		}
		for _, p := range nonEmpty(s.info.Parents) {
			// A parent the listing no longer shows (trimmed) is read too until the child is
			// held: another worker may still be reading its last batch (see Claim).
			if ps := in.shard(p); (!ps.known() || !ps.last.Finished()) && ps.held == nil && (ps.info.ShardID != "" || s.held == nil) {
				out.lineage = append(out.lineage, p)
			}
		}
	}
	// Leases placed here under an earlier placement stay watched until they are seen owned by
	// someone else: one handed over to this worker just before the placement moved it
	// elsewhere names this worker, which adopts it and hands it on. They come after the
	// leases placed here now, so that a cycle that cannot read them all reads those first.
	slices.Sort(out.placed)
	placed := make(map[string]bool, len(out.placed))
	for _, id := range out.placed {
		placed[id] = true
	}
	var watched []string
	for id, s := range in.shards {
		if s.pending && !placed[id] && s.held == nil && !in.now.Before(s.poll.next) {
			watched = append(watched, id)
		}
	}
	slices.Sort(watched)
	out.wanted = append(slices.Clone(out.placed), watched...)
	out.lineage = slices.Compact(slices.Sorted(slices.Values(out.lineage)))
	return out
}

// shard is what the input knows of a shard, the zero shard when nothing.
func (in placementInput) shard(id string) shard {
	if s := in.shards[id]; s != nil {
		return *s
	}
	return shard{}
}

// settled: the placement applies to the shard. A shard of the first listing without parents
// is placed at once (every worker lists it); any other once every member knows the shards
// this worker knows, or after the settle time (see DefaultShardSettle). Until then it goes to
// whoever can read it first.
func (in placementInput) settled(s *shard) bool {
	return shardSettled(s, in.agreed, in.settle, in.now)
}

func shardSettled(s *shard, agreed bool, settle time.Duration, now time.Time) bool {
	if s.initial && len(nonEmpty(s.info.Parents)) == 0 {
		return true
	}
	return agreed || now.Sub(s.firstSeen) >= settle
}

// related: a parent of the shard is held, owned or finished by this worker, which then reads
// the shard's parents and creates the shard once they are done, whatever the placement.
func (in placementInput) related(s *shard) bool {
	return slices.ContainsFunc(nonEmpty(s.info.Parents), func(p string) bool {
		ps := in.shard(p)
		return ps.last.Owner == in.self || ps.held != nil || ps.finishedHere
	})
}

// claims picks, among the candidates of a Claim, the leases to create (placed here and read
// absent, once the fleet is quiet for a shard without parents; or children of a shard this
// worker holds, owns or finished, which it creates as well as the member they are placed on)
// and those to grab (not settled yet, such as new children: absent, free or this worker's).
// Nothing is claimed before the worker is ready, nor created before the whole table was read
// under its epoch (scanned).
func claims(in placementInput, candidates []string) (create, grab []string) {
	for _, id := range candidates {
		s := in.shard(id)
		if !in.ready || s.held != nil || s.last.Finished() {
			continue
		}
		if !in.scanned && !s.known() {
			continue // to create, or to take as grab does when it turns out present
		}
		hasParents := len(nonEmpty(s.info.Parents)) > 0
		switch {
		case !in.settled(&s):
			if !s.known() || in.free(s.last) || in.mine(s.last) {
				grab = append(grab, id)
			}
		case in.owner[id] == in.self && s.missing && (hasParents || in.fleetQuiet):
			create = append(create, id)
		case in.related(&s) && !(s.known() && !s.missing):
			// A child of a shard this worker finished: created by it as well as by the
			// worker it is placed on, which may have died meanwhile (the first one wins;
			// the placement hands it over afterwards).
			create = append(create, id)
		}
	}
	return create, grab
}

// mine: the lease names this worker's id, and no incarnation of it that may still be invoking
// (a previous run's epoch whose tombstone's wait has not passed here).
func (in placementInput) mine(l Lease) bool {
	return l.Owner == in.self && (l.HandedOver || l.OwnerEpoch == in.epoch || !in.roster.buried(l.Owner, l.OwnerEpoch, in.now.Add(in.early)))
}

// free: nobody alive holds the lease as far as this worker knows.
func (in placementInput) free(l Lease) bool {
	switch {
	case l.Owner == "" || l.HandedOver: // nobody reads a lease not taken up yet
		return true
	case in.roster.buried(l.Owner, l.OwnerEpoch, in.now.Add(in.early)): // an invocation of its owner's may still be running
		return false
	case l.Owner == in.self:
		return l.OwnerEpoch != in.epoch
	case l.OwnerEpoch == 0: // the previous protocol's lease: free once its counter stood still
		o := in.shard(l.ShardID).legacy
		return o != nil && o.counter == l.Counter && in.now.Sub(o.since) >= in.leaseDuration
	}
	return !in.roster.holds(l.Owner, l.OwnerEpoch)
}
