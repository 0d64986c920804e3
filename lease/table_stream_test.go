package lease

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// TestClaimTable on dynalite: the workers of two streams starting at once on one new table: one
// stream gets it, every worker of the other is refused with a message naming the table and both
// streams; the claim stays, next to the mapping's UUID, and is no lease.
func TestClaimTable(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	const a, b = "arn:aws:kinesis:us-east-1:000000000000:stream/orders", "arn:aws:kinesis:us-east-1:000000000000:stream/payments"
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = ClaimTable(ctx, ddb, table, []string{a, b}[i%2]) })
	}
	wg.Wait()
	winner, loser := a, b
	if errs[0] != nil {
		winner, loser = b, a
	}
	for i, err := range errs {
		stream := []string{a, b}[i%2]
		switch {
		case stream == winner && err != nil:
			t.Errorf("worker %d of %s, the table's stream: %v", i, stream, err)
		case stream == loser && !errors.Is(err, ErrTableOfAnotherStream):
			t.Errorf("worker %d of %s on %s's table: %v, want ErrTableOfAnotherStream", i, stream, winner, err)
		case stream == loser && !(strings.Contains(err.Error(), table) && strings.Contains(err.Error(), a) && strings.Contains(err.Error(), b)):
			t.Errorf("the refusal names not the table and both streams: %v", err)
		}
	}
	if _, err := MappingUUID(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	if err := ClaimTable(ctx, ddb, table, winner); err != nil {
		t.Errorf("the table's stream again, after the mapping's UUID: %v", err)
	}
	if err := ClaimTable(ctx, ddb, table, loser); !errors.Is(err, ErrTableOfAnotherStream) {
		t.Errorf("the other stream again: %v", err)
	}
	if leases, err := ListLeases(ctx, ddb, table); err != nil || len(leases) != 0 {
		t.Errorf("ListLeases = %v, %v; the mapping item is no lease", leases, err)
	}
}
