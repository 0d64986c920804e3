// Command esm runs an AWS Lambda Kinesis event source mapping outside AWS: it reads every shard
// of a stream in lineage order and invokes a function with Lambda's events and semantics.
//
// Exit codes: 0 after a clean stop, 2 for invalid configuration or usage, 1 for a runtime failure.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/service"
	"github.com/kinesis-esm/esm/poller"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type runCmd struct {
	Stream                    string        `help:"Kinesis stream name or ARN." env:"ESM_STREAM" required:""`
	EndpointURL               string        `help:"Endpoint for every AWS service (a local emulator). Otherwise the SDK's AWS_ENDPOINT_URL_<SERVICE> variables apply." env:"ESM_ENDPOINT_URL"`
	Region                    string        `help:"AWS region (default: from the AWS environment, else us-east-1)." env:"ESM_REGION"`
	FunctionName              string        `help:"Function name, used in ARNs and to key checkpoints." default:"example" env:"ESM_FUNCTION_NAME"`
	Timeout                   time.Duration `help:"Function timeout." default:"3s" env:"ESM_TIMEOUT"`
	StateDir                  string        `help:"Directory of the checkpoint store (locked while esm runs)." default:".esm" env:"ESM_STATE_DIR"`
	BatchSize                 int           `help:"Most records per invocation (1-10000)." default:"100" env:"ESM_BATCH_SIZE"`
	MaximumBatchingWindow     int           `name:"maximum-batching-window" help:"Seconds to gather records before invoking (0-300)." default:"0" env:"ESM_MAXIMUM_BATCHING_WINDOW"`
	StartingPosition          string        `help:"TRIM_HORIZON, LATEST or AT_TIMESTAMP." default:"TRIM_HORIZON" env:"ESM_STARTING_POSITION"`
	StartingPositionTimestamp string        `help:"With AT_TIMESTAMP: RFC 3339 time or Unix seconds." env:"ESM_STARTING_POSITION_TIMESTAMP"`
	Enabled                   bool          `help:"Poll the stream (--no-enabled pauses the mapping)." default:"true" negatable:"" env:"ESM_ENABLED"`
	PollInterval              time.Duration `help:"Pause between polls of a caught-up shard." default:"1s" env:"ESM_POLL_INTERVAL"`
	ShardSyncInterval         time.Duration `help:"How often to list shards to find new ones." default:"60s" env:"ESM_SHARD_SYNC_INTERVAL"`
	ShutdownGrace             time.Duration `help:"How long a stop waits for in-flight invocations." default:"30s" env:"ESM_SHUTDOWN_GRACE"`
	LogFormat                 string        `help:"text or json." default:"text" enum:"text,json" env:"ESM_LOG_FORMAT"`
	LogLevel                  string        `help:"debug, info, warn or error." default:"info" enum:"debug,info,warn,error" env:"ESM_LOG_LEVEL"`
}

type versionCmd struct{}

type cli struct {
	Run     runCmd     `cmd:"" help:"Run the mapping with the example function in-process."`
	Version versionCmd `cmd:"" help:"Print the version."`
}

// exitError carries an exit code to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	var c cli
	helped := false
	parser, err := kong.New(&c, kong.Name("esm"),
		kong.Description("Lambda's Kinesis event source mapping, outside AWS."),
		kong.Writers(stdout, stderr), kong.Exit(func(int) { helped = true }))
	if err != nil {
		fmt.Fprintln(stderr, "esm:", err)
		return 1
	}
	kctx, err := parser.Parse(args)
	if helped {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "esm:", err)
		return 2
	}
	switch kctx.Command() {
	case "version":
		fmt.Fprintln(stdout, "esm", version)
		return 0
	case "run":
		err = c.Run.run(stderr)
	default:
		err = fmt.Errorf("unknown command %q", kctx.Command())
	}
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "esm:", strings.ReplaceAll(err.Error(), "\n", " "))
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, poller.ErrInvalidConfig) {
		return 2
	}
	return 1
}

func (r *runCmd) run(stderr io.Writer) error {
	logger, err := newLogger(stderr, r.LogFormat, r.LogLevel)
	if err != nil {
		return &exitError{2, err}
	}
	mc := poller.Config{
		BatchSize:             r.BatchSize,
		MaximumBatchingWindow: time.Duration(r.MaximumBatchingWindow) * time.Second,
		StartingPosition:      r.StartingPosition,
		Disabled:              !r.Enabled,
		PollInterval:          r.PollInterval,
		ShardSyncInterval:     r.ShardSyncInterval,
		ShutdownGrace:         r.ShutdownGrace,
	}
	if r.BatchSize == 0 { // an explicit 0 is out of range, not "the default"
		return poller.RangeError("batchSize", 0, 1, poller.MaxBatchSize)
	}
	if r.StartingPositionTimestamp != "" {
		ts, err := parseTimestamp(r.StartingPositionTimestamp)
		if err != nil {
			return &exitError{2, err}
		}
		mc.StartingPositionTimestamp = ts
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return service.Run(ctx, service.Options{
		Stream:          r.Stream,
		EndpointURL:     r.EndpointURL,
		Region:          r.Region,
		StateDir:        r.StateDir,
		FunctionName:    r.FunctionName,
		FunctionTimeout: r.Timeout,
		Mapping:         mc,
		Logger:          logger,
	}, example.Handle)
}

func parseTimestamp(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)), nil
	}
	return time.Time{}, fmt.Errorf("StartingPositionTimestamp %q: want an RFC 3339 time or Unix seconds", s)
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
