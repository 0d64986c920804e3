// Package promnames says which metric names PromQL expressions refer to, and which names esm
// exposes, for the tests of the dashboard (deploy/grafana) and of the chart's alerts (deploy/helm):
// an expression naming a metric esm does not expose shows nothing, or never fires.
package promnames

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kinesis-esm/esm/metrics/prom"
	"github.com/kinesis-esm/esm/poller"
)

// Exposed is every metric name a mapping's observer serves, after each of its methods was called
// once; histograms add their _bucket, _sum and _count series.
func Exposed() (map[string]bool, error) {
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
		return nil, err
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
	return names, nil
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

// MetricNames returns the metric names an expression (PromQL, or Grafana's label_values(metric,
// label)) refers to.
func MetricNames(expr string) []string {
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
