package example_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/example"
)

// The function handles a batch as Lambda hands it over. Without EXAMPLE_OUTPUT it prints a
// summary line; a Config with Fail and FailMatch fails the batches holding a matching record,
// as the demo's poison record is failed.
func ExampleConfig_Handle() {
	record := func(seq, data string) events.KinesisEventRecord {
		return events.KinesisEventRecord{
			EventID: "shardId-000000000000:" + seq,
			Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: "k", Data: []byte(data)},
		}
	}
	batch := events.KinesisEvent{Records: []events.KinesisEventRecord{record("1", "a"), record("2", "b")}}
	poisoned := events.KinesisEvent{Records: []events.KinesisEventRecord{record("3", "poison")}}

	fn := example.Config{Fail: example.FailError, FailMatch: "poison"}
	ctx := context.Background()
	if _, err := fn.Handle(ctx, batch); err != nil {
		fmt.Println(err)
	}
	if _, err := fn.Handle(ctx, poisoned); err != nil {
		fmt.Println(err)
	}
	// Output:
	// received 2 records from shardId-000000000000 (1 … 2)
	// example: failing as EXAMPLE_FAIL=error asks
}
