package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kinesis-esm/esm/poller"
)

// startServer runs s on 127.0.0.1 with a free port and returns its base URL and a client;
// cleanup stops it and checks Run's result.
func startServer(t *testing.T, gatherer prometheus.Gatherer, ready func() error) (string, *http.Client) {
	t.Helper()
	s := NewServer("127.0.0.1:0", gatherer, ready)
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return "http://" + addr.String(), client
}

func get(t *testing.T, c *http.Client, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

func TestServerScrapeMetrics(t *testing.T) {
	reg := NewRegistry()
	p := NewPrometheus(reg, "fn", "orders")
	p.ShardState("shardId-000000000000", poller.StateReading)
	p.RecordsPolled("shardId-000000000000", 10)
	p.RecordsFilteredOut("shardId-000000000000", 4)
	p.BatchInvoked("shardId-000000000000", 6, 12*time.Millisecond, false)
	p.IteratorAge("shardId-000000000000", 1200*time.Millisecond)

	base, c := startServer(t, reg, nil)
	status, body, h := get(t, c, base+"/metrics")
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
		NamePolledEventCount: 10, NameFilteredOutEventCount: 4, NameInvokedEventCount: 6,
		NameFailedInvokeEventCount: 0, NameIteratorAge: 1200, NameShardOwned: 1,
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

func TestServerHealthAndReadiness(t *testing.T) {
	var ready atomic.Bool
	base, c := startServer(t, prometheus.NewRegistry(), func() error {
		if !ready.Load() {
			return errors.New("leases not held yet")
		}
		return nil
	})

	if status, body, _ := get(t, c, base+"/healthz"); status != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q, want 200 ok", status, body)
	}
	status, body, _ := get(t, c, base+"/readyz")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "leases not held yet") {
		t.Errorf("/readyz before ready: %d %q, want 503 with the reason", status, body)
	}
	ready.Store(true)
	if status, body, _ := get(t, c, base+"/readyz"); status != http.StatusOK || body != "ready\n" {
		t.Errorf("/readyz when ready: %d %q, want 200 ready", status, body)
	}
	if status, _, _ := get(t, c, base+"/healthz"); status != http.StatusOK {
		t.Errorf("/healthz: %d, want 200", status)
	}
	if status, _, _ := get(t, c, base+"/nothing"); status != http.StatusNotFound {
		t.Errorf("/nothing: %d, want 404", status)
	}
}

func TestServerHandlerWithHTTPTest(t *testing.T) {
	s := NewServer("127.0.0.1:0", prometheus.NewRegistry(), nil) // nil ready: always ready
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("/readyz with nil ready: %d, want 200", rec.Code)
	}
	rec = httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/healthz", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz: %d, want 405", rec.Code)
	}
}

func TestServerAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := NewServer(ln.Addr().String(), nil, nil)
	if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("Run on a bound address = %v, want a listen error naming it", err)
	}
}

func TestServerRunsOnce(t *testing.T) {
	s := NewServer("127.0.0.1:0", prometheus.NewRegistry(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run with an ended context: %v", err)
	}
	if err := s.Run(context.Background()); !errors.Is(err, ErrServerRan) {
		t.Errorf("second Run = %v, want ErrServerRan", err)
	}
}

func TestServerShutdownWaitsForScrape(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	slow := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		close(started)
		<-release
		return nil, nil
	})
	s := NewServer("127.0.0.1:0", slow, nil)
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	scraped := make(chan int, 1)
	go func() {
		resp, err := c.Get("http://" + addr.String() + "/metrics")
		if err != nil {
			scraped <- 0
			return
		}
		resp.Body.Close()
		scraped <- resp.StatusCode
	}()
	<-started
	cancel() // shut down while the scrape is in flight
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) before the scrape in flight finished", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if code := <-scraped; code != http.StatusOK {
		t.Errorf("scrape in flight during shutdown: %d, want 200", code)
	}
}
