package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/target"
	"github.com/kinesis-esm/esm/runner"
	"github.com/kinesis-esm/esm/sam"
)

// ParseTargets parses --invoke values (target.ParseTargets); its errors are usage errors.
func ParseTargets(values []string) ([]target.Target, error) {
	targets, err := target.ParseTargets(values)
	return targets, targetUsage(err)
}

// targetUsage classifies the errors of invoke's targets once: an invalid target is a usage
// error of --invoke (and of --function, which takes the same values).
func targetUsage(err error) error {
	if errors.Is(err, target.ErrInvalidTarget) {
		return Usage(fmt.Errorf("--invoke %w", err))
	}
	return err
}

// InvokerOptions are what the invokers of targets need beyond the targets.
type InvokerOptions struct {
	AWS         aws.Config
	EndpointURL string // for lambda: targets
	Timeout     time.Duration
	Region      string
	// Function is the template's function (its name, ARN, memory, handler, environment), or nil.
	Function *sam.Function
	// FunctionName names the function when there is no template. The ARN it is invoked as is
	// its mapping's (invoke.WithFunctionARN).
	FunctionName    string
	MaxEnvironments int              // exec: the most execution environments; 0 for the default
	FunctionEnv     FunctionEnvFlags // exec: what the function gets of esm's environment
	Output          io.Writer        // exec: the function's log; nil for stderr
	Logger          *slog.Logger
}

// NewInvoker returns the invoker of targets (target.OpenTargets), limited to the function's
// ReservedConcurrentExecutions, and a close that ends what it started (exec: environments).
func NewInvoker(targets []target.Target, o InvokerOptions) (inv invoke.Invoker, closeFn func() error, err error) {
	if len(targets) == 0 {
		return nil, func() error { return nil }, errors.New("no --invoke target")
	}
	if targets[0].Lambda != "" {
		// Waits for an answer as long as the function may run, and asks the start check again on
		// a new connection (runner.InvokeHTTPClient). o.Timeout is the function's (lambdaTimeout).
		o.AWS.HTTPClient = runner.InvokeHTTPClient(o.Timeout)
	}
	opts := []target.Option{
		target.WithAWS(o.AWS), target.WithEndpoint(o.EndpointURL), target.WithTimeout(o.Timeout), target.WithRegion(o.Region),
		target.WithFunction(o.FunctionName, ""), target.WithMaxEnvironments(o.MaxEnvironments),
		target.WithOutput(o.Output), target.WithLogger(o.Logger),
	}
	if f := o.Function; f != nil {
		opts = append(opts, target.WithFunction(f.FunctionName, ""), target.WithMemorySize(f.MemorySize),
			target.WithHandlerName(f.Handler), target.WithEnvironment(f.Environment))
		if n := f.ReservedConcurrentExecutions; n != nil {
			opts = append(opts, target.WithReservedConcurrency(*n))
		}
	}
	if targets[0].Exec != nil { // what an exec: function gets of esm's environment
		env, err := o.FunctionEnv.openOptions(context.Background(), o.AWS)
		if err != nil {
			return nil, func() error { return nil }, err
		}
		opts = append(opts, env...)
	}
	inv, closeFn, err = target.OpenTargets(targets, opts...)
	return inv, closeFn, targetUsage(err)
}
