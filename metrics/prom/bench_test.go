package prom

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkPrometheusHotCalls measures what the poller calls per poll and per batch on a shard
// already seen: RecordsPolled, IteratorAge and BatchInvoked.
func BenchmarkPrometheusHotCalls(b *testing.B) {
	p := New(prometheus.NewRegistry(), "fn", "orders")
	const shard = "shardId-000000000000"
	p.RecordsPolled(shard, 0)
	b.ReportAllocs()
	for b.Loop() {
		p.RecordsPolled(shard, 100)
		p.IteratorAge(shard, 250*time.Millisecond)
		p.BatchInvoked(shard, 100, 12*time.Millisecond, false)
	}
}

// BenchmarkPrometheusHotCallsParallel is the same from every core at once, over 16 shards.
func BenchmarkPrometheusHotCallsParallel(b *testing.B) {
	p := New(prometheus.NewRegistry(), "fn", "orders")
	var shards [16]string
	for i := range shards {
		shards[i] = fmt.Sprintf("shardId-%012d", i)
		p.RecordsPolled(shards[i], 0)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			shard := shards[i%len(shards)]
			i++
			p.RecordsPolled(shard, 100)
			p.IteratorAge(shard, 250*time.Millisecond)
			p.BatchInvoked(shard, 100, 12*time.Millisecond, false)
		}
	})
}

// BenchmarkPrometheusCall is one counter call (RecordsPolled) on a shard already seen.
func BenchmarkPrometheusCall(b *testing.B) {
	p := New(prometheus.NewRegistry(), "fn", "orders")
	const shard = "shardId-000000000000"
	p.RecordsPolled(shard, 0)
	b.ReportAllocs()
	for b.Loop() {
		p.RecordsPolled(shard, 100)
	}
}
