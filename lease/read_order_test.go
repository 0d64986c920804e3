package lease

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesis-esm/esm/internal/fakedynamo"
)

// TestCycleReadsEveryPlacedLeaseInTurn: a worker with more leases to read than one cycle
// reads (a staggered start: it was once given every shard, and nothing is created while the
// fleet is still coming) reads each of them within ceil(n / maxPollsPerCycle) cycles. A cycle
// that cut one sorted list read the same first leases, absent, at every cycle and never
// reached the others, so a staggered start of 10,000 shards balanced 28 s after its last
// worker came instead of 7.
func TestCycleReadsEveryPlacedLeaseInTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := fakedynamo.New()
		if err := EnsureTable(ctx, db, "leases", true); err != nil {
			t.Fatal(err)
		}
		d, err := NewDynamo(db, "leases", "a", WithLeaseDuration(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		const n = 3*maxPollsPerCycle - 20
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("shardId-%012d", i)
		}
		if err := d.Register(ctx, infos(ids)); err != nil {
			t.Fatal(err)
		}
		// Three claim cycles at one instant: the fleet gate is closed (the worker has just
		// joined), so no lease is created and every one stays absent.
		for range 3 {
			if _, err := d.Claim(ctx, ids); err != nil {
				t.Fatal(err)
			}
		}
		d.mu.Lock()
		read, held := len(d.missing), len(d.held)
		d.mu.Unlock()
		if held != 0 {
			t.Fatalf("%d leases held: the fleet gate should have held back every create", held)
		}
		if read != n {
			t.Fatalf("after 3 cycles %d of %d absent leases were read, want every one (at most %d a cycle)", read, n, maxPollsPerCycle)
		}
	})
}
