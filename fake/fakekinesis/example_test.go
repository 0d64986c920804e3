package fakekinesis_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
)

// The first GetRecords is throttled; the retry reads the record.
func Example() {
	ctx := context.Background()
	f := fakekinesis.New()
	f.CreateStream("orders", 1)
	f.Put("orders", "customer-1", []byte("hello"))
	f.Inject(func(op string, _ any) error {
		if op == fakekinesis.OpGetRecords && f.Calls(op) == 1 {
			return fakekinesis.ErrThrottled()
		}
		return nil
	})

	it, err := f.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamName:        aws.String("orders"),
		ShardId:           aws.String("shardId-000000000000"),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		panic(err)
	}
	_, err = f.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	var throttled *types.ProvisionedThroughputExceededException
	fmt.Println("throttled:", errors.As(err, &throttled))

	out, err := f.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out.Records[0].Data), *out.Records[0].PartitionKey, *out.MillisBehindLatest)
	// Output:
	// throttled: true
	// hello customer-1 0
}
