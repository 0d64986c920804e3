// Package cli turns esm's flags, environment variables and template into a configured mapping.
// cmd/esm and handler.Start share it, so "esm run" and a handler run with "go run ." read the same
// flags (every one also as ESM_<NAME>) and the same template.yaml, and resolve them the same way:
// flags and environment variables override the template, which overrides Lambda's defaults.
package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesis-esm/esm/internal/logdedup"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
	"github.com/kinesis-esm/esm/sam"
)

// DefaultTemplate is the template read when --template is not given.
const DefaultTemplate = runner.DefaultTemplate

// TemplateFlags select and resolve a mapping of a template.
type TemplateFlags struct {
	// Template is the SAM or CloudFormation template. Default template.yaml; when it does not
	// exist and --stream is given, esm runs from flags alone.
	Template string `help:"SAM or CloudFormation template with the mapping (default template.yaml; without one, --stream runs from flags alone)." env:"ESM_TEMPLATE" placeholder:"FILE"`
	// Function selects the mapping when the template has several.
	Function string `help:"Which mapping: a function's logical ID or name, <function>/<event>, or an AWS::Lambda::EventSourceMapping's logical ID." env:"ESM_FUNCTION" placeholder:"NAME"`
	// ParameterOverrides are the template's parameters, in SAM's syntax, repeatable.
	ParameterOverrides []string `help:"Template parameters in SAM's syntax: \"Key=Value Key2=Value2\" (repeatable; AWS::Region, AWS::AccountId and the other pseudo parameters too)." env:"ESM_PARAMETER_OVERRIDES" sep:"none" placeholder:"\"K=V ...\""`
	AWSFlags           `embed:""`
}

// RunFlags are the flags of "esm run" and of a handler started with handler.Start. A nil pointer
// means the flag was not given: the template's value (or Lambda's default) applies.
type RunFlags struct {
	TemplateFlags `embed:""`

	MappingFlags `embed:""`
	// MaxEnvironments caps the execution environments of exec: targets.
	MaxEnvironments int `help:"Most execution environments of an exec: target at once (they grow to the mapping's concurrency: shards x ParallelizationFactor); 0: 64." env:"ESM_MAX_ENVIRONMENTS" placeholder:"N"`
	// RegisterConsumer reads through an enhanced fan-out consumer, registered when missing.
	RegisterConsumer *string `help:"Read through the stream's enhanced fan-out consumer NAME (SubscribeToShard), registering it when it does not exist (RegisterStreamConsumer) and waiting until it is ACTIVE." env:"ESM_REGISTER_CONSUMER" placeholder:"NAME"`
	// Provision creates the template's stream on the emulator when it is missing.
	Provision bool `help:"Create the template's stream (its AWS::Kinesis::Stream, with its ShardCount) on the --endpoint-url emulator when it does not exist." env:"ESM_PROVISION"`

	StateDir         string `help:"Directory of the checkpoint store (locked while esm runs)." default:".esm" env:"ESM_STATE_DIR"`
	DestinationFlags `embed:""`

	BatchSize                 *int    `help:"Most records per invocation, 1-10000 (default: the template's, else 100)." env:"ESM_BATCH_SIZE"`
	MaximumBatchingWindow     *int    `name:"maximum-batching-window" help:"Seconds to gather records before invoking, 0-300 (default: the template's, else 0)." env:"ESM_MAXIMUM_BATCHING_WINDOW"`
	StartingPosition          *string `help:"TRIM_HORIZON, LATEST or AT_TIMESTAMP (default: the template's, else TRIM_HORIZON)." env:"ESM_STARTING_POSITION"`
	StartingPositionTimestamp *string `help:"With AT_TIMESTAMP: RFC 3339 time or Unix seconds." env:"ESM_STARTING_POSITION_TIMESTAMP"`
	Enabled                   *bool   `help:"Poll the stream (--no-enabled pauses the mapping; default: the template's Enabled)." negatable:"" env:"ESM_ENABLED"`

	PollFlags `embed:""`

	LeaseTable       string        `help:"DynamoDB lease table shared by the workers of this mapping (one table per mapping); progress then lives there, not in --state-dir." env:"ESM_LEASE_TABLE" placeholder:"NAME"`
	CreateLeaseTable bool          `help:"Create the lease table when it does not exist (--no-create-lease-table: fail instead)." default:"true" negatable:"" env:"ESM_CREATE_LEASE_TABLE"`
	WorkerID         string        `help:"This worker's id in the lease table, unique among its workers (default: hostname-pid)." env:"ESM_WORKER_ID" placeholder:"ID"`
	LeaseDuration    time.Duration `help:"How long a worker's lease lasts without renewal; renewed every third of it. The same for every worker of a table." default:"10s" env:"ESM_LEASE_DURATION"`

	ObserveFlags `embed:""`

	LogFlags `embed:""`
}

// DestinationFlags say what a shard does when its on-failure destination cannot be reached, the
// same for esm run and esm serve.
type DestinationFlags struct {
	OnDestinationFailure string `help:"When the on-failure destination cannot take a record: block (retry, holding the shard; nothing is lost) or drop (drop the records and move on, as Lambda does). Each failed send counts in DestinationDeliveryFailures." default:"block" enum:"block,drop" env:"ESM_ON_DESTINATION_FAILURE"`
}

// ObserveFlags say where the mappings' metrics go, the same for esm run and esm serve.
type ObserveFlags struct {
	MetricsAddr string `help:"Serve Prometheus metrics (/metrics) and health checks (/healthz, /readyz) at this address; off unless set. A bare :PORT binds 127.0.0.1. With esm serve every mapping's series carry its uuid." env:"ESM_METRICS_ADDR" placeholder:"HOST:PORT"`
	EMF         bool   `help:"Also write the metrics as CloudWatch embedded-metric-format lines on stdout, once a minute (one set per mapping)." env:"ESM_EMF"`
	// BlockedAfter: zero is poller.DefaultBlockedAfter.
	BlockedAfter time.Duration `help:"Report a shard as blocked (esm_shard_blocked, and a warning naming the shard and the cause) once it has been on the same batch this long, retrying it or waiting for one invocation (default 1m)." env:"ESM_BLOCKED_AFTER"`
}

// blockedAfter is --blocked-after, refused when negative.
func (f ObserveFlags) blockedAfter() (time.Duration, error) {
	if f.BlockedAfter < 0 {
		return 0, Usage(fmt.Errorf("--blocked-after %s: must be positive", f.BlockedAfter))
	}
	return f.BlockedAfter, nil
}

// metricsAddr is --metrics-addr with a bare :PORT bound to 127.0.0.1.
func (f ObserveFlags) metricsAddr() string {
	if strings.HasPrefix(f.MetricsAddr, ":") {
		return "127.0.0.1" + f.MetricsAddr
	}
	return f.MetricsAddr
}

// LogFlags configure the structured log on stderr.
type LogFlags struct {
	LogFormat string `help:"text or json." default:"text" enum:"text,json" env:"ESM_LOG_FORMAT"`
	LogLevel  string `help:"debug, info, warn or error." default:"info" enum:"debug,info,warn,error" env:"ESM_LOG_LEVEL"`
}

// Logger returns the logger the flags describe, writing to w.
func (f LogFlags) Logger(w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(f.LogLevel)); err != nil {
		return nil, Usage(fmt.Errorf("--log-level %q: %w", f.LogLevel, err))
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if f.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	// Repeated identical warnings and errors (a shard retrying the same failure) are logged once
	// per window, with a count.
	return slog.New(logdedup.New(h, logdedup.DefaultWindow)), nil
}

// Usage marks err as a usage or configuration error: exit code 2.
func Usage(err error) error { return &usageError{err} }

type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// ExitCode is the process exit code for err: 0 for nil, 2 for invalid configuration or usage, the
// verdicts of --until-caught-up (ExitDelivered, ExitDropped, ExitNotCaughtUp), 1 for anything
// else (a runtime failure).
func ExitCode(err error) int {
	var (
		ue *usageError
		ee *exitError
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue), errors.Is(err, poller.ErrInvalidConfig):
		return 2
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}

// Stopped classifies how a long-running command (run, serve) ended once the stop signal may
// have come: an error that is only the cancellation of stop (the context the signal ends) is a
// clean stop, nil, whichever start-up step it interrupted (the SDK configuration, a describe or
// create of a table, provisioning, listing shards, registering a consumer, the first claims).
// Any other error, and a cancellation that the signal did not cause, is a failure as it is.
func Stopped(stop context.Context, err error) error {
	if err != nil && stop.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// OneLine renders err on one line, for stderr.
func OneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// Resolved is a template resolved with the endpoint's region and account.
type Resolved struct {
	// Template is nil when no template was read (flag-only mode).
	Template *sam.Template
	// AWS is the SDK configuration for the endpoint in use; no call has been made with it.
	AWS aws.Config
}

// template is the runner's description of the template the flags name, with stream and
// functionName (the --stream and --function-name flags, when given) overriding its mapping's.
func (f TemplateFlags) template(overrides map[string]string, lookupAccount bool, stream, functionName *string) runner.Template {
	return runner.Template{Path: f.Template, Function: f.Function, ParameterOverrides: overrides, EndpointURL: f.EndpointURL,
		LookupAccount: lookupAccount, InputNames: templateInputs, Stream: stream, FunctionName: functionName}
}

// overrides are the --parameter-overrides, merged.
func (f TemplateFlags) overrides() (map[string]string, error) {
	overrides := map[string]string{}
	for _, s := range f.ParameterOverrides {
		po, err := sam.ParseParameterOverrides(s)
		if err != nil {
			return nil, Usage(fmt.Errorf("--parameter-overrides: %w", err))
		}
		for k, v := range po {
			overrides[k] = v
		}
	}
	return overrides, nil
}

// Resolve reads the template, if there is one (runner.Template.Load): AWS::AccountId is the
// emulators' 000000000000 with an endpoint URL, and sam local's 123456789012 otherwise; with
// lookupAccount set and no endpoint URL (real AWS), the caller's account (STS
// GetCallerIdentity), unless AWS::AccountId is overridden. A template error is reported before
// any AWS call. A missing default template is not an error: Template is then nil.
func (f TemplateFlags) Resolve(ctx context.Context, lookupAccount bool) (*Resolved, error) {
	overrides, err := f.overrides()
	if err != nil {
		return nil, err
	}
	cfg, err := runner.AWSConfig(ctx, f.Region, f.EndpointURL)
	if err != nil {
		return nil, err
	}
	res := &Resolved{AWS: cfg}
	if res.Template, err = f.template(overrides, lookupAccount, nil, nil).Load(ctx, cfg); err != nil {
		return nil, err
	}
	return res, nil
}

// Config is a run's configuration: the mapping runner.Run runs, where the AWS calls go, and what
// the template says about the function.
type Config struct {
	// Run is the mapping, as runner.Run takes it (its function is filled in by Run).
	Run runner.Mapping
	// EndpointURL is --endpoint-url: where every AWS call goes ("" for AWS itself).
	EndpointURL string
	// SQSProtocol is the protocol of the SQS client of an on-failure queue.
	SQSProtocol string
	// SDKGetRecords is --sdk-getrecords: shards are read with the SDK's own GetRecords.
	SDKGetRecords bool
	// Mapping is the template's mapping; nil in flag-only mode.
	Mapping *sam.Mapping
	// Warnings are the template's (mappings esm skipped).
	Warnings []string
	// TimeoutGiven: --timeout was given (Run.Function.Timeout is then its value).
	TimeoutGiven bool
	// Invoke are the --invoke values (see ParseTargets); empty means in-process when Run is given
	// a function, and an error otherwise.
	Invoke []string
	// MaxEnvironments caps the execution environments of exec: targets (0: the default).
	MaxEnvironments int
	// FunctionEnv is what exec: functions get of esm's environment.
	FunctionEnv FunctionEnvFlags
	// Example is the function --invoke example runs in-process (nil: no such target).
	Example any
	// Provision asks Run to create the template's stream on the emulator (ProvisionStream).
	Provision bool
	// AWS is the SDK configuration for the endpoint in use.
	AWS aws.Config
	// Logger is the run's logger.
	Logger *slog.Logger
	// MetricsAddr is where /metrics, /healthz and /readyz are served; "" for none.
	MetricsAddr string
	// EMF writes CloudWatch embedded-metric-format lines on stdout.
	EMF bool
}

// Load resolves the flags, the environment and the template into a run configuration: the
// template's mapping (Target), then every flag given over it (apply); example is the function
// --invoke example runs in this process (Config.Example). It makes no AWS call except STS
// GetCallerIdentity when the template needs the account of real AWS.
func (f *RunFlags) Load(ctx context.Context, stderr io.Writer, example any) (*Config, error) {
	logger, err := f.Logger(stderr)
	if err != nil {
		return nil, err
	}
	c, err := f.Target(ctx, f.Stream, f.FunctionName, logger)
	if err != nil {
		return nil, err
	}
	if err := f.apply(c, example); err != nil {
		return nil, err
	}
	return c, nil
}

// apply sets every flag of esm run that was given over the mapping Target resolved: Lambda's
// settings, the pollers' cadence, the store, the hooks and the function's (MappingFlags, with
// example, the function of --invoke example). An explicit --batch-size 0 is refused, not taken
// for the default.
func (f *RunFlags) apply(c *Config, example any) error {
	m := &c.Run
	if m.Source.Stream == "" { // --stream "" (runner refuses it too, in the library's terms)
		return &poller.ValidationError{Field: "Stream", Message: "Stream is required: a Kinesis stream name or ARN (--stream or ESM_STREAM)"}
	}
	if f.MaxEnvironments < 0 {
		return Usage(fmt.Errorf("--max-environments %d: must be 0 or more", f.MaxEnvironments))
	}
	c.Provision, c.MaxEnvironments = f.Provision, f.MaxEnvironments
	c.MetricsAddr, c.EMF, c.SDKGetRecords = f.metricsAddr(), f.EMF, f.SDKGetRecords
	m.Store.StateDir = f.StateDir
	mc := &m.Config
	if f.BatchSize != nil {
		if *f.BatchSize == 0 {
			return poller.RangeError("batchSize", 0, 1, poller.MaxBatchSize)
		}
		mc.BatchSize = *f.BatchSize
	}
	if f.MaximumBatchingWindow != nil {
		mc.MaximumBatchingWindow = time.Duration(*f.MaximumBatchingWindow) * time.Second
	}
	if f.StartingPosition != nil {
		mc.StartingPosition, mc.StartingPositionTimestamp = *f.StartingPosition, time.Time{}
	}
	if f.StartingPositionTimestamp != nil {
		ts, err := ParseTimestamp(*f.StartingPositionTimestamp)
		if err != nil {
			return Usage(err)
		}
		mc.StartingPositionTimestamp = ts
	}
	if f.Enabled != nil {
		mc.Disabled = !*f.Enabled
	}
	mc.PollInterval, mc.PollGrid, mc.ShardSyncInterval, mc.ShutdownGrace = f.PollInterval, f.PollGrid, f.ShardSyncInterval, f.ShutdownGrace
	mc.OnDestinationFailure = f.OnDestinationFailure
	if f.LeaseDuration <= 0 {
		return Usage(fmt.Errorf("--lease-duration %s: must be positive", f.LeaseDuration))
	}
	m.Store.LeaseTable, m.Store.CreateLeaseTable, m.Store.WorkerID, m.Store.LeaseDuration = f.LeaseTable, f.CreateLeaseTable, f.WorkerID, f.LeaseDuration
	var err error
	if m.Hooks.BlockedAfter, err = f.blockedAfter(); err != nil {
		return err
	}
	if f.RegisterConsumer != nil { // --provision registers the template's consumer too (ProvisionStream)
		m.Source.Consumer, m.Source.RegisterConsumer = *f.RegisterConsumer, true
	}
	c.Example = example
	f.MappingFlags.apply(c)
	return nil
}

// Target resolves the mapping the flags name, with stream and functionName (the --stream and
// --function-name flags, when given) overriding the template's: the mapping's stream, function
// and settings as the runner takes them (runner.Template.Mapping), without the settings that only
// a run has.
func (f TemplateFlags) Target(ctx context.Context, stream, functionName *string, logger *slog.Logger) (*Config, error) {
	overrides, err := f.overrides()
	if err != nil {
		return nil, err
	}
	cfg, err := runner.AWSConfig(ctx, f.Region, f.EndpointURL)
	if err != nil {
		return nil, err
	}
	tm, err := f.template(overrides, true, stream, functionName).Mapping(ctx, cfg)
	switch {
	case errors.Is(err, runner.ErrNoTemplate) && stream == nil:
		path := cmp.Or(f.Template, DefaultTemplate)
		return nil, Usage(fmt.Errorf("no %s here: pass --template FILE, or --stream NAME to run without a template", path))
	case errors.Is(err, runner.ErrNoTemplate):
		return nil, Usage(errors.New("--function selects a mapping of a template, and there is none: pass --template FILE"))
	case err != nil:
		return nil, err
	}
	c := &Config{Logger: logger, AWS: cfg, EndpointURL: f.EndpointURL, Run: tm.Mapping, Mapping: tm.Template, Warnings: tm.Warnings}
	c.Run.Hooks.Logger = logger
	return c, nil
}

// ParseTimestamp reads an RFC 3339 time or Unix seconds (possibly fractional).
func ParseTimestamp(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)), nil
	}
	return time.Time{}, fmt.Errorf("StartingPositionTimestamp %q: want an RFC 3339 time or Unix seconds", s)
}
