package lease

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// owned is n leases of owner, named <prefix>0…, with the given flags.
func owned(prefix, owner string, n int, f func(*leaseView)) []leaseView {
	out := make([]leaseView, n)
	for i := range out {
		out[i] = leaseView{shardID: fmt.Sprintf("%s%d", prefix, i), owner: owner, counter: 5}
		if f != nil {
			f(&out[i])
		}
	}
	return out
}

func expired(v *leaseView)     { v.expired = true }
func heldHere(v *leaseView)    { v.held = true }
func pendingForA(v *leaseView) { v.pending = "a" }
func pendingForB(v *leaseView) { v.pending = "b"; v.held = true }
func shardsOf(vs []leaseView) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, v.shardID)
	}
	slices.Sort(out)
	return out
}

func TestPlanClaim(t *testing.T) {
	for _, c := range []struct {
		name     string
		leases   []leaseView
		alive    []string
		maxMoves int
		noAsk    bool // within the pause between rounds of requests
		// want
		target      int
		mine        int
		takes       int
		takeFrom    []string // every take among these
		requests    int
		requestFrom []string // owners asked
	}{
		{name: "alone takes every unowned lease", leases: owned("u", "", 4, nil),
			target: 4, takes: 4, takeFrom: []string{"u0", "u1", "u2", "u3"}},
		{name: "unowned up to the share", leases: owned("u", "", 4, nil), alive: []string{"b"}, maxMoves: 2,
			target: 2, takes: 2, takeFrom: []string{"u0", "u1", "u2", "u3"}},
		{name: "expired leases are free", leases: owned("x", "b", 2, expired),
			target: 2, takes: 2, takeFrom: []string{"x0", "x1"}},
		{name: "own leases are adopted even above the share", leases: append(owned("o", "a", 3, nil), owned("b", "b", 1, nil)...), alive: []string{"b"},
			target: 2, mine: 3, takes: 3, takeFrom: []string{"o0", "o1", "o2"}},
		{name: "held leases are not taken again", leases: append(owned("h", "a", 2, heldHere), owned("u", "", 2, nil)...), alive: []string{"b"},
			target: 2, mine: 2},
		{name: "a scan older than the take does not count", leases: owned("h", "", 2, heldHere),
			target: 2, mine: 2},
		{name: "hand-overs from the most loaded", leases: append(owned("b", "b", 4, nil), owned("c", "c", 2, nil)...), alive: []string{"b", "c"}, maxMoves: 2,
			target: 2, requests: 2, requestFrom: []string{"b"}},
		{name: "two moves from two workers", leases: append(owned("b", "b", 4, nil), owned("c", "c", 4, nil)...), alive: []string{"b", "c"}, maxMoves: 2,
			target: 3, requests: 2, requestFrom: []string{"b", "c"}},
		{name: "moves capped per cycle", leases: owned("b", "b", 6, nil), alive: []string{"b"}, maxMoves: 1,
			target: 3, requests: 1, requestFrom: []string{"b"}},
		{name: "no moves configured", leases: owned("b", "b", 6, nil), alive: []string{"b"},
			target: 3},
		{name: "no request during the pause", leases: owned("b", "b", 6, nil), alive: []string{"b"}, maxMoves: 2, noAsk: true,
			target: 3},
		{name: "no move that the next one would undo", leases: append(owned("h", "a", 1, heldHere), owned("b", "b", 2, nil)...), alive: []string{"b"}, maxMoves: 2,
			target: 2, mine: 1},
		{name: "at the share a worker two above still gives", leases: append(append(owned("b", "b", 4, nil), owned("c", "c", 4, nil)...),
			append(owned("d", "d", 4, nil), owned("e", "e", 4, nil)...)...), alive: []string{"b", "c", "d", "e"}, maxMoves: 2,
			target: 4, requests: 2, requestFrom: []string{"b", "c", "d", "e"}},
		{name: "requests for this worker count as its own", leases: append(owned("p", "b", 2, pendingForA), owned("b", "b", 2, nil)...), alive: []string{"b"}, maxMoves: 2,
			target: 2, mine: 2},
		{name: "leases being handed over are not this worker's", leases: append(owned("g", "a", 2, pendingForB), owned("h", "a", 2, heldHere)...), alive: []string{"b"}, maxMoves: 2,
			target: 2, mine: 2},
		{name: "a lease another worker asked for is not asked again", leases: append(owned("q", "b", 3, func(v *leaseView) { v.pending = "c" }), owned("b", "b", 1, nil)...),
			alive: []string{"b", "c"}, maxMoves: 2, target: 2},
		{name: "a lease handed over to this worker is taken", leases: append(owned("r", "", 1, pendingForA), owned("b", "b", 3, nil)...), alive: []string{"b"}, maxMoves: 2,
			target: 2, mine: 1, takes: 1, takeFrom: []string{"r0"}, requests: 1, requestFrom: []string{"b"}},
		{name: "a lease reserved for another worker is not free", leases: append(owned("r", "", 2, func(v *leaseView) { v.pending = "c" }), owned("b", "b", 2, nil)...),
			alive: []string{"b"}, target: 2},
		{name: "an expired reservation is free", leases: owned("r", "", 2, func(v *leaseView) { v.pending = "c"; v.expired = true }), alive: []string{"b"},
			target: 1, takes: 1, takeFrom: []string{"r0", "r1"}},
		{name: "free leases first, requests only when none are left", leases: append(owned("u", "", 1, nil), owned("b", "b", 5, nil)...), alive: []string{"b"}, maxMoves: 2,
			target: 3, takes: 1, takeFrom: []string{"u0"}, requests: 2, requestFrom: []string{"b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := planClaim("a", c.leases, c.alive, c.maxMoves, !c.noAsk, rand.New(rand.NewPCG(3, 4)))
			if p.target != c.target || p.mine != c.mine || len(p.take) != c.takes || len(p.request) != c.requests {
				t.Fatalf("target %d mine %d take %v request %v; want target %d mine %d, %d takes, %d requests",
					p.target, p.mine, shardsOf(p.take), shardsOf(p.request), c.target, c.mine, c.takes, c.requests)
			}
			for _, v := range p.take {
				if !slices.Contains(c.takeFrom, v.shardID) {
					t.Errorf("took %s, want one of %v", v.shardID, c.takeFrom)
				}
			}
			seen := map[string]bool{}
			for _, v := range p.request {
				if !slices.Contains(c.requestFrom, v.owner) || v.pending != "" || seen[v.shardID] {
					t.Errorf("asked for %+v, want a distinct lease without a request of one of %v", v, c.requestFrom)
				}
				seen[v.shardID] = true
			}
		})
	}
}

// TestPlanClaimSpreadsChoices: the order of takes is random, so workers starting together do not
// all race for the same lease.
func TestPlanClaimSpreadsChoices(t *testing.T) {
	leases := owned("u", "", 8, nil)
	first := map[string]bool{}
	for seed := range uint64(20) {
		p := planClaim("a", leases, []string{"b", "c", "d"}, 0, true, rand.New(rand.NewPCG(seed, 1)))
		first[p.take[0].shardID] = true
	}
	if len(first) < 4 {
		t.Fatalf("20 workers would start with only %d different leases", len(first))
	}
}
