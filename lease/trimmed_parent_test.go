package lease

import (
	"context"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
)

// TestChildWaitsForTrimmedParentReadElsewhere: a parent trimmed by retention is gone from the
// listing, so the poller counts it finished and offers its child; while another live worker
// still holds the parent's lease (its last batch in flight), the child is not taken. Once that
// worker checkpoints the parent finished, it is. (Simulation seed 4 with LEASES=1: a child
// invoked before its trimmed parent's last invocation ended.)
func TestChildWaitsForTrimmedParentReadElsewhere(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	parent, child := "shardId-000000000000", "shardId-000000000001"
	logA, _ := testLogger(t)
	a, err := NewDynamo(ddb, table, "a", WithLeaseDuration(2*time.Second), WithLogger(logA))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Register(ctx, infos([]string{parent})); err != nil {
		t.Fatal(err)
	}
	stopA := drive(t, a, []string{parent})
	defer stopA()
	testkit.WaitFor(t, "a holds the parent", 10*time.Second, func() bool { return a.Held(parent) })

	// A worker id the placement gives the child to (both members know one shard, so they agree).
	bID := "b"
	for i := 0; assign([]string{child}, []string{"a", bID}).owner[child] != bID; i++ {
		bID = "b" + string(rune('0'+i))
	}
	logB, _ := testLogger(t)
	b, err := NewDynamo(ddb, table, bID, WithLeaseDuration(2*time.Second), WithLogger(logB))
	if err != nil {
		t.Fatal(err)
	}
	// b lists the child alone: the parent was trimmed.
	if err := b.Register(ctx, []poller.ShardInfo{{ShardID: child, Parents: []string{parent}, Initial: poller.ShardProgress{Start: poller.TrimHorizon}}}); err != nil {
		t.Fatal(err)
	}
	stopB := drive(t, b, []string{child})
	defer stopB()
	cycles := func() int { b.mu.Lock(); defer b.mu.Unlock(); return b.cycles }
	testkit.WaitFor(t, "b ran claim cycles", 10*time.Second, func() bool { return cycles() >= 15 && b.Held(parent) == false })
	if l, ok := leasesOf(t, table)[child]; ok || b.Held(child) {
		t.Fatalf("child taken (%+v) while its trimmed parent is held by a live worker", l)
	}
	if err := a.Save(ctx, map[string]poller.ShardProgress{parent: {Finished: true}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "b takes the child once the parent is finished", 10*time.Second, func() bool { return b.Held(child) })
}
