package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/metrics/emf"
	"github.com/kinesis-esm/esm/metrics/health"
	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/metrics/prom"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/tracing"
)

// serveObservers are esm serve's metrics: one Prometheus registry whose series carry each
// mapping's uuid, function and stream (--metrics-addr), and one set of EMF lines per mapping
// (--emf), all made as each mapping's poller starts and kept across its restarts.
type serveObservers struct {
	reg   *prometheus.Registry
	board *live.Board // the live page (--metrics-addr); nil without it
	// statusAddr is where the other workers reach the page, published in the lease tables.
	statusAddr string
	emfTo      io.Writer // nil: no EMF
	// traces makes each mapping's invocation spans, when the OTEL_* variables ask for them.
	traces *sdktrace.TracerProvider

	ctx  context.Context // the EMF writers' lifetime; cancelled by stop
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu    sync.Mutex
	lines map[string]*emf.Observer // by mapping UUID
	pages map[string]*live.Mapping // by mapping UUID
	errs  []error
}

// observers sets up what the flags ask for. serve, when not nil, serves /metrics, /healthz and
// /readyz until ctx ends; stop ends the EMF writers (after the mappings stopped) and reports the
// first error of any.
func (f *ServeFlags) observers(ctx context.Context, stdout io.Writer, ddb lease.DynamoAPI, logger *slog.Logger) (o *serveObservers, stopServing func() error, err error) {
	o = &serveObservers{lines: map[string]*emf.Observer{}, pages: map[string]*live.Mapping{}}
	o.ctx, o.stop = context.WithCancel(context.WithoutCancel(ctx))
	var serve func(context.Context) error
	if f.EMF {
		o.emfTo = stdout
	}
	if addr := f.metricsAddr(); addr != "" {
		o.reg = prom.NewRegistry()
		boardOpts := liveBoardOptions(f.LeaseTable, f.WorkerID)
		if f.LeaseTable != "" { // every worker runs every mapping: any mapping's lease table lists them
			boardOpts = append(boardOpts, live.WithPeers(o.peers(ddb, f.LeaseTable), peerClient))
		}
		o.board = live.New(boardOpts...)
		srv := health.New(addr, health.WithGatherer(o.reg),
			health.WithRoute("GET "+live.PathPage, o.board.Handler()), health.WithRoute("GET "+live.PathState, o.board.Handler()))
		bound, err := srv.Listen() // a port in use fails before anything is polled
		if err != nil {
			o.stop()
			return nil, nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
		}
		logger.Info("metrics served", "addr", bound)
		o.statusAddr = advertised(bound)
		serve = srv.Run
	}
	if o.traces, err = tracing.FromEnvironment(ctx, logger); err != nil {
		o.stop()
		return nil, nil, err
	}
	if o.traces != nil {
		logger.Info("tracing invocations with OpenTelemetry (OTLP over HTTP)", "endpoint", tracing.Endpoint())
	}
	return o, runUntilStopped(ctx, serve), nil
}

// runUntilStopped runs serve (when set) until the returned stop is called, which returns its error.
func runUntilStopped(ctx context.Context, serve func(context.Context) error) (stop func() error) {
	if serve == nil {
		return func() error { return nil }
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- serve(sctx) }()
	return func() error {
		cancel()
		return <-served
	}
}

// options are the esmapi options that give each mapping its observers and its tracer.
func (o *serveObservers) options() []esmapi.Option {
	var opts []esmapi.Option
	if o.reg != nil || o.emfTo != nil {
		opts = append(opts, esmapi.WithObserver(o.observe), esmapi.WithOnDeleted(o.deleted))
	}
	if o.traces != nil {
		opts = append(opts, esmapi.WithTracer(func(m esmapi.EventSourceMapping) poller.Tracer {
			return tracing.NewTracer(o.traces, tracing.Mapping{FunctionName: functionNameOf(m.FunctionArn), UUID: m.UUID})
		}))
	}
	return opts
}

// observe returns the observers of the mapping m.
func (o *serveObservers) observe(m esmapi.EventSourceMapping) poller.Observer {
	fn, stream := functionNameOf(m.FunctionArn), streamNameOf(m.EventSourceArn)
	var obs []poller.Observer
	if o.reg != nil {
		obs = append(obs, prom.NewMapping(o.reg, m.UUID, fn, stream))
		o.mu.Lock()
		page, ok := o.pages[m.UUID]
		if !ok {
			page = o.board.Add(fn, stream)
			page.SetMappingUUID(m.UUID)
			o.pages[m.UUID] = page
		}
		o.mu.Unlock()
		obs = append(obs, page)
	}
	if o.emfTo != nil {
		o.mu.Lock()
		lines, ok := o.lines[m.UUID]
		if !ok {
			// Lambda publishes the event counts only for a mapping whose MetricsConfig asks for them.
			counts := m.MetricsConfig != nil && slices.Contains(m.MetricsConfig.Metrics, "EventCount")
			lines = emf.New(o.emfTo, "esm", fn, stream, emf.WithEventCounts(counts))
			lines.SetMappingUUID(m.UUID)
			o.lines[m.UUID] = lines
			o.wg.Add(1)
			go func() {
				defer o.wg.Done()
				if err := lines.Run(o.ctx); err != nil {
					o.mu.Lock()
					o.errs = append(o.errs, err)
					o.mu.Unlock()
				}
			}()
		}
		o.mu.Unlock()
		obs = append(obs, lines)
	}
	return metrics.Tee(obs...)
}

// peers lists the workers through the lease table of the mapping with the smallest UUID on the
// page (table-UUID): every worker of a shared catalog runs every mapping.
func (o *serveObservers) peers(ddb lease.DynamoAPI, table string) live.PeerSource {
	var mu sync.Mutex
	sources := map[string]live.PeerSource{}
	return func(ctx context.Context) ([]live.Peer, error) {
		o.mu.Lock()
		ids := slices.Sorted(maps.Keys(o.pages))
		o.mu.Unlock()
		if len(ids) == 0 {
			return nil, nil
		}
		mu.Lock()
		src := sources[ids[0]]
		if src == nil {
			src = leasePeers(ddb, table+"-"+ids[0])
			sources[ids[0]] = src
		}
		mu.Unlock()
		return src(ctx)
	}
}

// deleted takes a deleted mapping off the live page.
func (o *serveObservers) deleted(id string) {
	o.mu.Lock()
	page := o.pages[id]
	delete(o.pages, id)
	o.mu.Unlock()
	if page != nil {
		o.board.Remove(page)
	}
}

// close stops the EMF writers (each writes what it has left), flushes the spans still buffered
// (bounded by traceFlushTimeout) and returns the first error.
func (o *serveObservers) close() error {
	o.stop()
	o.wg.Wait()
	var terr error
	if o.traces != nil {
		sctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
		defer cancel()
		if err := o.traces.Shutdown(sctx); err != nil {
			terr = fmt.Errorf("trace export: %w", err)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.errs) > 0 {
		return fmt.Errorf("--emf: %w", o.errs[0])
	}
	return terr
}

// functionNameOf is the function's name in its ARN (arn:aws:lambda:R:A:function:NAME[:QUALIFIER]).
func functionNameOf(arn string) string { return arnPart(arn, ":function:", ":") }

// streamNameOf is the stream's name in a stream or consumer ARN.
func streamNameOf(arn string) string { return arnPart(arn, ":stream/", "/") }

// arnPart is what follows marker in arn, up to end; arn itself when it has no marker.
func arnPart(arn, marker, end string) string {
	_, rest, ok := strings.Cut(arn, marker)
	if !ok {
		return arn
	}
	part, _, _ := strings.Cut(rest, end)
	return part
}
