package runner

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/kinesis-esm/esm/invoke/target"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/sam"
)

// SetEnvironment gives a function run in this process its template's environment variables:
// each of env's variables that this process's environment does not set already (the real
// environment wins, as a command's flags do). The process has one environment for all its
// functions.
func SetEnvironment(env map[string]string) error {
	for k, v := range env {
		if _, set := os.LookupEnv(k); set {
			continue
		}
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("set %s from the template: %w", k, err)
		}
	}
	return nil
}

// InProcessInvoker invokes handler in this process as the template's function fn (nil: a
// function without a template) is invoked: with the ARN arn and the timeout, at most fn's
// ReservedConcurrentExecutions at once. The close ends what it started.
func InProcessInvoker(handler any, arn string, timeout time.Duration, fn *sam.Function, logger *slog.Logger) (poller.Invoker, func() error, error) {
	opts := []target.Option{target.WithHandler(handler), target.WithFunction("", arn), target.WithTimeout(timeout), target.WithLogger(logger)}
	if fn != nil && fn.ReservedConcurrentExecutions != nil {
		opts = append(opts, target.WithReservedConcurrency(*fn.ReservedConcurrentExecutions))
	}
	return target.Open("", opts...)
}

// InProcess makes handler the mapping's function, run in this process as Lambda runs the
// template's: with the template's environment (SetEnvironment) and, when the template reserves
// concurrency, at most its ReservedConcurrentExecutions invocations at once (InProcessInvoker,
// with the mapping's function ARN and timeout). Without a template, handler is only set.
func (t *TemplateMapping) InProcess(handler any, logger *slog.Logger) error {
	t.Mapping.Function.Handler = handler
	if t.Template == nil {
		return nil
	}
	fn := &t.Template.Function
	if err := SetEnvironment(fn.Environment); err != nil {
		return err
	}
	if fn.ReservedConcurrentExecutions == nil {
		return nil
	}
	m := &t.Mapping
	inv, _, err := InProcessInvoker(handler, m.Config.FunctionARN, m.Function.Timeout, fn, logger)
	if err != nil {
		return err
	}
	m.Function.Invoker = inv
	return nil
}
