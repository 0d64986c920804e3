package inproc_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/handler/inproc"
)

func handle(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
	for _, r := range e.Records {
		fmt.Printf("%s: %s\n", r.Kinesis.PartitionKey, r.Kinesis.Data)
	}
	return events.KinesisEventResponse{}, nil
}

// Run embeds the mapping in a program of its own, stopped by its context.
func ExampleRun() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := inproc.Run(ctx, handle, inproc.WithArgs(
		"--template", "template.yaml",
		"--function", "OrdersFunction",
		"--endpoint-url", "http://127.0.0.1:4568",
		"--state-dir", ".esm",
	))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// Run with typed options: the mapping of a template's function, on a local emulator.
func ExampleWithTemplate() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := inproc.Run(ctx, handle,
		inproc.WithTemplate("template.yaml"),
		inproc.WithFunction("OrdersFunction"),
		inproc.WithEndpointURL("http://127.0.0.1:4568"),
		inproc.WithStateDir(".esm"),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// Run without a template: a stream, read from its oldest record, in batches of at most 10.
func ExampleWithStream() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := inproc.Run(ctx, handle,
		inproc.WithStream("orders"),
		inproc.WithStartingPosition("TRIM_HORIZON"),
		inproc.WithBatchSize(10),
		inproc.WithEndpointURL("http://127.0.0.1:4568"),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
