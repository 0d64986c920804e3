package poller_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// A mapping of a one-shard stream to a Go handler, on the in-memory Kinesis fake: the handler
// gets the three records in one batch, stops the mapping, and the batch's checkpoint is written
// before Run returns. With a real stream the Kinesis client is a *kinesis.Client, and the
// invoker one of the invoke packages.
func ExampleNew() {
	kin := fakekinesis.New()
	arn := kin.CreateStream("orders", 1)
	var last string // the sequence number of the last record
	for _, item := range []string{"apple", "pear", "plum"} {
		_, last = kin.Put("orders", "customer-1", []byte(item))
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	handler := func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		fmt.Printf("batch of %d\n", len(e.Records))
		for _, rec := range e.Records {
			shard, _, _ := strings.Cut(rec.EventID, ":")
			fmt.Println(shard, rec.Kinesis.PartitionKey, string(rec.Kinesis.Data))
		}
		stop() // a graceful stop: this batch still completes and is checkpointed
		return events.KinesisEventResponse{}, nil
	}

	stream, err := kinesissrc.New(kin, arn) // the Kinesis source: the stream, read with kin
	if err != nil {
		fmt.Println(err)
		return
	}
	store := poller.NewMemoryStore()
	cfg := poller.Config{StartingPosition: poller.TrimHorizon, BatchSize: 10}
	p, err := poller.New(stream, cfg, store, inprocess.New(handler))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Run(ctx); err != nil {
		fmt.Println(err)
	}
	progress, _ := store.Load(context.Background())
	fmt.Println("checkpoint at the last record:", progress["shardId-000000000000"].Checkpoint == last)
	// Output:
	// batch of 3
	// shardId-000000000000 customer-1 apple
	// shardId-000000000000 customer-1 pear
	// shardId-000000000000 customer-1 plum
	// checkpoint at the last record: true
}
