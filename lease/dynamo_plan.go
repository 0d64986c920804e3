package lease

import (
	"math/rand/v2"
	"slices"
	"time"
)

// leaseView is what one Claim knows of a lease: the last scan, judged by this worker.
type leaseView struct {
	shardID string
	owner   string // "" unowned
	counter int64
	// pending is the worker a hand-over was requested for: of an owned lease, the owner is to
	// give it up; of an unowned lease, it is reserved for that worker (the owner gave it up).
	pending string
	// expired: owned by another worker, or reserved for another, with a counter this worker
	// has seen unchanged for a whole lease duration.
	expired bool
	held    bool          // this worker holds it (in memory)
	idle    time.Duration // how long this worker has seen the counter unchanged
}

// claimPlan is what a Claim does: take (or adopt) leases, then ask for hand-overs.
type claimPlan struct {
	workers int
	target  int
	// mine is how many of the shards count as this worker's before the plan: leases held and
	// not being handed over, plus hand-overs requested for it.
	mine    int
	take    []leaseView // in order: leases this worker owns or was handed first, then free ones
	request []leaseView // hand-overs to request, at most maxMoves
}

// planClaim decides a Claim from the shards that may be read now (each lease given once, with
// only unfinished candidates in leases) and from the workers alive: the owners of unexpired
// leases.
//
// Balance: workers are this one plus the live ones; the target is ceil(shards / workers). Leases
// this worker owns but does not hold (its previous incarnation's) and leases handed over to it
// are taken at once; unowned and expired leases are taken, in random order, up to the target.
// Below the target with nothing free, it asks the most loaded workers for at most maxMoves
// hand-overs, and only from a worker holding at least two more shards than it would, so that no
// move is ever undone by the next one and the loads settle within one of each other.
func planClaim(me string, leases []leaseView, alive []string, maxMoves int, allowRequests bool, rnd *rand.Rand) claimPlan {
	workers := map[string]bool{me: true}
	for _, w := range alive {
		workers[w] = true
	}
	p := claimPlan{workers: len(workers)}
	p.target = (len(leases) + p.workers - 1) / p.workers

	load := map[string]int{}
	victims := map[string][]leaseView{}
	var free []leaseView
	for _, l := range leases {
		switch {
		case l.held: // whatever a scan older than the take says
			if l.pending == "" || l.pending == me {
				p.mine++
			} else {
				load[l.pending]++
			}
		case l.owner == me, l.owner == "" && l.pending == me:
			p.take = append(p.take, l) // adopt, or accept a hand-over
			p.mine++
		case l.owner == "" && l.pending != "" && !l.expired:
			load[l.pending]++ // reserved for another worker
		case l.owner == "" || l.expired:
			free = append(free, l)
		case l.pending == me:
			p.mine++
		case l.pending != "":
			load[l.pending]++
		default:
			load[l.owner]++
			victims[l.owner] = append(victims[l.owner], l)
		}
	}
	rnd.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	n := min(len(free), max(0, p.target-p.mine))
	p.take = append(p.take, free[:n]...)
	projected := p.mine + n
	if !allowRequests || n < len(free) {
		return p
	}
	for len(p.request) < maxMoves && projected < p.target {
		var best []string // the most loaded workers with a lease to give
		most := 0
		for w, vs := range victims {
			switch {
			case len(vs) == 0:
			case load[w] > most:
				best, most = []string{w}, load[w]
			case load[w] == most:
				best = append(best, w)
			}
		}
		if len(best) == 0 || most < projected+2 {
			break
		}
		slices.Sort(best) // map order is random already, but not reproducibly
		w := best[rnd.IntN(len(best))]
		vs := victims[w]
		i := rnd.IntN(len(vs))
		p.request = append(p.request, vs[i])
		victims[w] = slices.Delete(vs, i, i+1)
		load[w]--
		projected++
	}
	return p
}
