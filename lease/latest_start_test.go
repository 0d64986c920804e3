package lease

import (
	"context"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
)

// TestWorkersShareTheFirstLatestStart: two workers of a new LATEST mapping decide their starts
// seconds apart, before any lease exists. The lease, whoever creates it, starts where the first
// one decided, and the creator reads it from there (sim LEASES=1 seed 4 skipped the records
// between the two starts).
func TestWorkersShareTheFirstLatestStart(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	id := "shardId-000000000000"
	first := time.Now().Add(-3 * time.Second).UTC().Truncate(time.Millisecond)
	later := first.Add(2 * time.Second)
	register := func(worker string, at time.Time) *Dynamo {
		t.Helper()
		log, _ := testLogger(t)
		d, err := NewDynamo(ddb, table, worker, WithLeaseDuration(2*time.Second), WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Register(ctx, []poller.ShardInfo{{ShardID: id, Initial: poller.ShardProgress{Start: poller.Latest, StartTimestamp: at}}}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	register("first", first) // starts, then stops before it claims anything
	b := register("later", later)
	stop := drive(t, b, []string{id})
	defer stop()
	testkit.WaitFor(t, "the later worker holds the lease", 10*time.Second, func() bool { return b.Held(id) })
	if got := leasesOf(t, table)[id].Progress.StartTimestamp; !got.Equal(first) {
		t.Fatalf("lease starts at %s, want the first worker's start %s (not %s)", got, first, later)
	}
	progress, err := b.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := progress[id].StartTimestamp; !got.Equal(first) {
		t.Fatalf("Load gives the creator start %s, want %s", got, first)
	}
}
