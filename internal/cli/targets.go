package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/google/shlex"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/execenv"
	"github.com/kinesis-esm/esm/invoke/httpinvoke"
	"github.com/kinesis-esm/esm/invoke/lambdaapi"
	"github.com/kinesis-esm/esm/sam"
)

// The prefixes and names of --invoke targets.
const (
	lambdaPrefix  = "lambda:"
	execPrefix    = "exec:"
	exampleTarget = "example"
)

// Target is one --invoke target: exactly one of its fields is set.
type Target struct {
	// URL is a Lambda-Invoke-compatible endpoint (aws-lambda-rie), a base URL or a full
	// .../invocations URL.
	URL string
	// Lambda is a function of the Lambda API: a name, name:qualifier or ARN.
	Lambda string
	// Exec is a function binary and its arguments, run by esm in execution environments that
	// speak the Lambda Runtime API.
	Exec []string
	// Example is the example function built into esm, run in-process (demos and tests).
	Example bool
}

func (t Target) String() string {
	switch {
	case t.URL != "":
		return t.URL
	case t.Lambda != "":
		return lambdaPrefix + t.Lambda
	case t.Example:
		return exampleTarget
	}
	return execPrefix + strings.Join(t.Exec, " ")
}

// ParseTargets parses --invoke values: http(s) URLs, lambda:NAME_OR_ARN, exec:PATH [ARGS...]
// and example. A value that is not an exec: target may hold several targets separated by spaces
// (ESM_INVOKE="url1 url2"); an exec: value is one target, the path then its arguments, split as
// a POSIX shell splits words (quotes and backslashes). Mixing kinds is an error, and so is a
// Lambda function or the example alongside anything else. Errors are usage errors.
func ParseTargets(values []string) ([]Target, error) {
	var out []Target
	for _, v := range values {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(v), execPrefix); ok {
			words, err := shlex.Split(cmd)
			if err != nil {
				return nil, Usage(fmt.Errorf("--invoke %q: %w", v, err))
			}
			if len(words) == 0 {
				return nil, Usage(errors.New("--invoke exec: needs the function's binary, e.g. exec:bin/bootstrap"))
			}
			out = append(out, Target{Exec: words})
			continue
		}
		for _, f := range strings.Fields(v) {
			switch name, isLambda := strings.CutPrefix(f, lambdaPrefix); {
			case isLambda && name == "":
				return nil, Usage(errors.New("--invoke lambda: needs a function name or ARN, e.g. lambda:my-function"))
			case isLambda:
				out = append(out, Target{Lambda: name})
			case f == exampleTarget:
				out = append(out, Target{Example: true})
			case strings.HasPrefix(f, "http://") || strings.HasPrefix(f, "https://"):
				out = append(out, Target{URL: f})
			default:
				return nil, Usage(fmt.Errorf("--invoke %q: want exec:PATH [ARGS] (a function binary esm runs itself), an http(s) URL of a Lambda-Invoke-compatible endpoint, lambda:NAME_OR_ARN, or example", f))
			}
		}
	}
	for _, t := range out {
		if (t.Lambda != "" || t.Example) && len(out) > 1 {
			return nil, Usage(fmt.Errorf("--invoke %s: invoked alone, not in a pool with %d other targets", t, len(out)-1))
		}
		if (t.URL != "") != (out[0].URL != "") {
			return nil, Usage(fmt.Errorf("--invoke %s and %s: a pool is of endpoints or of exec: binaries, not both", out[0], t))
		}
	}
	return out, nil
}

// InvokerOptions are what the invokers of targets need beyond the targets.
type InvokerOptions struct {
	AWS         aws.Config
	EndpointURL string // for lambda: targets
	Timeout     time.Duration
	Region      string
	// Function is the template's function (its name, ARN, memory, handler, environment), or nil.
	Function *sam.Function
	// FunctionName names the function when there is no template; FunctionARN, when set, is its
	// ARN then.
	FunctionName    string
	FunctionARN     string
	MaxEnvironments int              // exec: the most execution environments; 0 for the default
	FunctionEnv     FunctionEnvFlags // exec: what the function gets of esm's environment
	Output          io.Writer        // exec: the function's log; nil for stderr
	Logger          *slog.Logger
}

// NewInvoker returns the invoker of targets (none of them the example), limited to the
// function's ReservedConcurrentExecutions, and a close that ends what it started (exec:
// environments).
func NewInvoker(targets []Target, o InvokerOptions) (inv invoke.Invoker, closeFn func() error, err error) {
	closeFn = func() error { return nil }
	switch {
	case len(targets) == 0:
		return nil, closeFn, errors.New("no --invoke target")
	case targets[0].Lambda != "":
		client := awslambda.NewFromConfig(o.AWS, func(lo *awslambda.Options) {
			if o.EndpointURL != "" {
				lo.BaseEndpoint = aws.String(o.EndpointURL)
			}
		})
		inv = lambdaapi.New(client, targets[0].Lambda)
	case targets[0].URL != "":
		urls := make([]string, len(targets))
		for i, t := range targets {
			urls[i] = t.URL
		}
		h, err := httpinvoke.New(urls, httpinvoke.WithFunctionTimeout(o.Timeout), httpinvoke.WithLogger(o.Logger))
		if err != nil {
			return nil, closeFn, Usage(fmt.Errorf("--invoke: %w", err))
		}
		inv, closeFn = h, func() error { h.CloseIdleConnections(); return nil }
	case targets[0].Exec != nil:
		// The functions run as esm's user: keep them out of esm's environment and memory.
		if err := execenv.ProtectHost(); err != nil && o.Logger != nil {
			o.Logger.Warn("execution environments: esm's environment stays readable by its user's processes", "error", err)
		}
		pools := make([]*execenv.Pool, 0, len(targets))
		closeFn = func() error {
			for _, p := range pools {
				_ = p.Close()
			}
			return nil
		}
		opts, err := execOptions(o)
		if err != nil {
			return nil, closeFn, err
		}
		for _, t := range targets {
			p, err := execenv.New(t.Exec, opts...)
			if err != nil {
				return nil, closeFn, Usage(fmt.Errorf("--invoke %s: %w", t, err))
			}
			pools = append(pools, p)
		}
		inv = pools[0]
		if len(pools) > 1 {
			inv = newLeastBusy(pools)
		}
	default:
		return nil, closeFn, fmt.Errorf("--invoke %s: not an invoker target", targets[0])
	}
	if o.Function != nil && o.Function.ReservedConcurrentExecutions != nil {
		inv = invoke.Limit(inv, *o.Function.ReservedConcurrentExecutions)
	}
	return inv, closeFn, nil
}

// execOptions configure the execution environments of an exec: target from the template's
// function and the --function-env-pass and --function-credentials flags.
func execOptions(o InvokerOptions) ([]execenv.Option, error) {
	env, err := o.FunctionEnv.execOptions(context.Background(), o.AWS)
	if err != nil {
		return nil, err
	}
	opts := []execenv.Option{
		execenv.WithTimeout(o.Timeout), execenv.WithRegion(o.Region), execenv.WithMaxEnvironments(o.MaxEnvironments),
		execenv.WithOutput(o.Output), execenv.WithLogger(o.Logger), execenv.WithFunction(o.FunctionName, o.FunctionARN),
	}
	if f := o.Function; f != nil {
		opts = append(opts, execenv.WithFunction(f.FunctionName, f.FunctionArn), execenv.WithMemorySize(f.MemorySize),
			execenv.WithHandler(f.Handler), execenv.WithEnvironment(f.Environment))
	}
	if o.Output == nil {
		opts = append(opts, execenv.WithOutput(os.Stderr))
	}
	return append(opts, env...), nil
}

// leastBusy spreads invocations over several exec: pools: each goes to the pool with the fewest
// invocations in flight.
type leastBusy struct {
	pools    []*execenv.Pool
	inFlight []atomic.Int64
}

func newLeastBusy(pools []*execenv.Pool) *leastBusy {
	return &leastBusy{pools: pools, inFlight: make([]atomic.Int64, len(pools))}
}

func (l *leastBusy) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	best := 0
	for i := range l.pools {
		if l.inFlight[i].Load() < l.inFlight[best].Load() {
			best = i
		}
	}
	l.inFlight[best].Add(1)
	defer l.inFlight[best].Add(-1)
	return l.pools[best].Invoke(ctx, payload)
}
