// Package grafana holds the Grafana dashboard of esm's Prometheus metrics (esm-dashboard.json);
// its test checks that every expression in it names a metric esm exposes.
package grafana

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/kinesis-esm/esm/deploy/internal/promnames"
	"github.com/kinesis-esm/esm/metrics/prom"
)

// exposed is every metric name esm exposes.
func exposed(t *testing.T) map[string]bool {
	t.Helper()
	names, err := promnames.Exposed()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

var metricNames = promnames.MetricNames

// expressions walks the dashboard for every query: panel targets (rows' panels too) and the
// query variables.
func expressions(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr string `json:"expr"`
	}
	type panel struct {
		Title   string   `json:"title"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if len(p.Targets) == 0 && len(p.Panels) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil {
			_ = json.Unmarshal(v.Query, &q.Query) // the older form: a plain string
		}
		exprs = append(exprs, q.Query)
	}
	return exprs
}

// TestDashboardNamesExposedMetrics: every expression of the dashboard names at least one metric,
// and only metrics esm exposes.
func TestDashboardNamesExposedMetrics(t *testing.T) {
	have := exposed(t)
	exprs := expressions(t, "esm-dashboard.json")
	if len(exprs) < 10 {
		t.Fatalf("%d expressions: the dashboard was not read", len(exprs))
	}
	used := map[string]bool{}
	for _, e := range exprs {
		names := metricNames(e)
		if len(names) == 0 {
			t.Errorf("expression %q names no metric", e)
		}
		for _, n := range names {
			used[n] = true
			if !have[n] {
				t.Errorf("expression %q names %s, which esm does not expose", e, n)
			}
		}
	}
	for _, n := range []string{prom.NameMappingIteratorAge, prom.NameShardBlocked, prom.NameBatchItemFailuresIgnored} {
		if !used[n] {
			t.Errorf("the dashboard does not show %s", n)
		}
	}
}

// TestMetricNames: the parser finds the metrics and nothing else, so the check above can fail.
func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (shard) (rate(PolledEventCount{function=~"$function", stream="a{b}"}[$__rate_interval]))`: {"PolledEventCount"},
		`histogram_quantile(0.99, sum by (le) (rate(esm_invocation_duration_seconds_bucket[5m])))`:        {"esm_invocation_duration_seconds_bucket"},
		`sum(rate(esm_batch_size_sum[1m])) / sum(rate(esm_batch_size_count[1m]))`:                         {"esm_batch_size_sum", "esm_batch_size_count"},
		`sum(esm_shard_blocked) or vector(0)`:                                                             {"esm_shard_blocked"},
		`label_values(Invocations{function=~"$function"}, stream)`:                                        {"Invocations"},
		`max(IteratorAgeMillis)`: {"IteratorAgeMillis"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %q, want %q", expr, got, want)
		}
	}
	if have := exposed(t); have["IteratorAgeMillis"] || !have["IteratorAge"] || !have["esm_invocation_duration_seconds_bucket"] {
		t.Error("the exposed set is wrong")
	}
}
