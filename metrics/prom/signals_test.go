package prom

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kinesis-esm/esm/poller"
)

// TestPrometheusMappingIteratorAge: the mapping's IteratorAge is one number, the largest over the
// shards read here, as Lambda publishes IteratorAge per mapping; a shard no longer read here
// leaves it, and mappings sharing a registry keep their own.
func TestPrometheusMappingIteratorAge(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := New(reg, "fn", "orders")
	other := New(reg, "fn-b", "orders")
	mapping := map[string]string{LabelFunction: "fn", LabelStream: "orders"}
	if _, ok := gather(t, reg).find(NameMappingIteratorAge, mapping); ok {
		t.Fatal("a mapping age before any batch")
	}
	for _, s := range []string{"a", "b", "c"} {
		p.ShardState(s, poller.StateReading)
	}
	p.IteratorAge("a", 1500*time.Millisecond)
	p.IteratorAge("b", 4*time.Second)
	p.IteratorAge("c", 2*time.Second)
	other.IteratorAge("z", time.Hour)
	if got := gather(t, reg).value(t, NameMappingIteratorAge, mapping); got != 4000 {
		t.Fatalf("mapping IteratorAge = %v ms, want 4000 (shard b's)", got)
	}
	p.IteratorAge("b", 10*time.Millisecond) // b caught up: the latest batch counts
	if got := gather(t, reg).value(t, NameMappingIteratorAge, mapping); got != 2000 {
		t.Fatalf("mapping IteratorAge = %v ms, want 2000 (shard c's)", got)
	}
	p.ShardState("c", poller.StateReleased) // no longer read here
	if got := gather(t, reg).value(t, NameMappingIteratorAge, mapping); got != 1500 {
		t.Fatalf("mapping IteratorAge = %v ms, want 1500 (shard a's)", got)
	}
	if got := gather(t, reg).value(t, NameMappingIteratorAge, map[string]string{LabelFunction: "fn-b"}); got != 3600e3 {
		t.Fatalf("the other mapping's IteratorAge = %v ms", got)
	}
}

// TestPrometheusShardBlocked: esm_shard_blocked is 0 from the shard's first state on, 1 while it is
// blocked.
func TestPrometheusShardBlocked(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := New(reg, "fn", "orders")
	p.ShardState("s", poller.StateReading)
	if got := gather(t, reg).value(t, NameShardBlocked, shardLabels("s")); got != 0 {
		t.Fatalf("%s = %v before any block", NameShardBlocked, got)
	}
	p.ShardBlocked("s", true)
	if got := gather(t, reg).value(t, NameShardBlocked, shardLabels("s")); got != 1 {
		t.Fatalf("%s = %v while blocked", NameShardBlocked, got)
	}
	p.ShardBlocked("s", false)
	if got := gather(t, reg).value(t, NameShardBlocked, shardLabels("s")); got != 0 {
		t.Fatalf("%s = %v after the block", NameShardBlocked, got)
	}
}

func TestPrometheusBatchItemFailuresIgnored(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := New(reg, "fn", "orders")
	p.BatchItemFailuresIgnored("s")
	p.BatchItemFailuresIgnored("t")
	if got := gather(t, reg).value(t, NameBatchItemFailuresIgnored, map[string]string{LabelFunction: "fn", LabelStream: "orders"}); got != 2 {
		t.Fatalf("%s = %v, want 2", NameBatchItemFailuresIgnored, got)
	}
}
