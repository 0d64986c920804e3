package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/kinesis-esm/esm/cmd/esm/internal/cli"
	"github.com/kinesis-esm/esm/dlq"
	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/redrive"
)

type redriveCmd struct {
	cli.TemplateFlags `embed:""`
	cli.MappingFlags  `embed:""`

	QueueURL string `name:"queue-url" xor:"source" help:"Read the on-failure messages from this SQS queue (default: the mapping's on-failure destination). A message is deleted once its records were redriven." env:"ESM_QUEUE_URL" placeholder:"URL"`
	Bucket   string `xor:"source" help:"Read the on-failure objects of this S3 bucket (default: the mapping's, when it is a bucket); each carries its payload. An object is deleted once redriven." env:"ESM_BUCKET" placeholder:"NAME"`
	Prefix   string `help:"Only the objects under this key prefix (Lambda writes aws/lambda/<mapping UUID>/<shard>/...)." default:"aws/lambda/" env:"ESM_PREFIX"`
	From     string `xor:"source" help:"Read the on-failure messages from this file (one JSON message a line, an array, or an SQS ReceiveMessage response; - for stdin). The messages redriven are removed from the file." env:"ESM_FROM" placeholder:"FILE"`
	To       string `help:"Write the records as JSON lines (each as the function would receive it in Records) to this file (- for stdout) instead of invoking; messages are kept." env:"ESM_TO" placeholder:"FILE"`
	DryRun   bool   `help:"Show what a redrive would do: read every message and its records, invoke, write and delete nothing." env:"ESM_DRY_RUN"`

	cli.LogFlags `embed:""`
}

// run redrives the mapping's failed records and exits 0 when every message was redriven (or,
// with --to, exported; with --dry-run, could be), 1 otherwise.
func (r *redriveCmd) run(ctx context.Context, e env) error {
	c, err := r.LoadMapping(ctx, r.MappingFlags, r.LogFlags, e.stderr)
	if err != nil {
		return err
	}
	origin, err := redrive.Pick(r.From, r.QueueURL, r.Bucket, c.Run.Config.OnFailureDestination)
	switch {
	case errors.Is(err, redrive.ErrNoDestination):
		return cli.Usage(fmt.Errorf("%w: pass --queue-url, --bucket or --from", err))
	case errors.Is(err, redrive.ErrUnreadable):
		return cli.Usage(fmt.Errorf("%w: pass --queue-url of a queue subscribed to it", err))
	case err != nil:
		return cli.Usage(err)
	}
	stream, functionARN, err := c.ResolveMapping(ctx)
	if err != nil {
		return err
	}
	src, err := redrive.Opener{
		Stdin:           e.stdin,
		SQS:             dlq.NewSQSClient(c.AWS, dlq.WithEndpointURL(r.EndpointURL), dlq.WithSQSProtocol(r.SQSProtocol)),
		S3:              dlq.NewS3Client(c.AWS, dlq.WithEndpointURL(r.EndpointURL)),
		Prefix:          r.Prefix,
		FunctionTimeout: c.Run.Function.Timeout,
	}.Open(ctx, origin)
	if err != nil {
		if origin.Kind == redrive.FromFile && origin.Target != "-" {
			return cli.Usage(fmt.Errorf("--from: %w", err))
		}
		return err
	}
	opts := []redrive.Option{redrive.WithLogger(c.Logger)}
	out := e.stdout
	switch {
	case r.DryRun:
		opts = append(opts, redrive.WithDryRun())
	case r.To == "-":
		out = e.stderr
		opts = append(opts, redrive.WithExport(e.stdout))
	case r.To != "":
		f, err := os.Create(r.To)
		if err != nil {
			return cli.Usage(fmt.Errorf("--to: %w", err))
		}
		defer f.Close()
		opts = append(opts, redrive.WithExport(f))
	default:
		// An in-process function's own output is its log: on stderr, so that stdout holds only
		// the report.
		c.Example = example.HandleTo(e.stderr) // --invoke example
		inv, closeInvoker, err := c.FunctionInvoker()
		if err != nil {
			return err
		}
		defer closeInvoker()
		opts = append(opts, redrive.WithInvoker(inv))
	}
	opts = append(opts, redrive.WithReporter(redrive.NewReporter(out)), redrive.WithFunctionARN(functionARN))
	rd, err := redrive.New(stream, c.Run.Config, opts...)
	if err != nil {
		return err
	}
	sum, err := rd.Run(ctx, src)
	return sum.Err(err)
}
