package lease

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// TestPlacement: place's decisions from its inputs alone, case by case (no DynamoDB, no clock).
func TestPlacement(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const settle = time.Minute
	// listed is a registered shard of the first listing (placed at once).
	listed := func(id string, parents ...string) *shard {
		return &shard{info: poller.ShardInfo{ShardID: id, Parents: parents}, registered: true, initial: true, firstSeen: now.Add(-time.Hour)}
	}
	with := func(s *shard, f func(*shard)) *shard { f(s); return s }
	held := func(s *shard) { s.held = &heldLease{counter: 1} }
	finished := func(id string) func(*shard) {
		return func(s *shard) { s.last, s.item = finishedMarker(id), itemRead }
	}
	r := newRoster()
	r.members = map[string]member{"a": {epoch: 1}, "b": {epoch: 2}, "c": {epoch: 3, leaving: true}}
	for _, c := range []struct {
		name     string
		shards   map[string]*shard
		owner    map[string]string
		disagree bool // some member knows another number of shards
		handTo   map[string]string
		wanted   []string
		lineage  []string
	}{{
		name:   "a held lease placed on another member is handed over",
		shards: map[string]*shard{"s1": with(listed("s1"), held)},
		owner:  map[string]string{"s1": "b"},
		handTo: map[string]string{"s1": "b"},
	}, {
		name:     "members that disagree on the shards keep their leases",
		shards:   map[string]*shard{"s1": with(listed("s1"), held)},
		owner:    map[string]string{"s1": "b"},
		disagree: true,
		handTo:   map[string]string{"s1": ""},
	}, {
		name:   "no hand-over to a member that is leaving",
		shards: map[string]*shard{"s1": with(listed("s1"), held)},
		owner:  map[string]string{"s1": "c"},
		handTo: map[string]string{"s1": ""},
	}, {
		name:   "a finished shard's lease is not handed over",
		shards: map[string]*shard{"s1": with(listed("s1"), func(s *shard) { held(s); s.held.finished = true })},
		owner:  map[string]string{"s1": "b"},
		handTo: map[string]string{"s1": ""},
	}, {
		name:   "a held lease placed here is kept and not read",
		shards: map[string]*shard{"s1": with(listed("s1"), held)},
		owner:  map[string]string{"s1": "a"},
		handTo: map[string]string{"s1": ""},
	}, {
		name:   "a lease placed here and not held is read",
		shards: map[string]*shard{"s1": listed("s1"), "s2": listed("s2")},
		owner:  map[string]string{"s1": "a", "s2": "b"},
		wanted: []string{"s1"},
	}, {
		name:   "a lease whose back-off has not run out is not read",
		shards: map[string]*shard{"s1": with(listed("s1"), func(s *shard) { s.poll = pollState{next: now.Add(time.Second), tries: 1} })},
		owner:  map[string]string{"s1": "a"},
	}, {
		name:   "a lease whose back-off ran out is read",
		shards: map[string]*shard{"s1": with(listed("s1"), func(s *shard) { s.poll = pollState{next: now, tries: 12} })},
		owner:  map[string]string{"s1": "a"},
		wanted: []string{"s1"},
	}, {
		name:   "a lease read absent is not read again (Claim creates it)",
		shards: map[string]*shard{"s1": with(listed("s1"), func(s *shard) { s.missing = true })},
		owner:  map[string]string{"s1": "a"},
	}, {
		name:   "a finished shard's lease is not read",
		shards: map[string]*shard{"s1": with(listed("s1"), finished("s1"))},
		owner:  map[string]string{"s1": "a"},
	}, {
		name:   "a shard not registered is not placed",
		shards: map[string]*shard{"s1": {}},
		owner:  map[string]string{"s1": "a"},
	}, {
		name: "an unsettled shard is read when the last Claim asked for it, wherever it is placed",
		shards: map[string]*shard{
			"k1": {info: poller.ShardInfo{ShardID: "k1"}, registered: true, firstSeen: now, asked: true},
			"k2": {info: poller.ShardInfo{ShardID: "k2"}, registered: true, firstSeen: now},
		},
		owner:    map[string]string{"k1": "b", "k2": "a"},
		disagree: true,
		wanted:   []string{"k1"},
	}, {
		name: "a shard is settled after the settle time though members disagree",
		shards: map[string]*shard{
			"k1": {info: poller.ShardInfo{ShardID: "k1"}, registered: true, firstSeen: now.Add(-settle), asked: true},
			"k2": {info: poller.ShardInfo{ShardID: "k2"}, registered: true, firstSeen: now.Add(-settle)},
		},
		owner:    map[string]string{"k1": "b", "k2": "a"},
		disagree: true,
		wanted:   []string{"k2"},
	}, {
		name: "watched leases come after those placed here now",
		shards: map[string]*shard{
			"s9": listed("s9"),
			"s1": with(listed("s1"), func(s *shard) { s.pending = true }),
			"s2": with(listed("s2"), func(s *shard) { s.pending = true; held(s) }),
			"s3": with(listed("s3"), func(s *shard) { s.pending = true; s.poll = pollState{next: now.Add(time.Second)} }),
		},
		owner:  map[string]string{"s9": "a", "s1": "b", "s2": "b", "s3": "b"},
		handTo: map[string]string{"s2": "b"},
		wanted: []string{"s9", "s1"},
	}, {
		name: "the unfinished parents of a shard placed here are read",
		shards: map[string]*shard{
			"p1": listed("p1"), "p2": with(listed("p2"), finished("p2")), "p3": with(listed("p3"), held),
			"k": {info: poller.ShardInfo{ShardID: "k", Parents: []string{"p1", "p2", "p3"}}, registered: true, firstSeen: now},
		},
		owner:   map[string]string{"p1": "b", "p2": "b", "p3": "a", "k": "a"},
		handTo:  map[string]string{"p3": ""},
		wanted:  []string{"k"},
		lineage: []string{"p1"},
	}, {
		name: "the parents of a shard placed elsewhere are not read",
		shards: map[string]*shard{
			"p1": listed("p1"),
			"k":  {info: poller.ShardInfo{ShardID: "k", Parents: []string{"p1"}}, registered: true, firstSeen: now},
		},
		owner: map[string]string{"p1": "b", "k": "b"},
	}, {
		name: "a trimmed parent is read until the child is held",
		shards: map[string]*shard{
			"k1": {info: poller.ShardInfo{ShardID: "k1", Parents: []string{"gone1"}}, registered: true, firstSeen: now},
			"k2": with(&shard{info: poller.ShardInfo{ShardID: "k2", Parents: []string{"gone2"}}, registered: true, firstSeen: now}, held),
		},
		owner:   map[string]string{"k1": "a", "k2": "a"},
		handTo:  map[string]string{"k2": ""},
		wanted:  []string{"k1"},
		lineage: []string{"gone1"},
	}, {
		name: "the other parent of a child of a shard this worker finished is read, wherever the child is placed",
		shards: map[string]*shard{
			"p1": with(listed("p1"), func(s *shard) { finished("p1")(s); s.finishedHere = true }),
			"p2": listed("p2"),
			"p3": listed("p3"),
			"k":  {info: poller.ShardInfo{ShardID: "k", Parents: []string{"p1", "p2"}}, registered: true, firstSeen: now},
			"k2": {info: poller.ShardInfo{ShardID: "k2", Parents: []string{"p3"}}, registered: true, firstSeen: now},
		},
		owner:   map[string]string{"p1": "b", "p2": "b", "p3": "b", "k": "b", "k2": "b"},
		lineage: []string{"p2"},
	}, {
		name: "the parents of a child of a lease this worker owns are read",
		shards: map[string]*shard{
			"p1": with(listed("p1"), func(s *shard) { s.last, s.item = Lease{ShardID: "p1", Owner: "a"}, itemRead }),
			"k":  {info: poller.ShardInfo{ShardID: "k", Parents: []string{"p1"}}, registered: true, firstSeen: now},
		},
		owner:   map[string]string{"p1": "b", "k": "b"},
		lineage: []string{"p1"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			got := place(placementInput{self: "a", now: now, owner: c.owner, roster: &r, agreed: !c.disagree, settle: settle, shards: c.shards})
			if c.handTo == nil {
				c.handTo = map[string]string{}
			}
			if !maps.Equal(got.handTo, c.handTo) {
				t.Errorf("hand-overs %v, want %v", got.handTo, c.handTo)
			}
			if !slices.Equal(got.wanted, c.wanted) {
				t.Errorf("wanted %v, want %v", got.wanted, c.wanted)
			}
			if !slices.Equal(got.lineage, c.lineage) {
				t.Errorf("lineage %v, want %v", got.lineage, c.lineage)
			}
		})
	}
}
