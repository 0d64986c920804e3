package lease

import (
	"slices"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// TestPlacementClaims: which candidates a Claim creates and grabs, from its inputs alone.
func TestPlacementClaims(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newRoster()
	r.members = map[string]member{"a": {epoch: 1}, "b": {epoch: 2}}
	listed := func(id string, f ...func(*shard)) *shard {
		s := &shard{info: poller.ShardInfo{ShardID: id}, registered: true, initial: true, firstSeen: now.Add(-time.Hour)}
		for _, f := range f {
			f(s)
		}
		return s
	}
	child := func(id string, parents []string, f ...func(*shard)) *shard {
		s := &shard{info: poller.ShardInfo{ShardID: id, Parents: parents}, registered: true, firstSeen: now}
		for _, f := range f {
			f(s)
		}
		return s
	}
	missing := func(s *shard) { s.missing = true }
	item := func(owner string, epoch int64) func(*shard) {
		return func(s *shard) {
			s.last, s.item, s.seen = Lease{ShardID: s.info.ShardID, Owner: owner, OwnerEpoch: epoch}, itemRead, true
		}
	}
	type in struct{ notReady, notScanned, busyFleet, disagree bool }
	for _, c := range []struct {
		name         string
		in           in
		shards       map[string]*shard
		owner        map[string]string
		create, grab []string
	}{{
		name:   "a lease placed here and read absent is created",
		shards: map[string]*shard{"s1": listed("s1", missing), "s2": listed("s2", missing)},
		owner:  map[string]string{"s1": "a", "s2": "b"},
		create: []string{"s1"},
	}, {
		name:   "nothing before the worker is ready",
		in:     in{notReady: true},
		shards: map[string]*shard{"s1": listed("s1", missing)},
		owner:  map[string]string{"s1": "a"},
	}, {
		name:   "a lease not read yet is not created",
		shards: map[string]*shard{"s1": listed("s1")},
		owner:  map[string]string{"s1": "a"},
	}, {
		name:   "no create before the whole table was read under this epoch",
		in:     in{notScanned: true},
		shards: map[string]*shard{"s1": listed("s1", missing)},
		owner:  map[string]string{"s1": "a"},
	}, {
		name:   "a new mapping's lease waits for the fleet to stop changing",
		in:     in{busyFleet: true},
		shards: map[string]*shard{"s1": listed("s1", missing)},
		owner:  map[string]string{"s1": "a"},
	}, {
		name: "a child is created while the fleet changes",
		in:   in{busyFleet: true},
		shards: map[string]*shard{
			"p": listed("p", func(s *shard) { s.last, s.item = finishedMarker("p"), itemRead }),
			"k": child("k", []string{"p"}, missing),
		},
		owner:  map[string]string{"p": "b", "k": "a"},
		create: []string{"k"},
	}, {
		name:   "a held or finished lease is not claimed",
		shards: map[string]*shard{"s1": listed("s1", missing, func(s *shard) { s.held = &heldLease{} }), "s2": listed("s2", func(s *shard) { s.last, s.item = finishedMarker("s2"), itemRead })},
		owner:  map[string]string{"s1": "a", "s2": "a"},
	}, {
		name: "a child of a shard this worker finished is created wherever it is placed, unless it has an item",
		shards: map[string]*shard{
			"p":  listed("p", func(s *shard) { s.last, s.item, s.finishedHere = finishedMarker("p"), itemRead, true }),
			"k1": child("k1", []string{"p"}),
			"k2": child("k2", []string{"p"}, item("b", 2)),
			"k3": child("k3", []string{"p"}, item("b", 2), missing),
		},
		owner:  map[string]string{"p": "b", "k1": "b", "k2": "b", "k3": "b"},
		create: []string{"k1", "k3"},
	}, {
		name:   "an unsettled shard is grabbed when absent, free or this worker's, not when another live worker holds it",
		in:     in{disagree: true},
		shards: map[string]*shard{"k1": child("k1", nil), "k2": child("k2", nil, item("b", 2)), "k3": child("k3", nil, item("c", 9)), "k4": child("k4", nil, item("a", 1)), "k5": child("k5", nil, item("", 0))},
		owner:  map[string]string{"k1": "b", "k2": "b", "k3": "b", "k4": "b", "k5": "b"},
		grab:   []string{"k1", "k3", "k4", "k5"},
		create: nil,
	}, {
		name:   "an unsettled shard not read yet is not grabbed before the table was read",
		in:     in{disagree: true, notScanned: true},
		shards: map[string]*shard{"k1": child("k1", nil), "k2": child("k2", nil, item("", 0))},
		owner:  map[string]string{"k1": "a", "k2": "a"},
		grab:   []string{"k2"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			var cand []string
			for id := range c.shards {
				cand = append(cand, id)
			}
			slices.Sort(cand)
			pi := placementInput{self: "a", epoch: 1, now: now, owner: c.owner, roster: &r, agreed: !c.in.disagree,
				settle: time.Minute, leaseDuration: 10 * time.Second, shards: c.shards,
				ready: !c.in.notReady, scanned: !c.in.notScanned, fleetQuiet: !c.in.busyFleet}
			create, grab := claims(pi, cand)
			if !slices.Equal(create, c.create) || !slices.Equal(grab, c.grab) {
				t.Errorf("create %v, grab %v; want %v, %v", create, grab, c.create, c.grab)
			}
		})
	}
}

// TestPlacementFree: when a lease is free, or this worker's, as this worker's view has it.
func TestPlacementFree(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const L = 10 * time.Second
	r := newRoster()
	r.members = map[string]member{"a": {epoch: 5}, "b": {epoch: 2}}
	r.gone = map[string]gone{goneKey("c", 3): {wait: time.Minute, seen: now.Add(-time.Second)}, goneKey("a", 4): {wait: time.Minute, seen: now.Add(-time.Second)},
		goneKey("d", 1): {wait: time.Minute, seen: now.Add(-time.Minute)}}
	shards := map[string]*shard{
		"still": {legacy: &observation{counter: 7, since: now.Add(-L)}},
		"young": {legacy: &observation{counter: 7, since: now.Add(-L + time.Millisecond)}},
	}
	in := placementInput{self: "a", epoch: 5, now: now, roster: &r, leaseDuration: L, shards: shards}
	for _, c := range []struct {
		name       string
		l          Lease
		free, mine bool
	}{
		{"unowned", Lease{}, true, false},
		{"handed over to another", Lease{Owner: "b", OwnerEpoch: 2, HandedOver: true}, true, false},
		{"handed over to this worker", Lease{Owner: "a", OwnerEpoch: 5, HandedOver: true}, true, true},
		{"held by a live member", Lease{Owner: "b", OwnerEpoch: 2}, false, false},
		{"held by an earlier epoch of a member", Lease{Owner: "b", OwnerEpoch: 1}, true, false},
		{"held by a worker not in the roster", Lease{Owner: "x", OwnerEpoch: 1}, true, false},
		{"held by a dead worker whose tombstone's wait runs", Lease{Owner: "c", OwnerEpoch: 3}, false, false},
		{"held by a dead worker whose tombstone's wait has passed", Lease{Owner: "d", OwnerEpoch: 1}, true, false},
		{"this worker's, this epoch", Lease{Owner: "a", OwnerEpoch: 5}, false, true},
		{"this worker's previous run, still invoking", Lease{Owner: "a", OwnerEpoch: 4}, false, false},
		{"this worker's previous run, without a tombstone", Lease{Owner: "a", OwnerEpoch: 3}, true, true},
		{"the previous protocol's, its counter still for a lease duration", Lease{ShardID: "still", Owner: "b", Counter: 7}, true, false},
		{"the previous protocol's, its counter still for less", Lease{ShardID: "young", Owner: "b", Counter: 7}, false, false},
		{"the previous protocol's, its counter moved", Lease{ShardID: "still", Owner: "b", Counter: 8}, false, false},
		{"the previous protocol's, never seen", Lease{ShardID: "other", Owner: "b", Counter: 7}, false, false},
	} {
		if got := in.free(c.l); got != c.free {
			t.Errorf("%s: free %v, want %v", c.name, got, c.free)
		}
		if got := in.mine(c.l); got != c.mine {
			t.Errorf("%s: mine %v, want %v", c.name, got, c.mine)
		}
	}
}
