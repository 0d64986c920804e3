package fakekinesis

import "fmt"

// OpenShards returns the ids of the stream's open shards in hash key order. It panics on an
// unknown stream.
func (f *Fake) OpenShards(streamName string) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.mustStream(streamName)
	out := make([]string, len(s.open))
	for i, sh := range s.open {
		out[i] = sh.id
	}
	return out
}

// ClosedShards returns the ids of the stream's closed shards that retention has not trimmed, in
// shard id order. It panics on an unknown stream.
func (f *Fake) ClosedShards(streamName string) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []string
	for _, sh := range f.mustStream(streamName).shards {
		if sh != nil && sh.endSeq != nil {
			out = append(out, sh.id)
		}
	}
	return out
}

// UpdateShardCount reshards the stream to target open shards as Kinesis's UNIFORM_SCALING does:
// by splitting the widest open shards (scaling up) or merging adjacent pairs, narrowest first
// (scaling down). Kinesis allows at most doubling or halving in one call; so does the fake. It
// returns the shards created. It panics on an unknown stream or a target out of that range.
func (f *Fake) UpdateShardCount(streamName string, target int) (created []string) {
	f.mu.RLock()
	n := len(f.mustStream(streamName).open)
	f.mu.RUnlock()
	if target < 1 || target > 2*n || 2*target < n {
		panic(fmt.Sprintf("fakekinesis: UpdateShardCount(%q, %d) with %d open shards: at most double or half", streamName, target, n))
	}
	for ; n < target; n++ {
		kids := f.Split(streamName, f.widest(streamName))
		created = append(created, kids[:]...)
	}
	for ; n > target; n-- {
		a, b := f.narrowestPair(streamName)
		created = append(created, f.Merge(streamName, a, b))
	}
	return created
}

// widest is the open shard with the widest hash key range (the first such in key order).
func (f *Fake) widest(streamName string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.mustStream(streamName)
	best := s.open[0]
	for _, sh := range s.open[1:] {
		if best.hi.sub(best.lo).less(sh.hi.sub(sh.lo)) {
			best = sh
		}
	}
	return best.id
}

// narrowestPair is the pair of adjacent open shards whose joint range is narrowest.
func (f *Fake) narrowestPair(streamName string) (a, b string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.mustStream(streamName)
	best := -1
	var width u128
	for i := 0; i+1 < len(s.open); i++ {
		w := s.open[i+1].hi.sub(s.open[i].lo)
		if best < 0 || w.less(width) {
			best, width = i, w
		}
	}
	return s.open[best].id, s.open[best+1].id
}

// sub is a - b for a >= b.
func (a u128) sub(b u128) u128 {
	lo := a.lo - b.lo
	hi := a.hi - b.hi
	if a.lo < b.lo {
		hi--
	}
	return u128{hi, lo}
}
