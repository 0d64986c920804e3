package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
)

// TestParallelizationFactorOnKinesisLocal: PF 10 on one shard with 100 partition keys: ten
// batches are observed in flight at once, and first deliveries keep put order per key.
func TestParallelizationFactorOnKinesisLocal(t *testing.T) {
	stream := newStream(t, 1)
	ctx := context.Background()
	counters := map[string]int{}
	var recs []local.Record
	for i := range 1000 {
		k := fmt.Sprintf("key-%d", i%100)
		recs = append(recs, local.Record{PartitionKey: k, Data: fmt.Appendf(nil, "%s:%d", k, counters[k])})
		counters[k]++
	}
	if _, err := local.PutRecords(ctx, kin, stream, recs); err != nil {
		t.Fatal(err)
	}
	var inFlight, peak atomic.Int64
	var mu sync.Mutex
	seen := map[string]bool{}
	next := map[string]int{}
	var orderErr error
	handler := func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		waitUntil := time.Now().Add(2 * time.Second) // hold the batch until ten are in flight (or give up)
		for peak.Load() < 10 && time.Now().Before(waitUntil) {
			time.Sleep(time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range e.Records {
			d := string(r.Kinesis.Data)
			if seen[d] {
				continue
			}
			seen[d] = true
			if want := fmt.Sprintf("%s:%d", r.Kinesis.PartitionKey, next[r.Kinesis.PartitionKey]); d != want && orderErr == nil {
				orderErr = fmt.Errorf("key %s: %s arrived where %s was due", r.Kinesis.PartitionKey, d, want)
			}
			next[r.Kinesis.PartitionKey]++
		}
		return events.KinesisEventResponse{}, nil
	}
	stop := runMapping(t, stream, filepath.Join(t.TempDir(), "state"),
		poller.Config{StartingPosition: poller.TrimHorizon, BatchSize: 10, ParallelizationFactor: 10, PollInterval: 100 * time.Millisecond}, handler)
	testkit.WaitFor(t, "1000 records", 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 1000 })
	stop()
	mu.Lock()
	defer mu.Unlock()
	if orderErr != nil {
		t.Fatal(orderErr)
	}
	if peak.Load() != 10 {
		t.Fatalf("peak %d batches in flight, want 10", peak.Load())
	}
}
