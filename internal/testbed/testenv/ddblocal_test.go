package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/kinesis-esm/esm/internal/testbed/local"
)

// TestDDBLocalBinary builds and runs ddb-local with shards rotating every second and drives it
// with the SDK's dynamodb and dynamodbstreams clients: writes before and after a rotation are
// found along the chain of shards (ParentShardId, CHILD_SHARDS), closed shards end with a null
// NextShardIterator, and the newest stays open; an iterator older than -iterator-ttl is an
// ExpiredIteratorException.
func TestDDBLocalBinary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	endpoint, stop, err := DDBStreamsEndpoint(ctx, ".", local.DDBLocalOptions{Rotate: time.Second, IteratorTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ddb, st := local.DDBClients(cfg, endpoint)
	streamARN, err := local.CreateStreamTable(ctx, ddb, "rotating", types.StreamViewTypeNewAndOldImages)
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.String(streamARN)
	write := func(v string) {
		t.Helper()
		if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("rotating"), Item: map[string]types.AttributeValue{
			"k": &types.AttributeValueMemberS{Value: "key"}, "v": &types.AttributeValueMemberS{Value: v},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	write("1")
	// The rotation is the emulator's own clock: wait until DescribeStream shows the child.
	var shards []streamtypes.Shard
	for deadline := time.Now().Add(30 * time.Second); len(shards) < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no rotation within 30 s: %+v", shards)
		}
		d, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
		if err != nil {
			t.Fatal(err)
		}
		shards = d.StreamDescription.Shards
	}
	write("2")
	// Under load more rotations may have happened: check the whole chain. Each shard's parent
	// is the one before, all but the last are closed (and end with a null NextShardIterator),
	// and their records in order are the two writes.
	d, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	if err != nil {
		t.Fatal(err)
	}
	shards = d.StreamDescription.Shards
	var all []streamtypes.Record
	for i, sh := range shards {
		last := i == len(shards)-1
		if (sh.SequenceNumberRange.EndingSequenceNumber == nil) != last || (i > 0 && aws.ToString(sh.ParentShardId) != aws.ToString(shards[i-1].ShardId)) {
			t.Fatalf("shard %d of %d: %+v %+v", i, len(shards), sh, sh.SequenceNumberRange)
		}
		if !last {
			kids, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn, ShardFilter: &streamtypes.ShardFilter{Type: streamtypes.ShardFilterTypeChildShards, ShardId: sh.ShardId}})
			if err != nil || len(kids.StreamDescription.Shards) != 1 || aws.ToString(kids.StreamDescription.Shards[0].ShardId) != aws.ToString(shards[i+1].ShardId) {
				t.Fatalf("CHILD_SHARDS of shard %d: %+v %v", i, kids, err)
			}
		}
		it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !last && out.NextShardIterator != nil:
			t.Fatalf("closed shard %d of %d: a next iterator after its last record", i, len(shards))
		case last && out.NextShardIterator == nil:
			// It may have rotated since DescribeStream: then it is closed now.
			d, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn, ExclusiveStartShardId: shards[i-1].ShardId, Limit: aws.Int32(1)})
			if err != nil || d.StreamDescription.Shards[0].SequenceNumberRange.EndingSequenceNumber == nil {
				t.Fatalf("open shard %d of %d ended: %+v %v", i, len(shards), d, err)
			}
		}
		all = append(all, out.Records...)
	}
	if len(all) != 2 || all[0].EventName != streamtypes.OperationTypeInsert || all[1].EventName != streamtypes.OperationTypeModify {
		t.Fatalf("records: %+v", all)
	}
	it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: shards[len(shards)-1].ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeLatest})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // past the iterator's 2 s
	var expired *streamtypes.ExpiredIteratorException
	if _, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator}); !errors.As(err, &expired) {
		t.Fatalf("an iterator past -iterator-ttl: %v", err)
	}
	old := all[1].Dynamodb.OldImage["v"].(*streamtypes.AttributeValueMemberS).Value
	cur := all[1].Dynamodb.NewImage["v"].(*streamtypes.AttributeValueMemberS).Value
	if old != "1" || cur != "2" {
		t.Fatalf("MODIFY: old %s new %s", old, cur)
	}
}
