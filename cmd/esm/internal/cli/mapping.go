package cli

import (
	"context"
	"io"
	"time"

	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// MappingFlags name the mapping's stream and function and say how to reach the function and the
// on-failure destination: the flags "esm run" and "esm redrive" share. A nil pointer means the
// flag was not given: the template's value (or Lambda's default) applies.
type MappingFlags struct {
	Invoke       []string       `help:"The function: exec:PATH [ARGS] runs its binary (a bootstrap, any runtime) in execution environments esm hosts, with the Lambda Runtime API; http(s) URLs of Lambda-Invoke-compatible endpoints (a pool, one invocation at a time each, e.g. aws-lambda-rie); lambda:NAME_OR_ARN through the Lambda API; example for the built-in example function. Repeatable (exec: and URLs)." env:"ESM_INVOKE" sep:"none" placeholder:"exec:PATH|URL|lambda:NAME|example"`
	Stream       *string        `help:"Kinesis stream name or ARN (overrides the template's)." env:"ESM_STREAM"`
	FunctionName *string        `help:"Function name, used in ARNs and to key checkpoints (default: the template's, else example)." env:"ESM_FUNCTION_NAME"`
	Timeout      *time.Duration `help:"Function timeout (default: the template's, else 3s). Invocations are bounded by it plus 10s (what a dead worker's successor waits for): keep an HTTP endpoint's own timeout (AWS_LAMBDA_FUNCTION_TIMEOUT for aws-lambda-rie, 300s by default) no longer; a lambda: function's own timeout on Lambda is used when longer." env:"ESM_TIMEOUT"`
	SQSProtocol  string         `name:"sqs-protocol" help:"Protocol of the SQS on-failure destination: json, or query for emulators that speak only that (goaws)." default:"json" enum:"json,query" env:"ESM_SQS_PROTOCOL"`

	FunctionEnvFlags `embed:""`
}

// apply sets what the flags say on a configuration Target resolved.
func (m MappingFlags) apply(c *Config) {
	c.Invoke = m.Invoke
	c.FunctionEnv = m.FunctionEnvFlags
	c.SQSProtocol = m.SQSProtocol
	if m.Timeout != nil {
		c.Run.Function.Timeout, c.TimeoutGiven = *m.Timeout, true
	}
}

// LoadMapping resolves the template flags and the mapping flags into the mapping's configuration,
// without the settings only a run has (state, leases, metrics): what a tool working on the mapping
// from outside its run needs (esm redrive).
func (f TemplateFlags) LoadMapping(ctx context.Context, m MappingFlags, log LogFlags, stderr io.Writer) (*Config, error) {
	logger, err := log.Logger(stderr)
	if err != nil {
		return nil, err
	}
	c, err := f.Target(ctx, m.Stream, m.FunctionName, logger)
	if err != nil {
		return nil, err
	}
	m.apply(c)
	return c, nil
}

// FunctionInvoker returns the invoker of the --invoke targets and a close that ends what it
// started, or, for --invoke example, c.Example in this process with the template's environment
// and timeout (limited to its ReservedConcurrentExecutions). With no target it is the usage error
// esm run gives.
func (c *Config) FunctionInvoker() (poller.Invoker, func() error, error) {
	fn, closeFn, err := c.function(context.Background(), nil)
	if err != nil {
		return nil, closeFn, err
	}
	inv, err := fn.Open(c.Logger)
	return inv, closeFn, err
}

// ResolveMapping finds the mapping's stream (it must exist) and returns it as a source read
// with clients of the endpoint (a Kinesis stream, polled, or a DynamoDB stream), and its
// function's ARN, as runner.Resolve names them: what keys the mapping's progress and its
// on-failure messages. It writes nothing.
func (c *Config) ResolveMapping(ctx context.Context) (src poller.Source, functionARN string, err error) {
	r, err := runner.New(c.AWS, runner.WithLogger(c.Logger))
	if err != nil {
		return nil, "", err
	}
	found, err := r.Resolve(ctx, c.Run)
	if err != nil {
		return nil, "", err
	}
	found.ConsumerARN = "" // the records are read by polling
	if src, err = r.Source(c.Run, found); err != nil {
		return nil, "", err
	}
	return src, found.FunctionARN, nil
}
