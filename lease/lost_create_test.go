package lease

import (
	"context"
	"testing"
)

// TestLostCreateWithoutItemReadsTheLease: dynalite answers a create that lost its race with a
// ConditionalCheckFailed that carries no item (it ignores ReturnValuesOnConditionCheckFailure).
// The loser must then read the lease at once. It backed off instead, and since each claim tried
// the create again, and each failure renewed the back-off, it never read the lease: a child
// shard created by the worker that finished its parent and handed over to this one was never
// taken up, nor read by anyone (make chaos: records of a child missing for over a minute).
func TestLostCreateWithoutItemReadsTheLease(t *testing.T) {
	ctx := context.Background()
	table := newTable(t)
	a, err := NewDynamo(ddb, table, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewDynamo(ddb, table, "b")
	if err != nil {
		t.Fatal(err)
	}
	const shard = "shardId-000000000009"
	a.create(ctx, shard)
	for range pollEager + 3 { // as many claims as it takes to reach the back-off
		b.create(ctx, shard)
		b.mu.Lock()
		s := b.peekLocked(shard)
		backedOff, pending := s.poll != (pollState{}), s.pending
		b.mu.Unlock()
		if backedOff || !pending {
			t.Fatalf("after a lost create: pending %v, backed off %v; want the lease read at once", pending, backedOff)
		}
	}
}
