package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/kinesis-esm/esm/internal/service"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/httpinvoke"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/invoke/lambdaapi"
	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/poller"
)

// lambdaPrefix marks an --invoke target that is a function of the real Lambda API.
const lambdaPrefix = "lambda:"

// Invoker returns the invoker of the --invoke targets, limited to the template's
// ReservedConcurrentExecutions, or nil when there are none (the handler runs in-process).
func (c *Config) Invoker() (poller.Invoker, error) {
	if len(c.Invoke) == 0 {
		return nil, nil
	}
	var inv invoke.Invoker
	var urls []string
	for _, t := range c.Invoke {
		if name, ok := strings.CutPrefix(t, lambdaPrefix); ok {
			if len(c.Invoke) > 1 {
				return nil, Usage(fmt.Errorf("--invoke %s: a Lambda function is invoked alone, not in a pool with %d other targets", t, len(c.Invoke)-1))
			}
			if name == "" {
				return nil, Usage(errors.New("--invoke lambda: needs a function name or ARN, e.g. lambda:my-function"))
			}
			endpoint := c.Service.EndpointURL
			client := awslambda.NewFromConfig(c.AWS, func(o *awslambda.Options) {
				if endpoint != "" {
					o.BaseEndpoint = aws.String(endpoint)
				}
			})
			inv = lambdaapi.New(client, name)
			continue
		}
		if !strings.HasPrefix(t, "http://") && !strings.HasPrefix(t, "https://") {
			return nil, Usage(fmt.Errorf("--invoke %q: want an http(s) URL of a Lambda-Invoke-compatible endpoint, or lambda:NAME_OR_ARN", t))
		}
		urls = append(urls, t)
	}
	if inv == nil {
		h, err := httpinvoke.New(urls, httpinvoke.WithFunctionTimeout(c.Service.FunctionTimeout), httpinvoke.WithLogger(c.Logger))
		if err != nil {
			return nil, Usage(fmt.Errorf("--invoke: %w", err))
		}
		inv = h
	}
	if c.Mapping != nil && c.Mapping.Function.ReservedConcurrentExecutions != nil {
		inv = invoke.Limit(inv, *c.Mapping.Function.ReservedConcurrentExecutions)
	}
	return inv, nil
}

// ApplyEnvironment gives an in-process function the template's environment variables: each
// one not already set in this process's environment (the real environment wins, as flags do).
func (c *Config) ApplyEnvironment() error {
	if c.Mapping == nil {
		return nil
	}
	for k, v := range c.Mapping.Function.Environment {
		if _, set := os.LookupEnv(k); set {
			continue
		}
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("set %s from the template: %w", k, err)
		}
	}
	return nil
}

// Run runs the configured mapping until ctx ends, invoking the --invoke targets or, without any,
// handler in this process (with the template's environment).
func Run(ctx context.Context, c *Config, handler any) error {
	inv, err := c.Invoker()
	if err != nil {
		return err
	}
	for _, w := range c.Warnings {
		c.Logger.Warn("template", "warning", w)
	}
	if c.Provision {
		if err := c.ProvisionStream(ctx); err != nil {
			return err
		}
	}
	o := c.Service
	if inv != nil {
		o.Invoker = inv
	} else {
		if err := c.ApplyEnvironment(); err != nil {
			return err
		}
		if c.Mapping != nil && c.Mapping.Function.ReservedConcurrentExecutions != nil {
			o.Invoker = invoke.Limit(inprocess.New(handler,
				inprocess.WithFunctionARN(o.Mapping.FunctionARN), inprocess.WithTimeout(o.FunctionTimeout)),
				*c.Mapping.Function.ReservedConcurrentExecutions)
		}
	}
	if c.Mapping != nil {
		c.Logger.Info("mapping from template", "mapping", c.Mapping.ID, "function", o.FunctionName, "stream", o.Stream)
	}
	stop, err := c.observe(ctx, &o)
	if err != nil {
		return err
	}
	err = service.Run(ctx, o, handler)
	if serr := stop(); err == nil {
		err = serr
	}
	return err
}

// observe sets up the metrics the flags ask for: Prometheus with the health endpoints, and EMF
// lines. The returned stop ends them (after the mapping stopped) and reports their errors.
func (c *Config) observe(ctx context.Context, o *service.Options) (stop func() error, err error) {
	var observers []poller.Observer
	var runs []func(context.Context) error
	if c.MetricsAddr != "" {
		reg := metrics.NewRegistry()
		observers = append(observers, metrics.NewPrometheus(reg, o.FunctionName, o.Stream))
		var ready atomic.Bool
		srv := metrics.NewServer(c.MetricsAddr, reg, func() error {
			if !ready.Load() {
				return errors.New("starting: the store is not read or no leases are claimed yet")
			}
			return nil
		})
		if _, err := srv.Listen(); err != nil { // a port in use fails before anything is polled
			return nil, fmt.Errorf("--metrics-addr %s: %w", c.MetricsAddr, err)
		}
		o.Ready = func() { ready.Store(true) }
		runs = append(runs, srv.Run)
		c.Logger.Info("metrics served", "addr", c.MetricsAddr)
	}
	if c.EMF {
		emf := metrics.NewEMF(os.Stdout, "esm", o.FunctionName, o.Stream, 0)
		observers = append(observers, emf)
		runs = append(runs, emf.Run)
	}
	if len(observers) == 0 {
		return func() error { return nil }, nil
	}
	o.Observer = metrics.Tee(observers...)
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
