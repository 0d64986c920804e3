package prom

import (
	"testing"
	"testing/synctest"
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

// TestFinishedShardSeriesGo (issue 40): a finished shard's series, every one with its shard label,
// stay for the grace after it finished (scrapes see its last counts) and then go; a shard still
// read keeps its own; a shard that leaves the finished state in the grace keeps them.
func TestFinishedShardSeriesGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		p := New(reg, "fn", "orders")
		for _, s := range []string{"done", "open", "back"} {
			p.ShardState(s, poller.StateReading)
			p.RecordsPolled(s, 3)
			p.BatchInvoked(s, 3, time.Millisecond, false)
			p.IteratorAge(s, time.Second)
			p.ShardReadBy(s, poller.ReadBySubscription)
			p.Subscribed(s, time.Now(), false)
			p.SubscriptionEvent(s, time.Now())
			p.ShardBlocked(s, false)
		}
		p.ShardState("done", poller.StateFinished)
		p.ShardState("back", poller.StateFinished)
		time.Sleep(DefaultFinishedGrace - time.Second)
		p.ShardState("back", poller.StatePending) // not finished after all (a test of the cancel)
		if n := seriesOf(t, reg, "done"); n == 0 {
			t.Fatal("the finished shard's series went before the grace")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := seriesOf(t, reg, "done"); n != 0 {
			t.Fatalf("%d series of the finished shard remain after the grace", n)
		}
		open, back := seriesOf(t, reg, "open"), seriesOf(t, reg, "back")
		if open < 12 || back < 12 {
			t.Fatalf("%d series of the shard read and %d of the one no longer finished, want all of them", open, back)
		}
	})
}

// seriesOf counts the series with the shard label shard.
func seriesOf(t *testing.T, g prometheus.Gatherer, shard string) int {
	t.Helper()
	n := 0
	for _, mf := range gather(t, g) {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == LabelShard && l.GetValue() == shard {
					n++
				}
			}
		}
	}
	return n
}

func TestPrometheusBatchSkipped(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := New(reg, "fn", "orders")
	p.BatchSkipped("s", poller.Skipped{Records: 3})
	p.BatchSkipped("s", poller.Skipped{Records: 2})
	labels := map[string]string{LabelFunction: "fn", LabelStream: "orders"}
	g := gather(t, reg)
	if b, r := g.value(t, NameBatchesSkipped, labels), g.value(t, NameRecordsSkipped, labels); b != 2 || r != 5 {
		t.Fatalf("%s = %v, %s = %v; want 2 and 5", NameBatchesSkipped, b, NameRecordsSkipped, r)
	}
}
