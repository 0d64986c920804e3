package fakedynamo

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// BenchmarkServedWriteAndRead measures the served DB through the SDK's clients: one op is a
// PutItem of a 100-byte item over 50 keys on a NEW_AND_OLD_IMAGES table; at the end the
// stream is read back with GetRecords (reported as reads/s of records).
func BenchmarkServedWriteAndRead(b *testing.B) {
	ctx := context.Background()
	ddb, st, _ := served(b, New())
	arn := newStreamTable(b, ddb, "bench", types.StreamViewTypeNewAndOldImages)
	pad := fmt.Sprintf("%0100d", 0)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("bench"), Item: item("k", fmt.Sprint("key", i%50), "v", fmt.Sprint(i), "p", pad)}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	d, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		b.Fatal(err)
	}
	it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: d.StreamDescription.Shards[0].ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		b.Fatal(err)
	}
	start := b.Elapsed()
	b.StartTimer()
	n := 0
	for next := it.ShardIterator; ; {
		out, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next})
		if err != nil {
			b.Fatal(err)
		}
		n += len(out.Records)
		if len(out.Records) == 0 {
			break
		}
		next = out.NextShardIterator
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/(b.Elapsed()-start).Seconds(), "records-read/s")
}
