package prom

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/poller"
)

// TestPrometheusRewinds: through the mapping's tee, esm_rewind_in_progress is 1 while a rewind
// the worker sees is requested or applying and 0 once it ended, and esm_rewinds_total counts
// each ended rewind by outcome.
func TestPrometheusRewinds(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs := metrics.Tee(New(reg, "fn", "orders")).(poller.RewindObserver)
	mapping := map[string]string{LabelFunction: "fn", LabelStream: "orders"}
	outcome := func(o string) map[string]string {
		return map[string]string{LabelFunction: "fn", LabelStream: "orders", LabelOutcome: o}
	}
	obs.RewindSeen(poller.RewindNotice{Revision: 1, State: "requested", InProgress: true})
	if got := gather(t, reg).value(t, NameRewindInProgress, mapping); got != 1 {
		t.Fatalf("%s = %v while requested, want 1", NameRewindInProgress, got)
	}
	applied := poller.RewindNotice{Revision: 1, State: "applied"}
	obs.RewindSeen(applied)
	obs.RewindEnded(applied)
	obs.RewindEnded(poller.RewindNotice{Revision: 2, State: "refused"})
	obs.RewindEnded(poller.RewindNotice{Revision: 3, State: "applied"})
	g := gather(t, reg)
	if got := g.value(t, NameRewindInProgress, mapping); got != 0 {
		t.Fatalf("%s = %v once applied, want 0", NameRewindInProgress, got)
	}
	if a, r := g.value(t, NameRewinds, outcome("applied")), g.value(t, NameRewinds, outcome("refused")); a != 2 || r != 1 {
		t.Fatalf("%s applied = %v, refused = %v; want 2 and 1", NameRewinds, a, r)
	}
}
