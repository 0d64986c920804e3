// Package inproc runs esm with a Go handler in this process: the mapping of template.yaml (or of
// a stream), configured by typed options, the handler called through aws-lambda-go as Lambda
// would call it. Use it to embed esm in a program or a test; a function's main package uses
// handler.Start, which links none of this into the Lambda binary.
//
// The handler sees the template's environment variables (those not already set in the process's
// environment) and a context with Lambda's deadline and lambdacontext. The flags of "esm run" and
// its ESM_* environment variables are the esm command's: Run reads neither. So are its metrics
// endpoint, its EMF lines and its tracing from the OTEL_* variables; WithHooks takes what a
// program builds of them (package metrics/prom, metrics/emf, tracing).
package inproc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesis-esm/esm/internal/logdedup"
	"github.com/kinesis-esm/esm/internal/procenv"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
	"github.com/kinesis-esm/esm/sam"
)

// Option configures Run. A nil Option is ignored.
type Option func(*options)

type options struct {
	stderr           io.Writer
	logger           *slog.Logger
	template         runner.Template
	region, endpoint string
	timeout          *time.Duration
	err              error                  // an option given a value Lambda refuses
	settings         []func(*poller.Config) // applied in order over the template's
	poll             poller.Config          // PollInterval, PollGrid, ShardSyncInterval, ShutdownGrace, OnDestinationFailure
	store            runner.Store
	consumer         *string
	hooks            runner.Hooks
	sqsProtocol      string
	provision        bool
}

// inputNames are what the template's messages call Run's inputs.
var inputNames = map[sam.Input]string{
	sam.InputParameterOverrides: "WithParameterOverrides",
	sam.InputRegion:             "WithRegion",
	sam.InputSelector:           "WithFunction",
}

// WithTemplate reads the mapping from this SAM or CloudFormation template (default
// template.yaml; without one, WithStream runs from options alone).
func WithTemplate(path string) Option { return func(o *options) { o.template.Path = path } }

// WithFunction selects the template's mapping when it has several: a function's logical ID or
// name, <function>/<event>, or an AWS::Lambda::EventSourceMapping's logical ID.
func WithFunction(name string) Option { return func(o *options) { o.template.Function = name } }

// WithParameterOverrides gives the template's parameters (AWS::Region, AWS::AccountId and the
// other pseudo parameters too). Repeated, the later ones win.
func WithParameterOverrides(params map[string]string) Option {
	return func(o *options) {
		if o.template.ParameterOverrides == nil {
			o.template.ParameterOverrides = map[string]string{}
		}
		for k, v := range params {
			o.template.ParameterOverrides[k] = v
		}
	}
}

// WithStream reads this stream (a name or an ARN) instead of the template's.
func WithStream(stream string) Option { return func(o *options) { o.template.Stream = &stream } }

// WithFunctionName names the function in ARNs and the state key (default: the template's, else
// example).
func WithFunctionName(name string) Option {
	return func(o *options) { o.template.FunctionName = &name }
}

// WithTimeout sets the function's timeout (default: the template's, else 3s).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = &d } }

// WithEndpointURL sends every AWS call to url (a local emulator); the template's AWS::AccountId
// is then the emulators' 000000000000.
func WithEndpointURL(url string) Option { return func(o *options) { o.endpoint = url } }

// WithRegion sets the AWS region (default: the SDK's, else us-east-1).
func WithRegion(region string) Option { return func(o *options) { o.region = region } }

// WithStateDir keeps the checkpoints in dir (default .esm).
func WithStateDir(dir string) Option { return func(o *options) { o.store.StateDir = dir } }

// WithLeaseTable shares the mapping's shards with the other workers of the DynamoDB lease table
// (created when missing; WithStore says otherwise); progress then lives there.
func WithLeaseTable(table string) Option {
	return func(o *options) { o.store.LeaseTable, o.store.CreateLeaseTable = table, true }
}

// WithWorkerID names this worker in the lease table, unique among its workers (default
// hostname-pid).
func WithWorkerID(id string) Option { return func(o *options) { o.store.WorkerID = id } }

// WithLeaseDuration sets how long a worker's lease lasts without renewal (default 10s); renewed
// every third of it. The same for every worker of a table.
func WithLeaseDuration(d time.Duration) Option {
	return func(o *options) { o.store.LeaseDuration = d }
}

// WithStore sets where the mapping's progress lives as a whole (see runner.Store), e.g. a lease
// table that must exist already.
func WithStore(s runner.Store) Option { return func(o *options) { o.store = s } }

// setting sets one of Lambda's settings over the template's, in the order of the options.
func setting(set func(*poller.Config)) Option {
	return func(o *options) { o.settings = append(o.settings, set) }
}

// WithStartingPosition sets the starting position: TRIM_HORIZON, LATEST or AT_TIMESTAMP.
func WithStartingPosition(p string) Option {
	return setting(func(c *poller.Config) { c.StartingPosition, c.StartingPositionTimestamp = p, time.Time{} })
}

// WithStartingPositionTimestamp sets the time AT_TIMESTAMP starts from.
func WithStartingPositionTimestamp(t time.Time) Option {
	return setting(func(c *poller.Config) { c.StartingPositionTimestamp = t })
}

// WithBatchSize sets the most records in one invocation, 1–10000 (0 is refused, as Lambda
// refuses it).
func WithBatchSize(n int) Option {
	return func(o *options) {
		if n == 0 {
			o.err = poller.RangeError("batchSize", 0, 1, poller.MaxBatchSize)
		}
		o.settings = append(o.settings, func(c *poller.Config) { c.BatchSize = n })
	}
}

// WithMaximumBatchingWindow sets how many seconds records are gathered before an invocation,
// 0–300.
func WithMaximumBatchingWindow(seconds int) Option {
	return setting(func(c *poller.Config) { c.MaximumBatchingWindow = time.Duration(seconds) * time.Second })
}

// WithEnabled polls the stream, or, false, pauses the mapping (default: the template's Enabled).
func WithEnabled(enabled bool) Option {
	return setting(func(c *poller.Config) { c.Disabled = !enabled })
}

// WithPollInterval sets the pause between polls of a caught-up shard (default 1s).
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.poll.PollInterval = d } }

// WithPollGrid makes the polls of caught-up shards start on multiples of d, so that the process
// wakes once for many shards (default 50ms, or the poll interval when shorter; at most the poll
// interval).
func WithPollGrid(d time.Duration) Option { return func(o *options) { o.poll.PollGrid = d } }

// WithShardSyncInterval sets how often the shards are listed to find new ones (default 60s).
func WithShardSyncInterval(d time.Duration) Option {
	return func(o *options) { o.poll.ShardSyncInterval = d }
}

// WithShutdownGrace sets how long a stop waits for in-flight invocations (default 30s).
func WithShutdownGrace(d time.Duration) Option {
	return func(o *options) { o.poll.ShutdownGrace = d }
}

// WithOnDestinationFailure says what a shard does when its on-failure destination cannot take a
// record: poller.DestinationFailureBlock (the default) or poller.DestinationFailureDrop.
func WithOnDestinationFailure(what string) Option {
	return func(o *options) { o.poll.OnDestinationFailure = what }
}

// WithSQSProtocol sets the protocol of an SQS on-failure destination: "json" (the default) or
// "query" (goaws).
func WithSQSProtocol(p string) Option { return func(o *options) { o.sqsProtocol = p } }

// WithRegisterConsumer reads through the stream's enhanced fan-out consumer name, registered when
// it does not exist and waited for until it is ACTIVE.
func WithRegisterConsumer(name string) Option { return func(o *options) { o.consumer = &name } }

// WithProvision creates the template's stream (its AWS::Kinesis::Stream, with its ShardCount) on
// the WithEndpointURL emulator when it does not exist, and registers the template's consumer
// when it declares one (see runner.TemplateMapping.Provision).
func WithProvision() Option { return func(o *options) { o.provision = true } }

// WithHooks watches the run (see runner.Hooks): metrics (Observer, OnUUID), tracing (Tracer),
// readiness, BlockedAfter. Its Logger, when set, is the one WithLogger sets.
func WithHooks(h runner.Hooks) Option { return func(o *options) { o.hooks = h } }

// WithLogger sets the logger (default: text on WithStderr's writer, at info).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithStderr sets where the default logger writes (default, or nil: os.Stderr).
func WithStderr(w io.Writer) Option {
	return func(o *options) {
		if w != nil {
			o.stderr = w
		}
	}
}

// Run runs the mapping with fn in-process until ctx ends; it returns nil after a clean stop.
// Configuration errors wrap poller.ErrInvalidConfig. It never calls lambda.Start: use it to embed
// esm in a program or a test.
func Run(ctx context.Context, fn any, opts ...Option) error {
	o := options{stderr: os.Stderr}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if fn == nil {
		return &poller.ValidationError{Field: "Handler", Message: "handler: no function given"}
	}
	logger := cmp.Or(o.logger, o.hooks.Logger)
	if logger == nil {
		// Repeated identical warnings and errors (a shard retrying the same failure) are logged
		// once per window, with a count.
		logger = slog.New(logdedup.New(slog.NewTextHandler(o.stderr, nil), logdedup.DefaultWindow))
	}
	cfg, err := runner.AWSConfig(ctx, o.region, o.endpoint)
	if err != nil {
		return err
	}
	tm, err := o.mapping(ctx, cfg, logger)
	if err != nil {
		return err
	}
	if tm.Template != nil { // fn is this program's function: the template's environment is its
		if err := procenv.Set(tm.Template.Function.Environment); err != nil {
			return err
		}
	}
	tm.Mapping.Function.Handler = fn
	if err := o.provisionStream(ctx, cfg, tm, logger); err != nil {
		return err
	}
	for _, w := range tm.Warnings {
		logger.Warn("template", "warning", w)
	}
	if tm.Template != nil {
		logger.Info("mapping from template", "mapping", tm.Template.ID, "function", tm.Mapping.Function.Name, "stream", tm.Mapping.Source.Stream)
	}
	r, err := runner.New(cfg, runner.WithLogger(logger), runner.WithSQSProtocol(o.sqsProtocol))
	if err != nil {
		return err
	}
	return r.Run(ctx, tm.Mapping)
}

// mapping is the mapping the options describe: the template's (or the stream's), with the
// options over it.
func (o *options) mapping(ctx context.Context, cfg aws.Config, logger *slog.Logger) (*runner.TemplateMapping, error) {
	t := o.template
	t.EndpointURL, t.LookupAccount, t.InputNames = o.endpoint, true, inputNames
	tm, err := t.Mapping(ctx, cfg)
	switch {
	case errors.Is(err, runner.ErrNoTemplate) && t.Stream == nil:
		return nil, &poller.ValidationError{Field: "Template", Err: err, Message: fmt.Sprintf(
			"no %s here: give WithTemplate(FILE), or WithStream(NAME) to run without a template", cmp.Or(t.Path, runner.DefaultTemplate))}
	case errors.Is(err, runner.ErrNoTemplate):
		return nil, &poller.ValidationError{Field: "Template", Err: err, Message: "WithFunction selects a mapping of a template, and there is none: give WithTemplate(FILE)"}
	case err != nil:
		return nil, err
	}
	m := &tm.Mapping
	if o.timeout != nil {
		m.Function.Timeout = *o.timeout
	}
	if o.err != nil {
		return nil, o.err
	}
	for _, set := range o.settings {
		set(&m.Config)
	}
	m.Config.PollInterval, m.Config.PollGrid, m.Config.ShardSyncInterval, m.Config.ShutdownGrace = o.poll.PollInterval, o.poll.PollGrid, o.poll.ShardSyncInterval, o.poll.ShutdownGrace
	m.Config.OnDestinationFailure = o.poll.OnDestinationFailure
	if o.store.LeaseDuration < 0 {
		return nil, &poller.ValidationError{Field: "LeaseDuration", Message: fmt.Sprintf("WithLeaseDuration %s: must be positive", o.store.LeaseDuration)}
	}
	if o.hooks.BlockedAfter < 0 {
		return nil, &poller.ValidationError{Field: "BlockedAfter", Message: fmt.Sprintf("BlockedAfter %s: must be positive", o.hooks.BlockedAfter)}
	}
	m.Store = o.store
	if o.consumer != nil {
		m.Source.Consumer, m.Source.RegisterConsumer = *o.consumer, true
	}
	m.Hooks = o.hooks
	m.Hooks.Logger = logger
	return tm, nil
}

// provisionStream creates the template's stream on the emulator, with WithProvision.
func (o *options) provisionStream(ctx context.Context, cfg aws.Config, tm *runner.TemplateMapping, logger *slog.Logger) error {
	if !o.provision {
		return nil
	}
	if o.endpoint == "" {
		return &poller.ValidationError{Field: "Provision", Message: "WithProvision creates streams on emulators only: give WithEndpointURL"}
	}
	created, err := tm.Provision(ctx, cfg)
	if created {
		logger.Info("stream created", "stream", tm.Mapping.Source.Stream, "resource", tm.Template.Stream.LogicalID, "endpoint", o.endpoint)
	}
	return err
}
