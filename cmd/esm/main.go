// Command esm runs an AWS Lambda Kinesis event source mapping outside AWS: it reads every shard
// of a stream in lineage order and invokes a function with Lambda's events and semantics. The
// mapping comes from the SAM template that deploys the function (template.yaml), flags and ESM_*
// environment variables.
//
// Commands: run, serve, validate, invoke, generate-event, status, redrive, skip, version.
//
// Exit codes: 0 after a clean stop, 2 for invalid configuration or usage, 1 for a runtime failure;
// esm run --until-caught-up adds 3 (records went to the on-failure destination), 4 (records were
// dropped) and 5 (stopped by a signal before caught up). Errors are one line on stderr.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/kinesis-esm/esm/cmd/esm/internal/cli"
	"github.com/kinesis-esm/esm/example"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type runCmd struct {
	cli.RunFlags      `embed:""`
	cli.CaughtUpFlags `embed:""`
}

type versionCmd struct{}

type app struct {
	Run           runCmd      `cmd:"" help:"Run the mapping: read every shard of the stream and invoke the function that --invoke names."`
	Serve         serveCmd    `cmd:"" help:"Serve Lambda's event source mapping API (aws lambda create-event-source-mapping ...) and run every mapping created through it."`
	Validate      validateCmd `cmd:"" help:"Check a template and print its resolved Kinesis mappings."`
	Invoke        invokeCmd   `cmd:"" help:"Invoke the function once with an event, like sam local invoke, and print its response."`
	GenerateEvent generateCmd `cmd:"" name:"generate-event" help:"Print a Kinesis event for the given records, as esm would send it."`
	Status        statusCmd   `cmd:"" help:"Show the mapping's shards as a lineage tree, with their state and checkpoint."`
	Redrive       redriveCmd  `cmd:"" help:"Bring the records the mapping gave up on back from its on-failure destination: invoke the function with them again, as Lambda would have."`
	Skip          skipCmd     `cmd:"" help:"Send a blocked shard's batch to the on-failure destination now (dropped without one) and move the shard on, in a running esm (esm's operator tool)."`
	Rewind        rewindCmd   `cmd:"" help:"Move the mapping's position back, to a time or a sequence number, or replay a window of records, while its workers run on a lease table (esm's operator tool)."`
	Version       versionCmd  `cmd:"" help:"Print the version."`
}

// env is what a command needs from the process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func main() {
	os.Exit(run(os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}))
}

func run(args []string, e env) int {
	var a app
	helped := false
	parser, err := kong.New(&a, kong.Name("esm"),
		kong.Description("Lambda's Kinesis event source mapping, outside AWS. Every flag is also an ESM_<NAME> environment variable."),
		kong.Writers(e.stdout, e.stderr), kong.Exit(func(int) { helped = true }))
	if err != nil {
		fmt.Fprintln(e.stderr, "esm:", err)
		return 1
	}
	kctx, err := parser.Parse(args)
	if helped {
		return 0
	}
	if err != nil {
		fmt.Fprintln(e.stderr, "esm:", cli.OneLine(err))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	commands := map[string]func(context.Context, env) error{
		"run": a.Run.run, "serve": a.Serve.run, "validate": a.Validate.run, "invoke": a.Invoke.run,
		"generate-event": a.GenerateEvent.run, "status": a.Status.run, "redrive": a.Redrive.run, "skip": a.Skip.run,
		"rewind":  a.Rewind.run,
		"version": func(context.Context, env) error { _, err := fmt.Fprintln(e.stdout, "esm", version); return err },
	}
	switch name := kctx.Command(); {
	case commands[name] == nil:
		err = cli.Usage(fmt.Errorf("unknown command %q", name))
	case name == "run" || name == "serve": // a stop signal ends them cleanly
		err = cli.Stopped(ctx, commands[name](ctx, e))
	default:
		err = commands[name](ctx, e)
	}
	if err != nil {
		fmt.Fprintln(e.stderr, "esm:", cli.OneLine(err))
	}
	return cli.ExitCode(err)
}

func (r *runCmd) run(ctx context.Context, e env) error {
	c, err := r.Load(ctx, e.stderr, example.HandleTo(e.stdout)) // the function of --invoke example
	if err != nil {
		return err
	}
	return cli.RunUntilCaughtUp(ctx, c, r.CaughtUpFlags, nil, e.stdout)
}
