package status

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/metrics/prom"
	"github.com/kinesis-esm/esm/poller"
)

// LiveShard is what a running esm's metrics say of one shard.
type LiveShard struct {
	// State is the shard's current state (the state label of its esm_shard_state series at 1).
	State string
	// IteratorAgeMillis is its IteratorAge gauge.
	IteratorAgeMillis *float64
	// ReadBy is polling or subscription (the mode label of esm_shard_read_by at 1).
	ReadBy string
	// Subscription is its enhanced fan-out subscription, only for a shard read by subscription.
	Subscription *Subscription
	// Blocked: its esm_shard_blocked gauge is 1 (the state then reads blocked).
	Blocked bool
	// Owner, BlockedSince, Attempts, LastError and LastErrorAt are what its live page says (see
	// scrapeState).
	Owner        string
	BlockedSince *time.Time
	Attempts     int
	LastError    string
	LastErrorAt  *time.Time
	// RetryingFirst and RetryingLast bound the batch being retried; LastSkip is the last batch an
	// operator skipped (esm skip).
	RetryingFirst, RetryingLast string
	LastSkip                    *live.SkipView
	SkipPending                 string
}

// LiveMapping is what a running esm's metrics say of one mapping.
type LiveMapping struct {
	Function, Stream string
	Shards           map[string]LiveShard
}

// ParseMetrics reads the per-shard series of an esm's metrics, in the Prometheus text format, by
// mapping: the key is the uuid label of esm serve's series, "" for esm run's. Series without a
// shard label, and series status does not show, are skipped. Subscription ages are taken at now.
func ParseMetrics(r io.Reader, now time.Time) (map[string]*LiveMapping, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := map[string]*LiveMapping{}
	for _, name := range liveSeries {
		mf := families[name]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := labelsOf(m)
			shard := labels[prom.LabelShard]
			if shard == "" {
				continue
			}
			lm := out[labels[prom.LabelUUID]]
			if lm == nil {
				lm = &LiveMapping{Function: labels[prom.LabelFunction], Stream: labels[prom.LabelStream], Shards: map[string]LiveShard{}}
				out[labels[prom.LabelUUID]] = lm
			}
			l := lm.Shards[shard]
			l.add(name, value(m), labels, now)
			lm.Shards[shard] = l
		}
	}
	for _, lm := range out { // a shard read by polling now has no subscription to show
		for id, l := range lm.Shards {
			if l.ReadBy != poller.ReadBySubscription {
				l.Subscription = nil
			}
			if l.Blocked && (l.State == "" || l.State == poller.StateReading) {
				l.State = live.StateBlocked
			}
			lm.Shards[id] = l
		}
	}
	return out, nil
}

// liveSeries are the per-shard series status reads from a running esm.
var liveSeries = []string{metrics.NameIteratorAge, prom.NameShardState, prom.NameShardBlocked, prom.NameShardReadBy, prom.NameSubscriptionStarted,
	prom.NameSubscriptionLastEvent, prom.NameSubscriptionRenewals, prom.NameSubscriptionInUse}

// add takes in one sample of the series name.
func (l *LiveShard) add(name string, v float64, labels map[string]string, now time.Time) {
	sub := func() *Subscription {
		if l.Subscription == nil {
			l.Subscription = &Subscription{}
		}
		return l.Subscription
	}
	since := func(unix float64) *float64 {
		d := max(float64(now.UnixMilli())/1e3-unix, 0)
		return &d
	}
	switch name {
	case metrics.NameIteratorAge:
		l.IteratorAgeMillis = &v
	case prom.NameShardState:
		if v == 1 {
			l.State = labels[prom.LabelState]
		}
	case prom.NameShardBlocked:
		l.Blocked = v == 1
	case prom.NameShardReadBy:
		if v == 1 {
			l.ReadBy = labels[prom.LabelMode]
		}
	case prom.NameSubscriptionStarted:
		sub().AgeSeconds = since(v)
	case prom.NameSubscriptionLastEvent:
		sub().LastEventAgeSeconds = since(v)
	case prom.NameSubscriptionRenewals:
		sub().Renewals = v
	case prom.NameSubscriptionInUse:
		sub().InUseRefusals = v
	}
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// value is a sample's value, whatever its metric's type.
func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}

// scrape reads a running esm's /metrics at addr (HOST:PORT; :PORT is 127.0.0.1:PORT).
func scrape(ctx context.Context, client *http.Client, addr string, now time.Time) (map[string]*LiveMapping, error) {
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read the live view at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read the live view at %s: %s", addr, resp.Status)
	}
	live, err := ParseMetrics(resp.Body, now)
	if err != nil {
		return nil, fmt.Errorf("read the live view at %s: %w", addr, err)
	}
	return live, nil
}
