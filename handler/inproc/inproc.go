// Package inproc runs esm with a Go handler in this process: the mapping of template.yaml, the
// flags of "esm run" and the ESM_* environment variables, the handler called through
// aws-lambda-go as Lambda would call it. Use it to embed esm in a program or a test; a function's
// main package uses handler.Start, which links none of this into the Lambda binary.
//
// The handler sees the template's environment variables (those not already set in the process's
// environment) and a context with Lambda's deadline and lambdacontext.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/alecthomas/kong"

	"github.com/kinesis-esm/esm/internal/cli"
)

// Option configures Run. A nil Option is ignored.
type Option func(*options)

type options struct {
	args           []string
	stderr, stdout io.Writer
	name           string
	set            []func(*cli.RunFlags) // the typed options, applied over the flags
}

// WithArgs gives Run the flags of esm run, e.g. "--endpoint-url", "http://127.0.0.1:4568"
// (default: none, so template.yaml in the working directory and the ESM_* environment). The
// typed options below override the flags they set.
func WithArgs(args ...string) Option { return func(o *options) { o.args = args } }

func set(f func(*cli.RunFlags)) Option { return func(o *options) { o.set = append(o.set, f) } }

// WithTemplate reads the mapping from this SAM or CloudFormation template (default
// template.yaml; without one, WithStream runs from options alone).
func WithTemplate(path string) Option { return set(func(f *cli.RunFlags) { f.Template = path }) }

// WithFunction selects the template's mapping when it has several: a function's logical ID or
// name, <function>/<event>, or an AWS::Lambda::EventSourceMapping's logical ID.
func WithFunction(name string) Option { return set(func(f *cli.RunFlags) { f.Function = name }) }

// WithStream reads this stream (a name or an ARN) instead of the template's.
func WithStream(stream string) Option { return set(func(f *cli.RunFlags) { f.Stream = &stream }) }

// WithFunctionName names the function in ARNs and the state key (default: the template's, else
// example).
func WithFunctionName(name string) Option {
	return set(func(f *cli.RunFlags) { f.FunctionName = &name })
}

// WithEndpointURL sends every AWS call to url (a local emulator).
func WithEndpointURL(url string) Option { return set(func(f *cli.RunFlags) { f.EndpointURL = url }) }

// WithRegion sets the AWS region (default: the SDK's, else us-east-1).
func WithRegion(region string) Option { return set(func(f *cli.RunFlags) { f.Region = region }) }

// WithStateDir keeps the checkpoints in dir (default .esm).
func WithStateDir(dir string) Option { return set(func(f *cli.RunFlags) { f.StateDir = dir }) }

// WithLeaseTable shares the mapping's shards with the other workers of the DynamoDB lease table
// (created when missing); progress then lives there.
func WithLeaseTable(table string) Option {
	return set(func(f *cli.RunFlags) { f.LeaseTable, f.CreateLeaseTable = table, true })
}

// WithStartingPosition sets the starting position: TRIM_HORIZON, LATEST or AT_TIMESTAMP.
func WithStartingPosition(p string) Option {
	return set(func(f *cli.RunFlags) { f.StartingPosition = &p })
}

// WithBatchSize sets the most records in one invocation, 1–10000.
func WithBatchSize(n int) Option { return set(func(f *cli.RunFlags) { f.BatchSize = &n }) }

// WithStdout sets where the metrics' EMF lines go (default, or nil: os.Stdout).
func WithStdout(w io.Writer) Option {
	return func(o *options) {
		if w != nil {
			o.stdout = w
		}
	}
}

// WithStderr sets where the logs (and --help) go (default, or nil: os.Stderr).
func WithStderr(w io.Writer) Option {
	return func(o *options) {
		if w != nil {
			o.stderr = w
		}
	}
}

// Run runs the mapping with fn in-process until ctx ends; it returns nil after a clean stop (and
// after --help printed the usage).
// Configuration errors wrap poller.ErrInvalidConfig. It never calls lambda.Start: use it to embed
// esm in a program or a test.
func Run(ctx context.Context, fn any, opts ...Option) error {
	o := options{stderr: os.Stderr, stdout: os.Stdout, name: "handler"}
	if len(os.Args) > 0 {
		o.name = filepath.Base(os.Args[0])
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
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
	for _, f := range o.set {
		f(&flags)
	}
	if len(flags.Invoke) > 0 {
		return cli.Usage(errors.New("--invoke: a handler given to Run is invoked in-process; use the esm command to invoke other targets"))
	}
	c, err := flags.Load(ctx, o.stderr)
	if err != nil {
		return err
	}
	return cli.Run(ctx, c, fn, o.stdout)
}
