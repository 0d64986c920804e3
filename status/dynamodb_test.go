package status_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/status"
)

// TestDynamoDBStreamShards: a DynamoDB stream's mapping is reported with its shards as
// DescribeStream lists them, each rotated shard the child of the one before (with no progress
// stored, the first is being read and the others wait for their parent).
func TestDynamoDBStreamShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := fakedynamo.New(fakedynamo.WithShardRotation(time.Second))
		arn, err := local.CreateStreamTable(context.Background(), db, "orders", ddbtypes.StreamViewTypeKeysOnly)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 { // a write a second: a shard a second
			time.Sleep(1100 * time.Millisecond)
			item := map[string]ddbtypes.AttributeValue{"k": &ddbtypes.AttributeValueMemberS{Value: "k"}}
			if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("orders"), Item: item}); err != nil {
				t.Fatal(err)
			}
		}
		r := status.New(nil, status.WithDynamoDBStreams(db), status.WithStateDir(t.TempDir()))
		rep, err := r.Mapping(context.Background(), arn, "arn:aws:lambda:us-east-1:000000000000:function:f")
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Shards) < 3 {
			t.Fatalf("%d shards, want 3 at least: %+v", len(rep.Shards), rep.Shards)
		}
		for i, s := range rep.Shards {
			want := status.Pending
			if i == 0 {
				want = status.Reading
			} else if len(s.Parents) != 1 || s.Parents[0] != rep.Shards[i-1].ShardID {
				t.Fatalf("shard %s has parents %v, want %s", s.ShardID, s.Parents, rep.Shards[i-1].ShardID)
			}
			if s.State != want {
				t.Fatalf("shard %s is %s, want %s", s.ShardID, s.State, want)
			}
		}
	})
}
