package lease

import (
	"slices"
	"testing"
	"time"
)

// TestRosterObserve: tombstones count from the return of the read that first showed them and
// again from their next sight after a read that lacked them; a heartbeat value counts from
// the time given for its first sight; only a member that comes or goes moves fleetChanged.
func TestRosterObserve(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	r := newRoster()
	tomb := goneKey("x", 7)
	if !r.observe(map[string]member{"a": {epoch: 1, beat: 1}, "b": {epoch: 2, beat: 1}}, map[string]time.Duration{tomb: 5 * time.Second}, sec(0), sec(1), 0) {
		t.Fatal("a first read reports no change")
	}
	if g := r.gone[tomb]; g.seen != sec(1) || g.wait != 5*time.Second {
		t.Fatalf("tombstone %+v, want seen at the read's return with its wait", g)
	}
	if r.fleetChanged != sec(1) || r.readAt != sec(1) {
		t.Fatalf("fleetChanged %s, readAt %s; want both at the read's return", r.fleetChanged, r.readAt)
	}
	// b beats, a does not; the tombstone is still there, a leaving flag and a count change.
	if !r.observe(map[string]member{"a": {epoch: 1, beat: 1, leaving: true}, "b": {epoch: 2, beat: 2, known: 3}}, map[string]time.Duration{tomb: 5 * time.Second}, sec(2), sec(3), 1) {
		t.Fatal("a leaving flag and a shard count that changed report no change")
	}
	if r.fleetChanged != sec(1) {
		t.Fatalf("fleetChanged moved to %s with the same members", r.fleetChanged)
	}
	if o := r.beats["a"]; o.since != sec(0) || o.healthyAt != 0 || !o.m.leaving {
		t.Fatalf("a's heartbeat %+v: want it since its first sight, leaving", o)
	}
	if o := r.beats["b"]; o.since != sec(2) || o.healthyAt != 1 {
		t.Fatalf("b's heartbeat %+v: want it since the read that showed the new value", o)
	}
	if g := r.gone[tomb]; g.seen != sec(1) {
		t.Fatalf("a tombstone seen again counts from %s, want its first sight", g.seen)
	}
	// A stale read lacks the tombstone and b: both go; the tombstone counts anew when seen again.
	if !r.observe(map[string]member{"a": {epoch: 1, beat: 1, leaving: true}}, nil, sec(4), sec(5), 2) {
		t.Fatal("a member gone reports no change")
	}
	if _, ok := r.gone[tomb]; ok {
		t.Fatal("a tombstone a read lacks is kept")
	}
	if _, ok := r.beats["b"]; ok || r.fleetChanged != sec(5) {
		t.Fatalf("b gone: heartbeat kept %v, fleetChanged %s", ok, r.fleetChanged)
	}
	r.observe(map[string]member{"a": {epoch: 1, beat: 1, leaving: true}}, map[string]time.Duration{tomb: 5 * time.Second}, sec(6), sec(7), 3)
	if g := r.gone[tomb]; g.seen != sec(7) {
		t.Fatalf("a tombstone seen again after a read that lacked it counts from %s, want %s", g.seen, sec(7))
	}
	if r.observe(map[string]member{"a": {epoch: 1, beat: 1, leaving: true}}, nil, sec(8), sec(9), 3) {
		t.Fatal("the same members report a change")
	}
}

// TestRosterDecisions: death, tombstones and agreement, from the roster and the times given.
func TestRosterDecisions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const L = 10 * time.Second
	r := newRoster()
	r.observe(map[string]member{"me": {epoch: 1}, "a": {epoch: 2, known: 4}, "b": {epoch: 3, known: 4, leaving: true}}, nil, t0, t0, 5)
	for _, c := range []struct {
		name    string
		now     time.Time
		healthy int64
		want    []string
	}{
		{"heartbeats still for less than a lease duration", t0.Add(L - time.Millisecond), 9, nil},
		{"still for a lease duration across two of my heartbeats", t0.Add(L), 7, []string{"a", "b"}},
		{"still for a lease duration across one of my heartbeats", t0.Add(L), 6, nil},
	} {
		if got := r.dead("me", c.now, L, c.healthy); !slices.Equal(got, c.want) {
			t.Errorf("%s: dead %v, want %v", c.name, got, c.want)
		}
	}
	if got := r.placementMembers("me", ""); !slices.Equal(got, []string{"a", "me"}) {
		t.Errorf("placement members %v, want those not leaving", got)
	}
	if got := r.placementMembers("me", "me"); !slices.Equal(got, []string{"a"}) {
		t.Errorf("placement members without me %v", got)
	}
	for _, c := range []struct {
		n, published int64
		want         bool
	}{{4, 4, true}, {4, 3, false}, {5, 5, false}} {
		if got := r.agreed("me", c.n, c.published); got != c.want {
			t.Errorf("agreed with %d shards known, %d published: %v, want %v", c.n, c.published, got, c.want)
		}
	}
	if !r.holds("a", 2) || r.holds("a", 1) || r.holds("x", 2) {
		t.Error("holds does not go by the member's epoch")
	}

	r.bury("a", 2, 5*time.Second, t0)
	if _, ok := r.members["a"]; ok || r.fleetChanged != t0 {
		t.Fatalf("a buried: still a member %v, fleetChanged %s", ok, r.fleetChanged)
	}
	r.bury("a", 2, time.Hour, t0.Add(time.Second)) // a second declaration keeps the first sight
	if !r.buried("a", 2, t0.Add(5*time.Second-time.Millisecond)) || r.buried("a", 2, t0.Add(5*time.Second)) || r.buried("a", 3, t0) {
		t.Fatal("buried does not hold for exactly the tombstone's wait from its first sight")
	}
	// Tombstones due: the member ranked first removes one at once, the others a lease duration
	// later.
	k := goneKey("a", 2)
	first := rank(k, []string{"b", "me"})[0]
	other := map[string]string{"b": "me", "me": "b"}[first]
	for _, c := range []struct {
		self string
		now  time.Time
		want bool
	}{
		{first, t0.Add(5*time.Second - time.Millisecond), false},
		{first, t0.Add(5 * time.Second), true},
		{other, t0.Add(5 * time.Second), false},
		{other, t0.Add(5*time.Second + L), true},
	} {
		if got := slices.Contains(r.tombstonesDue(c.self, c.now, L), k); got != c.want {
			t.Errorf("tombstone due for %s at +%s: %v, want %v", c.self, c.now.Sub(t0), got, c.want)
		}
	}
}

// TestSlowHeartbeatsAreNotHealthy: a heartbeat (or join) counts towards declaring others dead
// only when it returned within L/10 of its send: one that stalled with the whole table proves
// nothing about the others' (the defect: a 0.9 L stall of the fleet had a worker declared dead).
func TestSlowHeartbeatsAreNotHealthy(t *testing.T) {
	d, err := NewDynamo(fakeAPIForRoster{}, "t", "w", WithLeaseDuration(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Unix(100, 0)
	d.countBeatLocked(sent, sent.Add(300*time.Millisecond))
	if d.me.beats != 1 {
		t.Fatalf("a heartbeat back in L/10: %d healthy, want 1", d.me.beats)
	}
	d.countBeatLocked(sent, sent.Add(2700*time.Millisecond))
	if d.me.beats != 1 {
		t.Fatalf("a heartbeat back after 0.9 L counted as healthy: %d, want 1", d.me.beats)
	}
}

// fakeAPIForRoster is a client that is never called.
type fakeAPIForRoster struct{ DynamoAPI }

// TestDeathJudgedByTheLongerLease: a member that published a lease duration longer than the
// observer's is dead only once its heartbeat stood still for its own.
func TestDeathJudgedByTheLongerLease(t *testing.T) {
	r := newRoster()
	t0 := time.Unix(100, 0)
	ms := map[string]member{"me": {epoch: 1, beat: 1}, "long": {epoch: 2, beat: 1}}
	r.observe(ms, nil, t0, t0, 0)
	const own, theirs = 3 * time.Second, 60 * time.Second
	if got := r.dead("me", t0.Add(4*time.Second), own, 5); !slices.Equal(got, []string{"long"}) {
		t.Fatalf("before its lease is known: dead %v, want [long]", got)
	}
	r.learnLease("long", 2, theirs)
	if got := r.dead("me", t0.Add(59*time.Second), own, 5); len(got) > 0 {
		t.Fatalf("59 s into a 60 s lease: dead %v, want none", got)
	}
	if got := r.dead("me", t0.Add(60*time.Second), own, 5); !slices.Equal(got, []string{"long"}) {
		t.Fatalf("after its own lease: dead %v, want [long]", got)
	}
	r.observe(map[string]member{"me": {epoch: 1, beat: 2}, "long": {epoch: 3, beat: 1}}, nil, t0, t0, 5)
	if len(r.leases) != 0 {
		t.Fatalf("a new epoch keeps the old one's lease: %v", r.leases)
	}
}

// TestOwnOutageRestartsTheStandstill: a heartbeat of this worker that failed or was slow (the
// table stalled for everyone, the roster being one item) restarts every other heartbeat's
// standstill from its return: one healthy heartbeat before a stall and one after it do not make
// a member dead whose heartbeat stalled with everyone's.
func TestOwnOutageRestartsTheStandstill(t *testing.T) {
	r := newRoster()
	t0 := time.Unix(100, 0)
	r.observe(map[string]member{"me": {epoch: 1, beat: 1}, "x": {epoch: 2, beat: 1}}, nil, t0, t0, 0)
	const L = 3 * time.Second
	r.unhealthy = t0.Add(2700 * time.Millisecond) // a 2.7 s stall of the whole table ended
	if got := r.dead("me", t0.Add(3100*time.Millisecond), L, 2); len(got) > 0 {
		t.Fatalf("0.4 s after this worker's own stall ended: dead %v, want none", got)
	}
	if got := r.dead("me", t0.Add(5700*time.Millisecond), L, 2); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("a lease after this worker's own stall ended: dead %v, want [x]", got)
	}
}

// TestStillnessCountsFromTheReadBefore: a heartbeat first seen on a read was written after the
// read before it was served, so its stillness counts from that read's send, no earlier than the
// roster's read interval before the read that showed it (DESIGN.md, "Death"). A worker whose
// last heartbeat landed just after a read is dead L after that read, not L after the next one
// (which cost the takeover of an idle worker up to a read interval more).
func TestStillnessCountsFromTheReadBefore(t *testing.T) {
	const L, every = 10 * time.Second, 500 * time.Millisecond
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newRoster()
	r.reads = every
	r.observe(map[string]member{"me": {epoch: 1, beat: 1}, "a": {epoch: 2, beat: 1}}, nil, t0, t0, 0)
	// a's heartbeat 2 lands just after the read at t0; the next read, sent at t0 + 0.5 s, shows it.
	r.observe(map[string]member{"me": {epoch: 1, beat: 1}, "a": {epoch: 2, beat: 2}}, nil, t0.Add(every), t0.Add(every), 0)
	if got := r.dead("me", t0.Add(L-time.Millisecond), L, 2); len(got) != 0 {
		t.Fatalf("dead %v before L had passed since the read before the heartbeat's sight", got)
	}
	if got := r.dead("me", t0.Add(L), L, 2); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("dead %v L after the read before the heartbeat's sight, want [a]", got)
	}
	// After a gap in the reads (5 s), no earlier than a read interval before the read that shows it.
	r.observe(map[string]member{"me": {epoch: 1, beat: 1}, "a": {epoch: 2, beat: 3}}, nil, t0.Add(5*time.Second+every), t0.Add(5*time.Second+every), 0)
	if got := r.dead("me", t0.Add(5*time.Second+L-time.Millisecond), L, 2); len(got) != 0 {
		t.Fatalf("dead %v less than L after a read interval before the read that showed the heartbeat", got)
	}
	if got := r.dead("me", t0.Add(5*time.Second+L), L, 2); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("dead %v, want [a]", got)
	}
}
