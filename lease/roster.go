package lease

import (
	"maps"
	"slices"
	"time"
)

// member is one roster entry.
type member struct {
	epoch   int64
	beat    int64
	known   int64
	leaving bool
	// horizon is how long after this heartbeat's send its invocations may still run (zero: none
	// can); meaningful only for a worker that publishes horizons (see horizon.go).
	horizon time.Duration
	waits   []string
}

// gone is a tombstone seen in the roster: how long after this worker first saw it the leases of
// that worker's epoch stay unfree, and when it was first seen (the return of the read that
// showed it: the tombstone was written before).
type gone struct {
	wait time.Duration
	seen time.Time
}

// beatObs is what this worker has seen of another's heartbeat: the value and since when.
type beatObs struct {
	m     member
	since time.Time
	// got is the return of the read that first showed the value: the heartbeat was sent
	// before it.
	got time.Time
	// healthyAt is how many of this worker's own heartbeats had succeeded when the value was
	// first seen: a worker is judged dead only across heartbeats of this one that went through
	// (the roster is one item, so a throttled table fails everyone's at once).
	healthyAt int64
}

// roster is this worker's view of the roster item: the members as last read, the tombstones
// of dead or replaced workers, and since when each member's heartbeat has stood still. It
// knows nothing of DynamoDB nor of the clock: its callers pass the times in. Guarded by
// Dynamo.mu.
type roster struct {
	members map[string]member
	gone    map[string]gone    // tombstones, by goneKey
	beats   map[string]beatObs // each member's heartbeat, as this worker saw it
	// leases are the lease durations members published longer than this worker's, by goneKey
	// (learnt from their bound items when they first looked dead): their death is judged by it.
	leases map[string]time.Duration
	// unhealthy is when this worker's own last heartbeat that failed or was slow returned: the
	// table may have been stalled for everyone until then, so no heartbeat's standstill counts
	// from earlier (dead).
	unhealthy time.Time
	// fleetChanged is when a member last came or went, as this worker saw it.
	fleetChanged time.Time
	readAt       time.Time // when the roster was last read or returned
	// lastAt is when the read before the latest one was sent (observe's at): a value a read
	// shows first was written after that read was served.
	lastAt time.Time
	// reads is how often this worker reads the roster at least (zero: no promise).
	reads time.Duration
}

func newRoster() roster {
	return roster{members: map[string]member{}, gone: map[string]gone{}, beats: map[string]beatObs{}, leases: map[string]time.Duration{}}
}

// observe records a roster read returned at got: its members ms and tombstones tombs. A
// heartbeat value first seen counts from at; healthy is how many of this worker's own
// heartbeats have gone through. It reports whether a member came, went, or changed its
// leaving flag or the shards it knows (u).
func (r *roster) observe(ms map[string]member, tombs map[string]time.Duration, at, got time.Time, healthy int64) (changed bool) {
	for k, w := range tombs {
		if _, ok := r.gone[k]; !ok {
			r.gone[k] = gone{wait: w, seen: got}
		}
	}
	for k := range r.gone {
		// A stale read may lack a tombstone it had shown: it then shows the entry, which
		// holds the leases as well, and the tombstone counts again from its next sight.
		if _, ok := tombs[k]; !ok {
			delete(r.gone, k)
		}
	}
	// A value first seen now was written after the previous read was served: its stillness
	// counts from that read's send, or from a read interval before this one if that read is
	// older (DESIGN.md, "Epoch leases": the declaration then comes at most a read interval
	// earlier, and no later than L after the heartbeat's write).
	since := later(r.lastAt, at.Add(-r.reads))
	if since.After(at) {
		since = at
	}
	for id, m := range ms {
		if o, ok := r.beats[id]; !ok || o.m.epoch != m.epoch || o.m.beat != m.beat {
			r.beats[id] = beatObs{m: m, since: since, got: got, healthyAt: healthy}
		} else if m.leaving != o.m.leaving {
			o.m.leaving = m.leaving
			r.beats[id] = o
		}
	}
	for id := range r.beats {
		if _, ok := ms[id]; !ok {
			delete(r.beats, id)
		}
	}
	for k := range r.leases {
		if id, epoch, ok := goneWorker(k); !ok || ms[id].epoch != epoch {
			delete(r.leases, k)
		}
	}
	if !maps.EqualFunc(ms, r.members, func(a, b member) bool { return a.epoch == b.epoch }) {
		r.fleetChanged = got
	}
	changed = !maps.EqualFunc(ms, r.members, func(a, b member) bool {
		return a.epoch == b.epoch && a.leaving == b.leaving && a.known == b.known
	})
	r.members, r.readAt, r.lastAt = ms, got, later(r.lastAt, at)
	return changed
}

// ownWaits shortens, in tombs (a roster read returned at got), the wait of each tombstone new
// here that names the heartbeat its declaration was conditional on (beats), when this worker saw
// that heartbeat of that epoch: the dead worker's invocations end within its horizon of that
// heartbeat's send, which came before this worker's read that first showed it returned. A taker
// that is not the declarer then waits from its own sight of the heartbeat, not from its later
// sight of the tombstone.
func (r *roster) ownWaits(beats map[string]int64, tombs map[string]time.Duration, got time.Time) {
	for k, h := range beats {
		w, ok := tombs[k]
		if _, seen := r.gone[k]; seen || !ok {
			continue
		}
		id, epoch, ok := goneWorker(k)
		o, known := r.beats[id]
		if !ok || !known || o.m.epoch != epoch || o.m.beat != h {
			continue
		}
		tombs[k] = min(w, horizonWait(o.m.horizon, o.got, got))
	}
}

// dead are the members (but self) whose heartbeat this worker has seen stand still for a
// whole lease duration, the longer of d (this worker's) and the member's own when it published
// a longer one (learnLease), across at least two of this worker's own healthy heartbeats
// (healthy is how many there have been), and counted from no earlier than the return of its own
// last heartbeat that failed or was slow (unhealthy).
func (r *roster) dead(self string, now time.Time, d time.Duration, healthy int64) []string {
	var out []string
	for id, o := range r.beats {
		since := o.since
		if r.unhealthy.After(since) {
			since = r.unhealthy
		}
		if id == self || now.Sub(since) < max(d, r.leases[goneKey(id, o.m.epoch)]) || healthy-o.healthyAt < 2 {
			continue
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// heldUp restarts at now the stillness of every member's heartbeat: this worker's own call to
// the roster was held up, and theirs may have been too (a stall of the whole table).
func (r *roster) heldUp(now time.Time) {
	for id, o := range r.beats {
		if o.since.Before(now) {
			o.since = now
			r.beats[id] = o
		}
	}
}

// learnLease records the lease duration l that member id published for epoch.
func (r *roster) learnLease(id string, epoch int64, l time.Duration) {
	if m, ok := r.members[id]; ok && m.epoch == epoch {
		r.leases[goneKey(id, epoch)] = l
	}
}

// bury records at now what a declaration of death wrote: the member gone, and its epoch's
// tombstone with wait (until a roster read shows it, or shows the member alive after all).
func (r *roster) bury(id string, epoch int64, wait time.Duration, now time.Time) {
	delete(r.members, id)
	delete(r.beats, id)
	if k := goneKey(id, epoch); !r.hasTombstone(k) {
		r.gone[k] = gone{wait: wait, seen: now}
	}
	r.fleetChanged = now
}

// buriedUntil is when the epoch's tombstone's wait ends here (zero: no tombstone seen).
func (r *roster) buriedUntil(owner string, epoch int64) time.Time {
	g, ok := r.gone[goneKey(owner, epoch)]
	if !ok {
		return time.Time{}
	}
	return g.seen.Add(g.wait)
}

func (r *roster) hasTombstone(k string) bool {
	_, ok := r.gone[k]
	return ok
}

// buried: the epoch's tombstone has been seen for less than its wait; an invocation of that
// epoch may still be running.
func (r *roster) buried(owner string, epoch int64, now time.Time) bool {
	g, ok := r.gone[goneKey(owner, epoch)]
	return ok && now.Sub(g.seen) < g.wait
}

// tombstonesDue are the tombstones whose wait has passed at now for self to remove: at once
// for those self ranks first for among the members, a lease duration d later for the others
// (in case the first is dead too).
func (r *roster) tombstonesDue(self string, now time.Time, d time.Duration) []string {
	var out []string
	live := slices.Sorted(maps.Keys(r.members))
	for k, g := range r.gone {
		if over := now.Sub(g.seen) - g.wait; over >= 0 && (rank(k, live)[0] == self || over >= d) {
			out = append(out, k)
		}
	}
	return out
}

// holds: the roster shows the worker under that epoch.
func (r *roster) holds(id string, epoch int64) bool {
	m, ok := r.members[id]
	return ok && m.epoch == epoch
}

// agreed: every member but self publishes the shards known that self knows (n, a digest of their
// ids: knownLocked), as self did last (published), so all compute the same placement and know
// the same children.
func (r *roster) agreed(self string, n, published int64) bool {
	for id, m := range r.members {
		if id != self && m.known != n {
			return false
		}
	}
	return published == n
}

// placementMembers are the members the placement counts, sorted: those not leaving (self
// counts whatever its flag: its own flag never moves its leases), without the one named.
func (r *roster) placementMembers(self, without string) []string {
	var out []string
	for id, m := range r.members {
		if (!m.leaving || id == self) && id != without {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
