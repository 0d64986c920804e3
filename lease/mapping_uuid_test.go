package lease

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
)

// TestDynamoMappingUUID on dynalite: workers starting at once agree on one UUID, it stays, and
// the item holding it is no lease: neither Load nor ListLeases shows it.
func TestDynamoMappingUUID(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			id, err := MappingUUID(ctx, ddb, table)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	if u, err := uuid.Parse(ids[0]); err != nil || u.Version() != 4 {
		t.Fatalf("mapping UUID %q is not a random (version 4) UUID: %v", ids[0], err)
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("workers got different UUIDs: %v", ids)
		}
	}
	if again, err := MappingUUID(ctx, ddb, table); err != nil || again != ids[0] {
		t.Fatalf("later read %q (%v), want %q", again, err, ids[0])
	}
	d, err := NewDynamo(ddb, table, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Register(ctx, []poller.ShardInfo{{ShardID: "shardId-000000000000"}}); err != nil {
		t.Fatal(err)
	}
	// Leases are created by the worker they are placed on, in its claim cycles.
	stop := drive(t, d, []string{"shardId-000000000000"})
	defer stop()
	var progress map[string]poller.ShardProgress
	testkit.WaitFor(t, "the lease to be created", 20*time.Second, func() bool {
		progress, err = d.Load(ctx)
		return err == nil && len(progress) > 0
	})
	if len(progress) != 1 {
		t.Fatalf("Load = %v; want the one lease", progress)
	}
	leases, err := ListLeases(ctx, ddb, table)
	if err != nil || len(leases) != 1 || leases[0].ShardID != "shardId-000000000000" {
		t.Fatalf("ListLeases = %v, %v; want the one lease", leases, err)
	}
}
