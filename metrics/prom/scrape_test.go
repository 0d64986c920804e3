package prom

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/metrics/health"
	"github.com/kinesis-esm/esm/poller"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The metrics as a scraper sees them through the health server's /metrics.

func TestServerScrapeMetrics(t *testing.T) {
	reg := NewRegistry()
	p := New(reg, "fn", "orders")
	p.ShardState("shardId-000000000000", poller.StateReading)
	p.RecordsPolled("shardId-000000000000", 10)
	p.RecordsFilteredOut("shardId-000000000000", 4)
	p.BatchInvoked("shardId-000000000000", 6, 12*time.Millisecond, false)
	p.IteratorAge("shardId-000000000000", 1200*time.Millisecond)

	srv := httptest.NewServer(health.New("127.0.0.1:0", health.WithGatherer(reg)).Handler())
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	status, body, h := resp.StatusCode, string(b), resp.Header
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d\n%s", status, body)
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("/metrics Content-Type %q, want the text format", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	f := families(fams)
	l := shardLabels("shardId-000000000000")
	for name, want := range map[string]float64{
		metrics.NamePolledEventCount: 10, metrics.NameFilteredOutEventCount: 4, metrics.NameInvokedEventCount: 6,
		metrics.NameFailedInvokeEventCount: 0, metrics.NameIteratorAge: 1200, NameShardOwned: 1,
	} {
		if got := f.value(t, name, l); got != want {
			t.Errorf("scraped %s = %v, want %v", name, got, want)
		}
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("NewRegistry's Go collector missing from /metrics")
	}
	if strings.Contains(body, "PolledEventCount_total") {
		t.Error("counter exposed with a _total suffix; it must keep Lambda's name")
	}
}
