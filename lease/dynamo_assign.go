package lease

import (
	"hash/fnv"
	"slices"
)

// assignment is the rendezvous placement every worker computes alike from the same roster and
// shard list: each shard goes to the member with the highest hash score for it among those
// below their capacity, shards taken in the order of their own hash. Capacities are exact:
// floor(shards / members), and floor + 1 for as many members as the division leaves over, so
// every member gets its fair share to within one. A join or a leave moves about
// shards/members of them.
type assignment struct {
	owner map[string]string // shard → member
	load  map[string]int    // member → shards given
	cap   int
}

// mix64 is a 64-bit finaliser (splitmix64's): a cheap, well-spread score from two hashes.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func hash64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return mix64(h.Sum64())
}

// assign places shards on members (both in any order; the result does not depend on it).
func assign(shards, members []string) assignment {
	a := assignment{owner: make(map[string]string, len(shards)), load: make(map[string]int, len(members))}
	if len(members) == 0 {
		return a
	}
	a.cap = len(shards) / len(members)
	extra := len(shards) % len(members) // how many members may hold cap+1
	full := func(m string) bool {
		l := a.load[m]
		return l > a.cap || l == a.cap && extra == 0
	}
	type scored struct {
		id string
		h  uint64
	}
	ms := make([]scored, len(members))
	for i, m := range members {
		ms[i] = scored{m, hash64("member/" + m)}
	}
	ss := make([]scored, len(shards))
	for i, s := range shards {
		ss[i] = scored{s, hash64("shard/" + s)}
	}
	slices.SortFunc(ss, func(x, y scored) int {
		if x.h != y.h {
			if x.h < y.h {
				return -1
			}
			return 1
		}
		return compareStrings(x.id, y.id)
	})
	for _, s := range ss {
		best, bestScore := "", uint64(0)
		for _, m := range ms {
			if full(m.id) {
				continue
			}
			if sc := mix64(s.h ^ m.h); best == "" || sc > bestScore || sc == bestScore && m.id < best {
				best, bestScore = m.id, sc
			}
		}
		a.owner[s.id] = best
		a.load[best]++
		if a.load[best] == a.cap+1 {
			extra--
		}
	}
	return a
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// rank orders candidates by their score for key, best first (duties such as declaring a dead
// worker go to the first).
func rank(key string, members []string) []string {
	h := hash64("duty/" + key)
	out := slices.Clone(members)
	slices.SortFunc(out, func(x, y string) int {
		sx, sy := mix64(h^hash64("member/"+x)), mix64(h^hash64("member/"+y))
		switch {
		case sx > sy:
			return -1
		case sx < sy:
			return 1
		}
		return compareStrings(x, y)
	})
	return out
}
