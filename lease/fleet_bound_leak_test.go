package lease_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/lease"
)

// TestFailedJoinsLeaveBoundItems guards the audit's defect 9; what follows is that defect as it was
// before its fix, and the test fails if it comes back: a worker joins while the roster item is throttled (a fleet
// starting at once on a fresh on-demand table, a hot roster). Each join attempt draws a new
// epoch and writes that epoch's bound item ("!esm-bound:<id>:<epoch>") before the roster write;
// when the roster write fails, the attempt is retried 250 ms later with another epoch, and the
// bound item written for the failed one is never deleted (dropBound runs only for an epoch that
// left or whose tombstone was removed). Every item stays in the table for good, and every Scan
// (each join, each stop) reads them.
func TestFailedJoinsLeaveBoundItems(t *testing.T) {
	ctx := context.Background()
	var failures atomic.Int64
	db := fakedynamo.New(fakedynamo.WithFaults(func(_ context.Context, c fakedynamo.Call) fakedynamo.Fault {
		in, ok := c.Input.(*dynamodb.UpdateItemInput)
		if !ok || in.ConditionExpression == nil || !strings.Contains(*in.ConditionExpression, "attribute_not_exists(#m.#me)") {
			return fakedynamo.NoFault
		}
		if failures.Add(1) <= 20 { // the first 20 joins' roster writes are throttled (5 s at 250 ms)
			return fakedynamo.Throttle
		}
		return fakedynamo.NoFault
	}))
	if err := lease.EnsureTable(ctx, db, "leases", true); err != nil {
		t.Fatal(err)
	}
	d, err := lease.NewDynamo(db, "leases", "w1", lease.WithLeaseDuration(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = d.Run(rctx); close(done) }()
	// The successful join: its roster entry (written after its bound item, and only once the 20
	// refused attempts are behind it).
	testkit.WaitFor(t, "w1's roster entry", 20*time.Second, func() bool {
		_, joined, err := lease.PublishedHorizon(ctx, db, "leases", "w1")
		if err != nil {
			t.Fatal(err)
		}
		return joined
	})
	if n := failures.Load(); n <= 20 {
		t.Fatalf("w1 joined after %d roster writes of joins, want the 20 refused ones first", n)
	}
	bounds := 0
	for _, it := range db.Items("leases") {
		if k, ok := it["leaseKey"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(k.Value, "!esm-bound:") {
			bounds++
		}
	}
	cancel()
	<-done
	t.Logf("roster writes of joins refused: 20; bound items in the table once joined: %d", bounds)
	if bounds != 1 {
		t.Errorf("%d bound items for one worker after it joined, want 1 (its epoch's): the failed joins' items are never deleted", bounds)
	}
}
