// Package grafana holds the Grafana dashboard of esm's Prometheus metrics (esm-dashboard.json);
// its test checks that every expression in it names a metric esm exposes.
package grafana

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kinesis-esm/esm/metrics/prom"
	"github.com/kinesis-esm/esm/poller"
)

// exposed is every metric name a mapping's observer serves, after each of its methods was called
// once; histograms add their _bucket, _sum and _count series.
func exposed(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := prom.New(reg, "fn", "orders")
	var obs poller.Observer = o
	obs.ShardState("s", poller.StateReading)
	obs.RecordsPolled("s", 1)
	obs.RecordsFilteredOut("s", 1)
	obs.BatchInvoked("s", 1, time.Second, true)
	obs.RecordsDropped("s", 1)
	obs.RecordsDelivered("s", 1)
	obs.FunctionError("s")
	obs.Throttled("s")
	obs.DestinationDeliveryFailed("s")
	obs.IteratorAge("s", time.Second)
	obs.ShardBlocked("s", true)
	obs.BatchItemFailuresIgnored("s")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+suffix] = true
			}
		}
	}
	return names
}

// promqlWords are PromQL's functions, aggregations and keywords: identifiers that are not metrics.
var promqlWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`sum min max avg count stddev stdvar topk bottomk quantile count_values group
		rate irate increase delta idelta deriv histogram_quantile abs ceil floor round clamp clamp_min clamp_max
		vector scalar time label_replace label_join sort sort_desc absent absent_over_time avg_over_time
		max_over_time min_over_time sum_over_time count_over_time last_over_time changes resets predict_linear
		and or unless bool offset inf nan`) {
		promqlWords[w] = true
	}
}

var (
	strLit      = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers    = regexp.MustCompile(`\{[^}]*\}`)
	ranges      = regexp.MustCompile(`\[[^\]]*\]`)
	labelLists  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	variables   = regexp.MustCompile(`\$\{?\w+\}?`)
	identifiers = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	labelValues = regexp.MustCompile(`^label_values\(\s*([^,]+),\s*\w+\s*\)$`)
)

// metricNames returns the metric names an expression (PromQL, or Grafana's label_values(metric,
// label)) refers to.
func metricNames(expr string) []string {
	expr = strings.TrimSpace(expr)
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	for _, re := range []*regexp.Regexp{strLit, matchers, ranges, labelLists, variables} {
		expr = re.ReplaceAllString(expr, " ")
	}
	var names []string
	for _, id := range identifiers.FindAllString(expr, -1) {
		if !promqlWords[id] && !slices.Contains(names, id) {
			names = append(names, id)
		}
	}
	return names
}

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
