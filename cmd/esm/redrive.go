package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"golang.org/x/term"

	"github.com/kinesis-esm/esm/dlq"
	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/cli"
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
	kind, target, err := r.pick(c.Run.Config.OnFailureDestination)
	if err != nil {
		return err
	}
	kin, mc, err := c.ResolveMapping(ctx)
	if err != nil {
		return err
	}
	src, err := r.open(ctx, c, kind, target, e.stdin)
	if err != nil {
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
		c.Run.Config = mc
		c.Example = example.Handle // --invoke example
		inv, closeInvoker, err := c.FunctionInvoker()
		if err != nil {
			return err
		}
		defer closeInvoker()
		// An in-process function's own output is its log: on stderr, so that stdout holds only
		// the report.
		os.Stdout = os.Stderr
		opts = append(opts, redrive.WithInvoker(inv))
	}
	opts = append(opts, redrive.WithReporter(reporter(out)))
	rd, err := redrive.New(mc, kin, opts...)
	if err != nil {
		return err
	}
	sum, err := rd.Run(ctx, src)
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted after %d messages: the rest are kept for the next redrive", sum.Messages)
	}
	if err != nil {
		return err
	}
	if !sum.OK() {
		return fmt.Errorf("not everything was redriven: %d still failing, %d expired, %d invalid (their messages were kept)", sum.Failing, sum.Expired, sum.Invalid)
	}
	return nil
}

// reporter draws a progress bar when out is a terminal, and writes plain lines otherwise.
func reporter(out io.Writer) redrive.Reporter {
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return redrive.NewBarReporter(out)
	}
	return redrive.NewLineReporter(out)
}

// Kinds of source.
const (
	fromFile   = "file"
	fromQueue  = "queue"
	fromBucket = "bucket"
)

// pick decides where the messages come from, before anything is read: --from, --queue-url,
// --bucket, or else the mapping's on-failure destination (a queue or a bucket; a topic cannot be
// read back, and its ARN names no queue). target is the file, the queue's URL or ARN, or the bucket.
func (r *redriveCmd) pick(destination string) (kind, target string, err error) {
	switch {
	case r.From != "":
		return fromFile, r.From, nil
	case r.QueueURL != "":
		return fromQueue, r.QueueURL, nil
	case r.Bucket != "":
		return fromBucket, r.Bucket, nil
	case destination == "":
		return "", "", cli.Usage(errors.New("the mapping has no on-failure destination: pass --queue-url, --bucket or --from"))
	}
	parts := strings.SplitN(destination, ":", 6)
	switch {
	case len(parts) == 6 && parts[2] == "sqs":
		return fromQueue, destination, nil
	case len(parts) == 6 && parts[2] == "s3":
		return fromBucket, parts[5], nil
	case len(parts) == 6 && parts[2] == "sns":
		return "", "", cli.Usage(fmt.Errorf("the on-failure destination %s is an SNS topic, which cannot be read back: pass --queue-url of a queue subscribed to it", destination))
	}
	return "", "", cli.Usage(fmt.Errorf("on-failure destination %q: want an SQS queue or an S3 bucket", destination))
}

// open opens the source pick chose.
func (r *redriveCmd) open(ctx context.Context, c *cli.Config, kind, target string, stdin io.Reader) (redrive.Source, error) {
	switch kind {
	case fromFile:
		if target == "-" {
			return redrive.ReadMessages(stdin, "stdin")
		}
		f, err := redrive.ReadFile(target)
		if err != nil {
			return nil, cli.Usage(fmt.Errorf("--from: %w", err))
		}
		return f, nil
	case fromBucket:
		return redrive.ListBucket(ctx, r.s3Client(c), target, r.Prefix)
	}
	url := target
	if strings.HasPrefix(target, "arn:") {
		var err error
		if url, err = redrive.QueueURL(ctx, r.sqsClient(c), target); err != nil {
			return nil, err
		}
	}
	// A receive of ten messages stays invisible for long enough to invoke the function for each.
	return redrive.NewQueue(r.sqsClient(c), url, 10*(c.Run.Function.Timeout+10*time.Second)+time.Minute), nil
}

func (r *redriveCmd) sqsClient(c *cli.Config) *sqs.Client {
	return dlq.NewSQSClient(c.AWS, dlq.WithEndpointURL(r.EndpointURL), dlq.WithSQSProtocol(r.SQSProtocol))
}

func (r *redriveCmd) s3Client(c *cli.Config) *s3.Client {
	return dlq.NewS3Client(c.AWS, dlq.WithEndpointURL(r.EndpointURL))
}
