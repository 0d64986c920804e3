// Package handler starts a Lambda handler written with the aws-lambda-go signature, e.g.
//
//	func handle(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error)
//
// wherever it runs. Inside Lambda (AWS_LAMBDA_RUNTIME_API set) Start is lambda.Start. Anywhere
// else Start runs esm with the handler in-process: it reads the Kinesis mapping from template.yaml
// (the same file that deploys the function), the flags of "esm run" given to the program and the
// ESM_* environment variables, polls the stream and invokes the handler as Lambda would. So the
// same main package runs on a laptop against local emulators (go run . --endpoint-url ...), in a
// container, and on Lambda, unchanged.
//
// Outside Lambda the handler sees the template's environment variables (those not already set in
// the process's environment) and a context with Lambda's deadline and lambdacontext.
package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/kinesis-esm/esm/internal/cli"
)

// runtimeAPIEnv is set by Lambda (and by aws-lambda-rie) for the function's process.
const runtimeAPIEnv = "AWS_LAMBDA_RUNTIME_API"

// Start runs fn and does not return. Inside Lambda it is lambda.Start(fn). Elsewhere it runs the
// template's Kinesis mapping with fn in-process until SIGINT or SIGTERM, reading the program's
// arguments as esm run's flags (--help lists them), then exits: 0 after a clean stop, 2 for
// invalid configuration, 1 for a runtime failure, with the error on one line of stderr.
func Start(fn any) {
	if os.Getenv(runtimeAPIEnv) != "" {
		lambda.Start(fn)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, fn, WithArgs(os.Args[1:]...))
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "esm:", cli.OneLine(err))
	}
	os.Exit(cli.ExitCode(err))
}

// Option configures Run.
type Option interface{ apply(*options) }

type options struct {
	args   []string
	stderr io.Writer
	name   string
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithArgs gives Run the flags of esm run, e.g. "--endpoint-url", "http://127.0.0.1:4568"
// (default: none, so template.yaml in the working directory and the ESM_* environment).
func WithArgs(args ...string) Option { return optionFunc(func(o *options) { o.args = args }) }

// WithStderr sets where the logs (and --help) go (default os.Stderr).
func WithStderr(w io.Writer) Option { return optionFunc(func(o *options) { o.stderr = w }) }

// Run runs the mapping with fn in-process until ctx ends; it returns nil after a clean stop (and
// after --help printed the usage).
// Configuration errors wrap poller.ErrInvalidConfig. It never calls lambda.Start: use it to embed
// esm in a program or a test.
func Run(ctx context.Context, fn any, opts ...Option) error {
	o := options{stderr: os.Stderr, name: "handler"}
	if len(os.Args) > 0 {
		o.name = filepath.Base(os.Args[0])
	}
	for _, opt := range opts {
		opt.apply(&o)
	}
	if fn == nil {
		return cli.Usage(errors.New("handler: no function given"))
	}
	var flags cli.RunFlags
	helped := false
	parser, err := kong.New(&flags, kong.Name(o.name),
		kong.Description("Runs this Lambda handler locally behind esm's Kinesis event source mapping. Inside Lambda it is lambda.Start."),
		kong.Writers(o.stderr, o.stderr), kong.Exit(func(int) { helped = true }))
	if err != nil {
		return fmt.Errorf("handler: flags: %w", err)
	}
	if _, err := parser.Parse(o.args); helped { // --help printed the usage
		return nil
	} else if err != nil {
		return cli.Usage(err)
	}
	if len(flags.Invoke) > 0 {
		return cli.Usage(errors.New("--invoke: a handler started with handler.Start or Run is invoked in-process; use the esm command to invoke other targets"))
	}
	c, err := flags.Load(ctx, o.stderr)
	if err != nil {
		return err
	}
	return cli.Run(ctx, c, fn)
}
