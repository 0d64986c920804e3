package inproc_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/handler/inproc"
	"github.com/kinesis-esm/esm/metrics/emf"
	"github.com/kinesis-esm/esm/runner"
)

func handle(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
	for _, r := range e.Records {
		fmt.Printf("%s: %s\n", r.Kinesis.PartitionKey, r.Kinesis.Data)
	}
	return events.KinesisEventResponse{}, nil
}

// Run embeds the mapping in a program of its own, stopped by its context: the mapping of a
// template's function, its parameters given, its shards shared with the other workers of a
// DynamoDB lease table.
func ExampleRun() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := inproc.Run(ctx, handle,
		inproc.WithTemplate("template.yaml"),
		inproc.WithFunction("OrdersFunction"),
		inproc.WithParameterOverrides(map[string]string{"StreamName": "orders"}),
		inproc.WithEndpointURL("http://127.0.0.1:4568"),
		inproc.WithLeaseTable("orders-leases"),
		inproc.WithWorkerID("worker-1"),
		inproc.WithLeaseDuration(20*time.Second),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// WithHooks takes the metrics a program builds: here the CloudWatch embedded-metric-format
// lines esm run --emf writes, once a minute on stdout.
func ExampleWithHooks() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	lines := emf.New(os.Stdout, "esm", "orders", "orders")
	done := make(chan error, 1)
	go func() { done <- lines.Run(ctx) }()
	err := inproc.Run(ctx, handle,
		inproc.WithStream("orders"),
		inproc.WithFunctionName("orders"),
		inproc.WithEndpointURL("http://127.0.0.1:4568"),
		inproc.WithHooks(runner.Hooks{Observer: lines, OnUUID: lines.SetMappingUUID}),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	stop()
	<-done
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
