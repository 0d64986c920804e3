package verify

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/internal/testbed/local"
)

func ddbDelivery(seq string, invoked, done int64) example.DDBDelivery {
	return example.DDBDelivery{Record: events.DynamoDBEventRecord{Change: events.DynamoDBStreamRecord{SequenceNumber: seq}}, InvokedAt: invoked, DoneAt: done}
}

// TestDDBLineage: records are placed in shards by their sequence numbers (ranges compared as
// numbers, not strings); a child invoked after its parent's last invocation ended passes, one
// invoked before fails, as do a record in no shard, a delivery without times, and shards with a
// parent but no parent→child pair with deliveries.
func TestDDBLineage(t *testing.T) {
	shards := []DDBShard{
		{ID: "a", Start: "900", End: "999"},
		{ID: "b", Parent: "a", Start: "1000", End: "1999"},
		{ID: "c", Parent: "b", Start: "2000"},
	}
	good := []example.DDBDelivery{ddbDelivery("950", 10, 20), ddbDelivery("999", 30, 40), ddbDelivery("1500", 41, 50), ddbDelivery("2500", 50, 60)}
	if c, pairs := DDBLineage(good, shards); !c.OK || pairs != 2 {
		t.Fatalf("good run: %+v, %d pairs", c, pairs)
	}
	for name, got := range map[string][]example.DDBDelivery{
		"child before its parent's last invocation ended": {ddbDelivery("950", 10, 20), ddbDelivery("999", 30, 40), ddbDelivery("1500", 35, 50)},
		"record in no shard":                              {ddbDelivery("950", 10, 20), ddbDelivery("899", 30, 40), ddbDelivery("1500", 41, 50)},
		"delivery without times":                          {ddbDelivery("950", 10, 20), ddbDelivery("1500", 0, 0)},
		"no parent→child pair judged":                     {ddbDelivery("950", 10, 20), ddbDelivery("2500", 50, 60)},
	} {
		if c, _ := DDBLineage(got, shards); c.OK {
			t.Errorf("%s passed: %s", name, c.Detail)
		}
	}
}

// TestListDDBShards: the shards of a stream rotated twice on the in-memory DynamoDB, with their
// parents, and a record written after the second rotation placed in the last of them.
func TestListDDBShards(t *testing.T) {
	ctx := context.Background()
	db := fakedynamo.New()
	arn, err := local.CreateStreamTable(ctx, db, "tab", types.StreamViewTypeNewAndOldImages)
	if err != nil {
		t.Fatal(err)
	}
	p := NewDDBProducer("tab", 3, 1)
	for range 2 {
		if err := p.Write(ctx, db, 5); err != nil {
			t.Fatal(err)
		}
		if err := db.RotateStream("tab"); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Write(ctx, db, 1); err != nil {
		t.Fatal(err)
	}
	shards, err := ListDDBShards(ctx, db, arn)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 3 || shards[0].Parent != "" || shards[1].Parent != shards[0].ID || shards[2].Parent != shards[1].ID ||
		shards[0].End == "" || shards[2].End != "" {
		t.Fatalf("shards %+v", shards)
	}
	it, err := db.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(shards[2].ID), ShardIteratorType: "TRIM_HORIZON"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil || len(recs.Records) != 1 {
		t.Fatalf("%v, %d records", err, len(recs.Records))
	}
	if got := DDBShardOf(shards, aws.ToString(recs.Records[0].Dynamodb.SequenceNumber)); got != shards[2].ID {
		t.Fatalf("the record is placed in %q, want %s", got, shards[2].ID)
	}
}

// TestReadDDBShards: on a stream with two shards open at once (whose sequence number ranges
// overlap, so that DDBShardOf cannot tell them apart), rotated once, every record is placed in
// the shard GetRecords read it from: as many records placed as written, every shard holding some,
// the 30 written before the rotation in the two first shards and the 30 after in their children.
func TestReadDDBShards(t *testing.T) {
	ctx := context.Background()
	db := fakedynamo.New(fakedynamo.WithStreamShards(2))
	arn, err := local.CreateStreamTable(ctx, db, "tab", types.StreamViewTypeNewAndOldImages)
	if err != nil {
		t.Fatal(err)
	}
	p := NewDDBProducer("tab", 8, 1)
	if err := p.Write(ctx, db, 30); err != nil {
		t.Fatal(err)
	}
	if err := db.RotateStream("tab"); err != nil {
		t.Fatal(err)
	}
	if err := p.Write(ctx, db, 30); err != nil {
		t.Fatal(err)
	}
	shards, of, err := ReadDDBShards(ctx, db, arn)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 4 || len(of) != p.Total() {
		t.Fatalf("%d shards, %d records placed; want 4 and %d", len(shards), len(of), p.Total())
	}
	per := map[string]int{}
	for _, s := range of {
		per[s]++
	}
	roots := 0
	for _, s := range shards {
		if per[s.ID] == 0 {
			t.Errorf("shard %s (parent %q) holds no record", s.ID, s.Parent)
		}
		if s.Parent == "" {
			roots += per[s.ID]
		}
	}
	if roots != 30 {
		t.Errorf("%d records placed in the first shards, want the 30 written before the rotation", roots)
	}
	wrong := 0
	for seq, s := range of {
		if DDBShardOf(shards, seq) != s {
			wrong++
		}
	}
	if wrong == 0 {
		t.Error("DDBShardOf placed every record right: the shards' ranges do not overlap, and the test shows nothing")
	}
}
