package prom

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/poller"
)

// families indexes gathered metric families by name.
type families map[string]*dto.MetricFamily

func gather(t *testing.T, g prometheus.Gatherer) families {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := families{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// find returns the metric of family name whose labels include want.
func (f families) find(name string, want map[string]string) (*dto.Metric, bool) {
	mf, ok := f[name]
	if !ok {
		return nil, false
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

// value returns the counter's or gauge's value, failing the test when the series is missing.
func (f families) value(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	m, ok := f.find(name, labels)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

func shardLabels(shard string) map[string]string {
	return map[string]string{LabelFunction: "fn", LabelStream: "orders", LabelShard: shard}
}

func TestPrometheusCountersAddUp(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := New(reg, "fn", "orders")
	const s0, s1 = "shardId-000000000000", "shardId-000000000001"

	// Shard 0: 10 polled, 2 filtered out, a batch of 8 fails once (partially), is retried and
	// succeeds. Shard 1: 5 polled, a batch of 5 fails twice; 3 records go to the destination,
	// 2 are dropped. An empty poll adds nothing.
	p.RecordsPolled(s0, 10)
	p.RecordsPolled(s0, 0)
	p.RecordsFilteredOut(s0, 2)
	p.BatchInvoked(s0, 8, 20*time.Millisecond, true)
	p.BatchInvoked(s0, 8, 30*time.Millisecond, false)
	p.RecordsPolled(s1, 5)
	p.BatchInvoked(s1, 5, time.Second, true)
	p.BatchInvoked(s1, 5, 2*time.Second, true)
	p.RecordsDelivered(s1, 3)
	p.RecordsDropped(s1, 2)
	p.RecordsDropped(s1, -1) // ignored: a counter cannot go down

	f := gather(t, reg)
	for _, c := range []struct {
		name  string
		shard string
		want  float64
	}{
		{metrics.NamePolledEventCount, s0, 10},
		{metrics.NameFilteredOutEventCount, s0, 2},
		{metrics.NameInvokedEventCount, s0, 16},
		{metrics.NameFailedInvokeEventCount, s0, 8},
		{metrics.NameDroppedEventCount, s0, 0},
		{metrics.NameOnFailureDestinationDeliveredEventCount, s0, 0},
		{metrics.NamePolledEventCount, s1, 5},
		{metrics.NameFilteredOutEventCount, s1, 0},
		{metrics.NameInvokedEventCount, s1, 10},
		{metrics.NameFailedInvokeEventCount, s1, 10},
		{metrics.NameDroppedEventCount, s1, 2},
		{metrics.NameOnFailureDestinationDeliveredEventCount, s1, 3},
	} {
		if got := f.value(t, c.name, shardLabels(c.shard)); got != c.want {
			t.Errorf("%s{shard=%s} = %v, want %v", c.name, c.shard, got, c.want)
		}
	}

	// Every polled record was filtered out, delivered, dropped, or handled by a successful
	// invocation.
	for _, s := range []string{s0, s1} {
		l := shardLabels(s)
		succeeded := f.value(t, metrics.NameInvokedEventCount, l) - f.value(t, metrics.NameFailedInvokeEventCount, l)
		accounted := f.value(t, metrics.NameFilteredOutEventCount, l) + succeeded +
			f.value(t, metrics.NameDroppedEventCount, l) + f.value(t, metrics.NameOnFailureDestinationDeliveredEventCount, l)
		if polled := f.value(t, metrics.NamePolledEventCount, l); polled != accounted {
			t.Errorf("shard %s: polled %v, filtered+succeeded+dropped+delivered %v", s, polled, accounted)
		}
	}

	hist := func(name string) *dto.Histogram {
		m, ok := f.find(name, map[string]string{LabelFunction: "fn", LabelStream: "orders"})
		if !ok {
			t.Fatalf("no %s", name)
		}
		return m.GetHistogram()
	}
	if h := hist(NameInvocationDuration); h.GetSampleCount() != 4 || math.Abs(h.GetSampleSum()-3.05) > 1e-9 {
		t.Errorf("%s: count %d sum %v, want 4 and 3.05", NameInvocationDuration, h.GetSampleCount(), h.GetSampleSum())
	}
	if h := hist(NameBatchSize); h.GetSampleCount() != 4 || h.GetSampleSum() != 26 {
		t.Errorf("%s: count %d sum %v, want 4 and 26", NameBatchSize, h.GetSampleCount(), h.GetSampleSum())
	}
}

func TestPrometheusHelpNamesLambdaMeaning(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := New(reg, "fn", "orders")
	p.ShardState("s", poller.StateReading)
	p.IteratorAge("s", time.Second)
	p.BatchInvoked("s", 1, time.Millisecond, false)
	p.BatchInvoked("s", 1, time.Millisecond, true)
	p.FunctionError("s")
	p.Throttled("s")
	p.Throttled("s")
	p.DestinationDeliveryFailed("s")
	f := gather(t, reg)
	// The help text says which are Lambda's opt-in metrics (MetricsConfig EventCount).
	for _, name := range []string{
		metrics.NamePolledEventCount, metrics.NameFilteredOutEventCount, metrics.NameInvokedEventCount, metrics.NameFailedInvokeEventCount,
		metrics.NameDroppedEventCount, metrics.NameOnFailureDestinationDeliveredEventCount,
	} {
		mf, ok := f[name]
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		if mf.GetType() != dto.MetricType_COUNTER || !strings.HasPrefix(mf.GetHelp(), "Lambda ESM metric, opt-in in Lambda (MetricsConfig: {Metrics: [EventCount]})") {
			t.Errorf("%s: type %v, help %q", name, mf.GetType(), mf.GetHelp())
		}
	}
	// Lambda's function metrics, always on, one series per function and stream.
	for name, want := range map[string]float64{metrics.NameInvocations: 2, metrics.NameErrors: 1, metrics.NameThrottles: 2, metrics.NameDestinationDeliveryFailures: 1} {
		mf, ok := f[name]
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		if mf.GetType() != dto.MetricType_COUNTER || !strings.HasPrefix(mf.GetHelp(), "Lambda function metric, always on in Lambda: ") {
			t.Errorf("%s: type %v, help %q", name, mf.GetType(), mf.GetHelp())
		}
		if ms := mf.GetMetric(); len(ms) != 1 || ms[0].GetCounter().GetValue() != want || len(ms[0].GetLabel()) != 2 {
			t.Errorf("%s = %v, want one series {function, stream} at %v", name, ms, want)
		}
	}
	if mf := f[metrics.NameIteratorAge]; mf.GetType() != dto.MetricType_GAUGE || !strings.Contains(mf.GetHelp(), "milliseconds") {
		t.Errorf("%s: type %v, help %q", metrics.NameIteratorAge, mf.GetType(), mf.GetHelp())
	}
	for _, name := range []string{NameInvocationDuration, NameBatchSize} {
		if mf := f[name]; mf.GetType() != dto.MetricType_HISTOGRAM {
			t.Errorf("%s: type %v", name, mf.GetType())
		}
	}
}

func TestPrometheusIteratorAgeMilliseconds(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := New(reg, "fn", "orders")
	p.IteratorAge("s", 1500*time.Millisecond)
	p.IteratorAge("s", 2250*time.Microsecond) // the latest batch wins
	if got := gather(t, reg).value(t, metrics.NameIteratorAge, shardLabels("s")); got != 2.25 {
		t.Errorf("IteratorAge = %v ms, want 2.25", got)
	}
	p.IteratorAge("s", -time.Second)
	if got := gather(t, reg).value(t, metrics.NameIteratorAge, shardLabels("s")); got != 0 {
		t.Errorf("IteratorAge of a negative age = %v ms, want 0", got)
	}
}

func TestPrometheusShardStateAndOwnership(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := New(reg, "fn", "orders")
	const s = "shardId-000000000002"

	check := func(step, wantState string, wantOwned float64, wantAge bool) {
		t.Helper()
		f := gather(t, reg)
		for _, st := range shardStates {
			l := shardLabels(s)
			l[LabelState] = st
			want := 0.0
			if st == wantState {
				want = 1
			}
			if got := f.value(t, NameShardState, l); got != want {
				t.Errorf("%s: %s{state=%s} = %v, want %v", step, NameShardState, st, got, want)
			}
		}
		if got := f.value(t, NameShardOwned, shardLabels(s)); got != wantOwned {
			t.Errorf("%s: %s = %v, want %v", step, NameShardOwned, got, wantOwned)
		}
		if _, ok := f.find(metrics.NameIteratorAge, shardLabels(s)); ok != wantAge {
			t.Errorf("%s: IteratorAge series present %v, want %v", step, ok, wantAge)
		}
	}

	p.ShardState(s, poller.StatePending)
	check("pending", poller.StatePending, 0, false)
	p.ShardState(s, poller.StateReading)
	p.IteratorAge(s, time.Second)
	check("reading", poller.StateReading, 1, true)
	p.ShardState(s, poller.StateReading) // repeated: no change
	check("reading again", poller.StateReading, 1, true)
	p.ShardState(s, poller.StateReleased)
	check("released", poller.StateReleased, 0, false)
	p.ShardState(s, poller.StateReading) // taken back
	check("reading after release, idle", poller.StateReading, 1, false)
	p.IteratorAge(s, 3*time.Second)
	check("reading after release", poller.StateReading, 1, true)
	if got := gather(t, reg).value(t, metrics.NameIteratorAge, shardLabels(s)); got != 3000 {
		t.Errorf("IteratorAge after the shard came back = %v, want 3000", got)
	}
	p.ShardState(s, poller.StateFinished)
	check("finished", poller.StateFinished, 0, false)
}

func TestPrometheusSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := New(reg, "fn-a", "orders")
	b := New(reg, "fn-b", "orders") // the same metrics, other labels: no panic
	a.RecordsPolled("s", 1)
	b.RecordsPolled("s", 2)
	f := gather(t, reg)
	for fn, want := range map[string]float64{"fn-a": 1, "fn-b": 2} {
		l := map[string]string{LabelFunction: fn, LabelStream: "orders", LabelShard: "s"}
		if got := f.value(t, metrics.NamePolledEventCount, l); got != want {
			t.Errorf("%s PolledEventCount = %v, want %v", fn, got, want)
		}
	}
}

func TestPrometheusConflictingRegistrationPanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: metrics.NamePolledEventCount, Help: "mine"}))
	defer func() {
		if recover() == nil {
			t.Error("New on a registry with a different PolledEventCount did not panic")
		}
	}()
	New(reg, "fn", "orders")
}

func TestPrometheusNilRegistry(t *testing.T) {
	p := New(nil, "fn", "orders") // usable, exports nothing
	p.RecordsPolled("s", 1)
	p.ShardState("s", poller.StateReading)
}

func TestPrometheusConcurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := New(reg, "fn", "orders")
	const workers, calls = 8, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				shard := fmt.Sprintf("s%d", i%4)
				p.RecordsPolled(shard, 1)
				p.BatchInvoked(shard, 1, time.Millisecond, w%2 == 0)
				p.IteratorAge(shard, time.Duration(i)*time.Millisecond)
				if i%50 == 0 {
					p.ShardState(shard, shardStates[(w+i)%len(shardStates)])
				}
			}
		})
	}
	wg.Wait()
	f := gather(t, reg)
	var polled, failed float64
	for i := range 4 {
		polled += f.value(t, metrics.NamePolledEventCount, shardLabels(fmt.Sprintf("s%d", i)))
		failed += f.value(t, metrics.NameFailedInvokeEventCount, shardLabels(fmt.Sprintf("s%d", i)))
	}
	if polled != workers*calls || failed != workers/2*calls {
		t.Errorf("polled %v failed %v, want %d and %d", polled, failed, workers*calls, workers/2*calls)
	}
}
