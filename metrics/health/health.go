// Package health serves a process's Prometheus metrics and its liveness and readiness probes
// over HTTP: /metrics, /healthz and /readyz.
//
// A [Server] serves /metrics (Prometheus text exposition), /healthz (200 while the process runs)
// and /readyz (200 when the readiness function returns nil, else 503 with its error as text). It
// binds exactly the address it is given. The esm CLI's default is 127.0.0.1:9090, so that
// nothing is reachable from outside the host unless asked; a container passes 0.0.0.0:9090
// explicitly, because a probe or a scraper reaches the pod's address, not its loopback.
//
// The server does not negotiate OpenMetrics, whose encoder would append _total to the
// counters' names (see metrics/prom for why they keep Lambda's names).
package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Timeouts of a Server.
const (
	// ShutdownTimeout bounds how long Run waits, once its context ends, for the requests in
	// flight (a scrape) to finish.
	ShutdownTimeout = 5 * time.Second
	// readHeaderTimeout protects the server from clients that never finish their headers.
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 60 * time.Second
)

// ErrServerRan is returned by Listen and Run once Run has returned: a Server runs once.
var ErrServerRan = errors.New("metrics: server already ran")

// Server serves the metrics and health endpoints over HTTP:
//
//	/metrics  the gatherer's metrics in the Prometheus text format
//	/healthz  200 "ok" while the process runs (liveness)
//	/readyz   200 "ready" when ready returns nil, else 503 with its error as text (readiness)
type Server struct {
	addr    string
	handler http.Handler

	mu  sync.Mutex // guards ln and ran
	ln  net.Listener
	ran bool
}

// Option configures New. A nil Option is ignored.
type Option func(*config)

type config struct {
	gatherer prometheus.Gatherer
	ready    func() error
	routes   []route
}

type route struct {
	pattern string
	h       http.Handler
}

// WithRoute serves h at pattern (an http.ServeMux pattern, such as "GET /live") next to the
// server's own routes, and names it on /. A nil h is ignored.
func WithRoute(pattern string, h http.Handler) Option {
	return func(c *config) {
		if h != nil {
			c.routes = append(c.routes, route{pattern, h})
		}
	}
}

// WithGatherer sets where /metrics reads the metrics from, e.g. a registry from prom.NewRegistry
// (default prometheus.DefaultGatherer; nil keeps it).
func WithGatherer(g prometheus.Gatherer) Option {
	return func(c *config) {
		if g != nil {
			c.gatherer = g
		}
	}
}

// WithReadiness sets the readiness function /readyz answers with (default: always ready; nil
// keeps it). It is called on every /readyz request, concurrently, so it must be cheap and safe
// for concurrent use (it reads state the program keeps up to date, it does not call out).
func WithReadiness(ready func() error) Option {
	return func(c *config) {
		if ready != nil {
			c.ready = ready
		}
	}
}

// New returns a server for addr (host:port, bound exactly as given: "127.0.0.1:9090" serves
// this host only, "0.0.0.0:9090" every interface, as a container needs; port 0 picks a free
// port).
func New(addr string, opts ...Option) *Server {
	c := config{gatherer: prometheus.DefaultGatherer, ready: func() error { return nil }}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	gatherer, ready := c.gatherer, c.ready
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
		// One collector's failure must not hide the others' metrics.
		ErrorHandling: promhttp.ContinueOnError,
		// No OpenMetrics: its encoder appends _total to counters, and the counters keep
		// Lambda's names.
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			plain(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
		plain(w, http.StatusOK, "ready")
	})
	index := "esm: /metrics /healthz /readyz"
	for _, r := range c.routes {
		mux.Handle(r.pattern, r.h)
		index += " " + r.pattern[strings.LastIndexByte(r.pattern, ' ')+1:]
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, index)
	})
	return &Server{addr: addr, handler: mux}
}

func plain(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text+"\n") // the client went away: nothing to do
}

// Handler returns the server's routes, to mount elsewhere or to test with httptest.
func (s *Server) Handler() http.Handler { return s.handler }

// Listen binds the address now and returns it (the port chosen when the address asked for port
// 0), so that a program reports an address in use before it starts its work, and a test learns
// the port. Run calls it when it was not called. Calling it again returns the same address.
// A program that called Listen must call Run, which closes the listener.
func (s *Server) Listen() (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ran {
		return nil, ErrServerRan
	}
	if s.ln == nil {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			return nil, fmt.Errorf("metrics: listen %s: %w", s.addr, err)
		}
		s.ln = ln
	}
	return s.ln.Addr(), nil
}

// Run serves until ctx ends, then shuts down gracefully: it stops accepting connections and
// waits up to ShutdownTimeout for requests in flight. It returns nil after that shutdown, the
// error of Listen when the address cannot be bound, or the error that stopped serving. Run
// blocks; a Server runs once.
func (s *Server) Run(ctx context.Context) error {
	if _, err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	ln := s.ln
	s.ran = true
	s.mu.Unlock()

	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served: // Serve stopped by itself: the listener failed
		return fmt.Errorf("metrics: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	// A fresh, bounded context: ctx has ended, and a stuck scrape must not hold up the exit.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("metrics: shutdown: %w", err), srv.Close())
	}
	<-served // http.ErrServerClosed once Shutdown or Close began
	return err
}
