package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/internal/procenv"
	"github.com/kinesis-esm/esm/invoke/target"
	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/metrics/emf"
	"github.com/kinesis-esm/esm/metrics/health"
	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/metrics/prom"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
	"github.com/kinesis-esm/esm/tracing"
)

// errNoFunction is esm run's answer when nothing says which function to invoke.
var errNoFunction = errors.New("no function to invoke: give --invoke exec:PATH (the function's bootstrap binary, e.g. bin/bootstrap-amd64 from make bootstrap; esm runs it under the Lambda Runtime API), an http(s) endpoint of aws-lambda-rie, lambda:NAME_OR_ARN for a function on Lambda, or example for the built-in example function; or start your own handler with handler.Start(fn) and go run .")

// invoker is the invoker of the parsed --invoke targets, limited to the template's
// ReservedConcurrentExecutions, and a close that ends what it started; nil (and a no-op close)
// when the function runs in this process: no target, or the example.
func (c *Config) invoker(targets []target.Target) (poller.Invoker, func() error, error) {
	nop := func() error { return nil }
	if len(targets) == 0 || targets[0].Example {
		return nil, nop, nil
	}
	o := InvokerOptions{AWS: c.AWS, EndpointURL: c.EndpointURL, Timeout: c.Run.Function.Timeout,
		Region: c.AWS.Region, FunctionName: c.Run.Function.Name, MaxEnvironments: c.MaxEnvironments, Logger: c.Logger,
		FunctionEnv: c.FunctionEnv}
	if c.Mapping != nil {
		o.Function = &c.Mapping.Function
	}
	inv, closeFn, err := NewInvoker(targets, o)
	if err != nil {
		return nil, nop, err
	}
	return inv, closeFn, nil
}

// inProcess is the function to run in this process: fn when given (inproc.Run), the example
// for --invoke example (the targets), else nil.
func (c *Config) inProcess(fn any, targets []target.Target) any {
	if fn != nil {
		return fn
	}
	if len(targets) == 1 && targets[0].Example {
		return c.Example
	}
	return nil
}

// ApplyEnvironment gives an in-process function the template's environment variables: each
// one not already set in this process's environment (the real environment wins, as flags do).
func (c *Config) ApplyEnvironment() error {
	if c.Mapping == nil {
		return nil
	}
	return procenv.Set(c.Mapping.Function.Environment)
}

// Run runs the configured mapping until ctx ends, invoking the --invoke targets or, without any,
// fn in this process (with the template's environment); with neither, it is a usage error that
// says how to give a function. stdout takes the EMF lines (--emf).
func Run(ctx context.Context, c *Config, fn any, stdout io.Writer) error {
	m := c.Run
	f, closeInvoker, err := c.function(ctx, fn)
	if err != nil {
		return err
	}
	defer closeInvoker()
	m.Function = f
	for _, w := range c.Warnings {
		c.Logger.Warn("template", "warning", w)
	}
	if c.Provision {
		if err := c.ProvisionStream(ctx, &m); err != nil {
			return err
		}
	}
	if m.Function.Invoker != nil && m.Function.Handler == nil {
		c.Logger.Info("function", "invoke", strings.Join(c.Invoke, " "))
	}
	if c.Mapping != nil {
		c.Logger.Info("mapping from template", "mapping", c.Mapping.ID, "function", m.Function.Name, "stream", m.Source.Stream)
	}
	r, err := runner.New(c.AWS, runner.WithLogger(c.Logger), runner.WithSQSProtocol(c.SQSProtocol), runner.WithSDKGetRecords(c.SDKGetRecords))
	if err != nil {
		return err
	}
	stopTracing, err := c.trace(ctx, &m)
	if err != nil {
		return err
	}
	stop, err := c.observe(ctx, &m, stdout)
	if err != nil {
		_ = stopTracing()
		return err
	}
	err = StateDirInUse(r.Run(ctx, m))
	if serr := stop(); err == nil {
		err = serr
	}
	if terr := stopTracing(); err == nil {
		err = terr
	}
	return err
}

// function is the mapping's function, made once from the --invoke targets (parsed once): their
// invoker, a lambda: target timed by its own timeout on Lambda when longer (boundLambda), or fn
// (or the example) run in this process with the template's environment, which the runner opens
// (runner.Function.Open, the one maker of in-process invokers). The close ends what the invoker
// started.
func (c *Config) function(ctx context.Context, fn any) (runner.Function, func() error, error) {
	nop := func() error { return nil }
	targets, err := ParseTargets(c.Invoke)
	if err != nil {
		return c.Run.Function, nop, err
	}
	c.boundLambda(ctx, targets)
	f := c.Run.Function
	inv, closeInvoker, err := c.invoker(targets)
	if err != nil {
		return f, closeInvoker, err
	}
	handler := c.inProcess(fn, targets)
	switch {
	case inv != nil:
		f.Invoker = inv
	case handler == nil:
		return f, closeInvoker, Usage(errNoFunction)
	default:
		if err := c.ApplyEnvironment(); err != nil {
			return f, closeInvoker, err
		}
		f.Handler = handler
	}
	return f, closeInvoker, nil
}

// traceFlushTimeout bounds the export of the spans still buffered when esm stops.
const traceFlushTimeout = 5 * time.Second

// trace sets up OpenTelemetry tracing when the OTEL_* variables ask for it. The returned stop
// flushes and ends it (after the mapping stopped).
func (c *Config) trace(ctx context.Context, o *runner.Mapping) (stop func() error, err error) {
	tp, err := tracing.FromEnvironment(ctx, c.Logger)
	if err != nil || tp == nil {
		return func() error { return nil }, err
	}
	tr := tracing.NewTracer(tp, tracing.Mapping{FunctionName: o.Function.Name, UUID: o.UUID})
	o.Hooks.Tracer = tr
	o.Hooks.OnUUID = chain(o.Hooks.OnUUID, tr.SetMappingUUID)
	c.Logger.Info("tracing invocations with OpenTelemetry (OTLP over HTTP)", "endpoint", tracing.Endpoint())
	return func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			return fmt.Errorf("trace export: %w", err)
		}
		return nil
	}, nil
}

// liveBoardOptions names this worker on the live page when it shares its mappings through a
// lease table and has a --worker-id.
func liveBoardOptions(leaseTable, workerID string) []live.Option {
	if leaseTable == "" || workerID == "" {
		return nil
	}
	return []live.Option{live.WithWorker(workerID)}
}

// chain calls a (when set), then b.
func chain(a, b func(string)) func(string) {
	if a == nil {
		return b
	}
	return func(s string) { a(s); b(s) }
}

// observe sets up the metrics the flags ask for: Prometheus with the health endpoints, and EMF
// lines. The returned stop ends them (after the mapping stopped) and reports their errors.
func (c *Config) observe(ctx context.Context, o *runner.Mapping, stdout io.Writer) (stop func() error, err error) {
	var observers []poller.Observer
	if o.Hooks.Observer != nil { // the caller's (the summary of --until-caught-up)
		observers = append(observers, o.Hooks.Observer)
	}
	var runs []func(context.Context) error
	if c.MetricsAddr != "" {
		reg := prom.NewRegistry()
		observers = append(observers, prom.New(reg, o.Function.Name, o.Source.Stream))
		boardOpts := liveBoardOptions(o.Store.LeaseTable, o.Store.WorkerID)
		if o.Store.LeaseTable != "" { // the page shows every worker's shards
			boardOpts = append(boardOpts, live.WithPeers(leasePeers(dynamodb.NewFromConfig(c.AWS), o.Store.LeaseTable), peerClient))
		}
		board := live.New(boardOpts...)
		page := board.Add(o.Function.Name, o.Source.Stream)
		observers = append(observers, page)
		o.Hooks.OnUUID = chain(o.Hooks.OnUUID, page.SetMappingUUID)
		// Ready while the mapping runs and its store answers, with leases after a claim succeeded.
		readiness := poller.NewReadiness()
		skips := poller.NewSkips() // esm skip reaches the mapping here (loopback clients only)
		o.Hooks.Skips = skips
		routes := []health.Option{health.WithGatherer(reg), health.WithReadiness(readiness.Err),
			health.WithRoute("GET "+live.PathPage, board.Handler()), health.WithRoute("GET "+live.PathState, board.Handler()),
			health.WithRoute("POST "+esmapi.WorkerSkipPath, esmapi.WorkerSkipHandler(skips))}
		if o.Store.LeaseTable == "" { // esm rewind reaches the mapping here: it applies it to its own store
			o.Hooks.Rewinds = runner.NewLocalRewinds()
			routes = append(routes, health.WithRoute("POST "+esmapi.WorkerRewindPath, esmapi.WorkerRewindHandler(o.Hooks.Rewinds)))
		}
		srv := health.New(c.MetricsAddr, routes...)
		bound, err := srv.Listen() // a port in use fails before anything is polled
		if err != nil {
			return nil, fmt.Errorf("--metrics-addr %s: %w", c.MetricsAddr, err)
		}
		o.Store.StatusAddr = advertised(bound) // published in the lease table, for the other workers' pages
		o.Hooks.Readiness = readiness
		runs = append(runs, srv.Run)
		c.Logger.Info("metrics served", "addr", c.MetricsAddr)
	}
	if c.EMF {
		// Lambda publishes the event counts only for a mapping whose MetricsConfig asks for them.
		eventCounts := c.Mapping != nil && c.Mapping.MetricsConfig != nil && slices.Contains(c.Mapping.MetricsConfig.Metrics, "EventCount")
		lines := emf.New(stdout, "esm", o.Function.Name, o.Source.Stream, emf.WithEventCounts(eventCounts))
		o.Hooks.OnUUID = chain(o.Hooks.OnUUID, lines.SetMappingUUID) // the runner reads it from the mapping's store
		observers = append(observers, lines)
		runs = append(runs, lines.Run)
	}
	if len(observers) > 1 {
		o.Hooks.Observer = metrics.Tee(observers...)
	} else if len(observers) == 1 {
		o.Hooks.Observer = observers[0]
	}
	if len(runs) == 0 {
		return func() error { return nil }, nil
	}
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	errs := make(chan error, len(runs))
	for _, run := range runs {
		go func() { errs <- run(mctx) }()
	}
	return func() error {
		cancel()
		var first error
		for range runs {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}, nil
}
