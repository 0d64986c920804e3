package emf

import (
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// BenchmarkEMFHotCalls is the EMF observer's cost for the same calls (one lock each).
func BenchmarkEMFHotCalls(b *testing.B) {
	e := New(&testkit.SyncBuffer{}, "ESM", "fn", "orders", WithInterval(time.Hour))
	const shard = "shardId-000000000000"
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e.RecordsPolled(shard, 100)
		e.IteratorAge(shard, 250*time.Millisecond)
		e.BatchInvoked(shard, 100, 12*time.Millisecond, false)
		if i%emfMaxSamples == 0 {
			e.mu.Lock()
			e.agg = emfAggregate{} // what Flush does every interval, without the writing
			e.mu.Unlock()
		}
	}
}
