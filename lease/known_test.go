package lease

import (
	"context"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
)

// TestCleanUpWaitsUntilEveryMemberKnowsTheChildren: two open shards close at about the same
// time and each worker learns only the child of the parent it finished (from that parent's last
// read: ChildShards, or DynamoDB Streams' CHILD_SHARDS listing), so both know as many shards but
// not the same ones. The finisher must not delete the finished parent's lease while the other
// worker does not know its child: that worker, its listing showing the parent open and no item
// for it, would create the lease again and read the parent a second time, after its child had
// started (the DynamoDB simulation, seed 53 with two open shards, did so while members
// published only how many shards they knew). Once both know every shard, the lease goes.
func TestCleanUpWaitsUntilEveryMemberKnowsTheChildren(t *testing.T) {
	ctx := context.Background()
	table := newTable(t)
	ids := shardIDs(4)
	p1, p2, c1, c2 := ids[0], ids[1], ids[2], ids[3]
	child := func(id, parent string) poller.ShardInfo {
		return poller.ShardInfo{ShardID: id, Parents: []string{parent}, Initial: poller.ShardProgress{Start: poller.TrimHorizon}}
	}
	workers := map[string]*Dynamo{}
	drivers := map[string]*pollerDriver{}
	for _, id := range []string{"a", "b"} {
		logger, _ := testLogger(t)
		d, err := NewDynamo(ddb, table, id, WithLeaseDuration(2*time.Second), WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Register(ctx, infos([]string{p1, p2})); err != nil {
			t.Fatal(err)
		}
		p, stop := drivePoller(t, d, []string{p1, p2}, false)
		t.Cleanup(stop)
		workers[id], drivers[id] = d, p
	}
	var fin, other string
	testkit.WaitFor(t, "p1 held", 20*time.Second, func() bool {
		for id, p := range drivers {
			if p.holds(p1) {
				fin = id
			}
		}
		return fin != ""
	})
	other = map[string]string{"a": "b", "b": "a"}[fin]
	f, o := workers[fin], workers[other]

	// The finisher learns p1's child, the other p2's: as many shards known, not the same.
	if err := f.Register(ctx, []poller.ShardInfo{child(c1, p1)}); err != nil {
		t.Fatal(err)
	}
	if err := o.Register(ctx, []poller.ShardInfo{child(c2, p2)}); err != nil {
		t.Fatal(err)
	}
	if err := f.Save(ctx, map[string]poller.ShardProgress{p1: {Finished: true}}); err != nil {
		t.Fatal(err)
	}
	drivers[fin].setCandidates([]string{p2, c1})
	testkit.WaitFor(t, "the finisher holds p1's child", 20*time.Second, func() bool { return drivers[fin].holds(c1) })
	if err := f.Save(ctx, map[string]poller.ShardProgress{c1: {Checkpoint: "49000000000000000000000000000000000000000000000000000001"}}); err != nil {
		t.Fatal(err)
	}
	// The finisher has read the other's entry as it is now (its shards known) and run claim
	// cycles since: each would have deleted p1's lease had it taken the other for knowing c1.
	testkit.WaitFor(t, "the finisher sees what the other knows", 20*time.Second, func() bool {
		o.mu.Lock()
		known := o.knownLocked()
		o.mu.Unlock()
		f.mu.Lock()
		defer f.mu.Unlock()
		m, ok := f.roster.members[other]
		return ok && m.known == known && f.registered == o.registered
	})
	from := drivers[fin].claimCount()
	testkit.WaitFor(t, "the finisher ran claim cycles", 20*time.Second, func() bool { return drivers[fin].claimCount() >= from+15 })
	l, ok := leasesOf(t, table)[p1]
	if !ok {
		t.Fatal("p1's finished lease was deleted while a member did not know its child")
	}
	if !l.Finished() {
		t.Fatalf("p1's lease is %+v, want finished", l)
	}

	// Both learn every shard: now the finished lease goes.
	if err := f.Register(ctx, []poller.ShardInfo{child(c2, p2)}); err != nil {
		t.Fatal(err)
	}
	if err := o.Register(ctx, []poller.ShardInfo{child(c1, p1)}); err != nil {
		t.Fatal(err)
	}
	if err := f.Save(ctx, map[string]poller.ShardProgress{c1: {Checkpoint: "49000000000000000000000000000000000000000000000000000002"}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "p1's finished lease deleted once every member knows its child", 20*time.Second, func() bool {
		_, ok := leasesOf(t, table)[p1]
		return !ok
	})
}
