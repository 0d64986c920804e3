package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/execenv"
	"github.com/kinesis-esm/esm/invoke/httpinvoke"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/invoke/lambdaapi"
)

// openConfig is what the options of Open set.
type openConfig struct {
	aws          aws.Config
	endpoint     string
	timeout      time.Duration
	functionName string
	functionARN  string
	region       string
	memoryMB     int
	handlerName  string
	env          map[string]string
	maxEnvs      int
	output       io.Writer
	log          *slog.Logger
	passEnv      []string
	credentials  aws.CredentialsProvider
	reserved     int // reserved concurrency; < 0: no limit
	handler      any
}

// Option configures Open and OpenTargets. A nil Option is ignored. Each option says which
// targets it is for; the others ignore it.
type Option func(*openConfig)

// WithAWS sets the AWS SDK configuration of lambda: targets (region, credentials, retryer;
// default: an empty configuration, which reaches no function).
func WithAWS(cfg aws.Config) Option {
	return func(c *openConfig) { c.aws = cfg }
}

// WithEndpoint sets the Lambda API endpoint URL of lambda: targets (default: the SDK's for the
// configuration's region; an emulator's, e.g. http://127.0.0.1:4566).
func WithEndpoint(url string) Option {
	return func(c *openConfig) { c.endpoint = url }
}

// WithTimeout sets the function timeout of URL, exec: and in-process targets (default
// DefaultTimeout; zero or negative keeps it). A lambda: function has its own.
func WithTimeout(d time.Duration) Option {
	return func(c *openConfig) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithFunction names the function of exec: and in-process targets: its name
// (AWS_LAMBDA_FUNCTION_NAME, default DefaultFunctionName) and ARN (the InvokedFunctionArn it
// sees, default DefaultFunctionARN). Empty values keep what an earlier WithFunction set.
func WithFunction(name, arn string) Option {
	return func(c *openConfig) {
		if name != "" {
			c.functionName = name
		}
		if arn != "" {
			c.functionARN = arn
		}
	}
}

// WithRegion sets AWS_REGION and AWS_DEFAULT_REGION of exec: functions (default us-east-1).
func WithRegion(region string) Option {
	return func(c *openConfig) { c.region = region }
}

// WithMemorySize sets the memory of exec: functions in MB (execenv.WithMemorySize; default
// execenv.DefaultMemorySize; zero or negative keeps it).
func WithMemorySize(mb int) Option {
	return func(c *openConfig) {
		if mb > 0 {
			c.memoryMB = mb
		}
	}
}

// WithHandlerName sets _HANDLER of exec: functions, the template's Handler (default: the
// binary's name).
func WithHandlerName(name string) Option {
	return func(c *openConfig) { c.handlerName = name }
}

// WithEnvironment adds variables of exec: functions' own (the template's Environment);
// repeatable, a later value of a name wins. Lambda's reserved variables win over them. An
// in-process handler shares this process's environment: set the variables there.
func WithEnvironment(env map[string]string) Option {
	return func(c *openConfig) {
		for k, v := range env {
			c.env[k] = v
		}
	}
}

// WithMaxEnvironments caps how many execution environments an exec: target runs at once
// (default execenv.DefaultMaxEnvironments; zero or negative keeps it).
func WithMaxEnvironments(n int) Option {
	return func(c *openConfig) { c.maxEnvs = n }
}

// WithOutput sets where the log of exec: functions goes: their stdout and stderr lines and the
// START, END and REPORT lines (default, or nil: os.Stderr).
func WithOutput(w io.Writer) Option {
	return func(c *openConfig) { c.output = w }
}

// WithLogger sets the logger of the invokers Open builds, for what they do on their own
// (environments started, retries, a handler that overran its timeout; default, or nil: discard).
// Errors are returned, never logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *openConfig) { c.log = l }
}

// WithPassEnv passes these variables of this process's environment to exec: functions
// (repeatable; default none). Nothing else of this process's environment reaches them, except
// the credentials WithCredentials gives (execenv.WithPassEnv). A name that is empty or holds
// "=", a space or NUL is an invalid target.
func WithPassEnv(names ...string) Option {
	return func(c *openConfig) { c.passEnv = append(c.passEnv, names...) }
}

// WithCredentials sets the AWS credentials exec: functions get as their own (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), retrieved for each environment as it starts, as
// Lambda gives a function its execution role's (default, or nil: none). Passing the AWS
// configuration's own, cfg.Credentials, is what sam local does with the developer's.
func WithCredentials(p aws.CredentialsProvider) Option {
	return func(c *openConfig) { c.credentials = p }
}

// WithReservedConcurrency caps the invocations in flight at once at n, the function's
// ReservedConcurrentExecutions (Limit; n == 0 throttles every invocation; default, or n < 0: no
// cap but the transport's own).
func WithReservedConcurrency(n int) Option {
	return func(c *openConfig) { c.reserved = n }
}

// WithHandler sets the Go handler the example target, or no target at all, runs in this
// process (invoke/inprocess): any signature lambda.Start accepts, e.g. func(context.Context,
// events.KinesisEvent) (events.KinesisEventResponse, error).
func WithHandler(h any) Option {
	return func(c *openConfig) { c.handler = h }
}

// Open returns the invoker of target, as ParseTargets reads it: an http(s) URL of a
// Lambda-Invoke-compatible endpoint, or several separated by spaces (httpinvoke, a pool with one
// invocation in flight per endpoint); lambda:NAME_OR_ARN (lambdaapi, through WithAWS and
// WithEndpoint); exec:PATH [ARGS] (execenv: the binary in execution environments this process
// runs); example, or "", for the WithHandler handler in this process (inprocess). With
// WithReservedConcurrency the invoker is wrapped in Limit; otherwise it is the transport's own,
// so that its optional interfaces (an in-process Kinesis handler's InvokeRecords) stay visible.
//
// closeFn, never nil, ends what Open started (execution environments, idle connections); call
// it once the invoker is no longer used. Open itself starts no process and sends no request:
// execution environments start with the first invocation. An error wraps ErrInvalidTarget.
func Open(target string, opts ...Option) (inv invoke.Invoker, closeFn func() error, err error) {
	targets, err := ParseTargets([]string{target})
	if err != nil {
		return nil, nop, err
	}
	return OpenTargets(targets, opts...)
}

// OpenTargets is Open for targets already parsed (ParseTargets of several values, e.g. one
// exec: value per binary of a pool). Several exec: targets share their invocations: each goes to
// the target with the fewest in flight. No target means the WithHandler handler.
func OpenTargets(targets []Target, opts ...Option) (inv invoke.Invoker, closeFn func() error, err error) {
	c := &openConfig{env: map[string]string{}, reserved: -1}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if err := c.validate(targets); err != nil {
		return nil, nop, err
	}
	closeFn = nop
	switch {
	case len(targets) == 0 || targets[0].Example:
		inv, err = c.openInProcess(targets)
	case targets[0].Lambda != "":
		inv = c.openLambda(targets[0].Lambda)
	case targets[0].URL != "":
		inv, closeFn, err = c.openHTTP(targets)
	default:
		inv, closeFn, err = c.openExec(targets)
	}
	if err != nil {
		return nil, closeFn, err
	}
	return invoke.Limit(inv, c.reserved), closeFn, nil
}

func nop() error { return nil }

// validate checks the targets together and the options that can be wrong.
func (c *openConfig) validate(targets []Target) error {
	if err := checkPool(targets); err != nil {
		return err
	}
	for _, name := range c.passEnv {
		if name == "" || strings.ContainsAny(name, "= \x00") {
			return invalid(fmt.Errorf("pass-env %q: want the name of a variable", name))
		}
	}
	return nil
}

// openInProcess is the invoker of the WithHandler handler.
func (c *openConfig) openInProcess(targets []Target) (invoke.Invoker, error) {
	if c.handler == nil {
		if len(targets) == 0 {
			return nil, invalid(errors.New("no target, and no Go handler to run in process (WithHandler)"))
		}
		return nil, invalid(fmt.Errorf("%s: no Go handler to run in process (WithHandler)", targets[0]))
	}
	return inprocess.New(c.handler, inprocess.WithFunctionARN(c.functionARN), inprocess.WithTimeout(c.timeout),
		inprocess.WithLogger(c.log)), nil
}

// openLambda is the invoker of function through the Lambda API.
func (c *openConfig) openLambda(function string) invoke.Invoker {
	cfg := c.aws
	if c.endpoint != "" {
		cfg.BaseEndpoint = aws.String(c.endpoint)
	}
	return lambdaapi.New(awslambda.NewFromConfig(cfg), function)
}

// openHTTP is the invoker of a pool of endpoints.
func (c *openConfig) openHTTP(targets []Target) (invoke.Invoker, func() error, error) {
	urls := make([]string, len(targets))
	for i, t := range targets {
		urls[i] = t.URL
	}
	h, err := httpinvoke.New(urls, httpinvoke.WithFunctionTimeout(c.timeout), httpinvoke.WithLogger(c.log))
	if err != nil {
		return nil, nop, invalid(fmt.Errorf("%s: %w", strings.Join(urls, " "), err))
	}
	return h, func() error { h.CloseIdleConnections(); return nil }, nil
}

// openExec is the invoker of function binaries run in execution environments: one pool per
// target.
func (c *openConfig) openExec(targets []Target) (invoke.Invoker, func() error, error) {
	// The functions run as this process's user: keep them out of its environment and memory.
	if err := execenv.ProtectHost(); err != nil && c.log != nil {
		c.log.Warn("execution environments: esm's environment stays readable by its user's processes", "error", err)
	}
	pools := make([]*execenv.Pool, 0, len(targets))
	closeFn := func() error {
		for _, p := range pools {
			_ = p.Close()
		}
		return nil
	}
	opts := c.execOptions()
	for _, t := range targets {
		p, err := execenv.New(t.Exec, opts...)
		if err != nil {
			return nil, closeFn, invalid(fmt.Errorf("%s: %w", t, err))
		}
		pools = append(pools, p)
	}
	if len(pools) == 1 {
		return pools[0], closeFn, nil
	}
	invokers := make([]invoke.Invoker, len(pools))
	for i, p := range pools {
		invokers[i] = p
	}
	return newLeastBusy(invokers), closeFn, nil
}

// execOptions are the execution environments' options.
func (c *openConfig) execOptions() []execenv.Option {
	opts := []execenv.Option{
		execenv.WithTimeout(c.timeout), execenv.WithRegion(c.region), execenv.WithMaxEnvironments(c.maxEnvs),
		execenv.WithOutput(c.output), execenv.WithLogger(c.log), execenv.WithFunction(c.functionName, c.functionARN),
		execenv.WithMemorySize(c.memoryMB), execenv.WithHandler(c.handlerName), execenv.WithEnvironment(c.env),
		execenv.WithPassEnv(c.passEnv...),
	}
	if p := c.credentials; p != nil {
		opts = append(opts, execenv.WithCredentials(func(ctx context.Context) (execenv.Credentials, error) {
			cr, err := p.Retrieve(ctx)
			if err != nil {
				return execenv.Credentials{}, err
			}
			return execenv.Credentials{AccessKeyID: cr.AccessKeyID, SecretAccessKey: cr.SecretAccessKey, SessionToken: cr.SessionToken}, nil
		}))
	}
	return opts
}

// leastBusy spreads invocations over several invokers (exec: pools): each goes to the one with
// the fewest invocations in flight, the first of them on a tie.
type leastBusy struct {
	pools    []invoke.Invoker
	inFlight []atomic.Int64
}

func newLeastBusy(pools []invoke.Invoker) *leastBusy {
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
