package health

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
)

// startServer runs s on 127.0.0.1 with a free port and returns its base URL and a client;
// cleanup stops it and checks Run's result.
func startServer(t *testing.T, gatherer prometheus.Gatherer, ready func() error) (string, *http.Client) {
	t.Helper()
	addr, cancel, done := run(t, New("127.0.0.1:0", WithGatherer(gatherer), WithReadiness(ready)))
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return "http://" + addr.String(), client
}

// run listens on s's address and runs s until cancel; done receives Run's result.
func run(t *testing.T, s *Server) (addr net.Addr, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	return addr, cancel, ran
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
	s := New("127.0.0.1:0", WithGatherer(prometheus.NewRegistry()), WithReadiness(nil)) // nil ready: always ready
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
	s := New(ln.Addr().String(), WithGatherer(nil), WithReadiness(nil))
	if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("Run on a bound address = %v, want a listen error naming it", err)
	}
}

func TestServerRunsOnce(t *testing.T) {
	s := New("127.0.0.1:0", WithGatherer(prometheus.NewRegistry()), WithReadiness(nil))
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
	addr, cancel, done := run(t, New("127.0.0.1:0", WithGatherer(slow), WithReadiness(nil)))

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
