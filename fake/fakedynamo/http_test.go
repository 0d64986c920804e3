package fakedynamo

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// served starts db's Handler on 127.0.0.1 and returns the SDK's two clients pointed at it.
func served(t testing.TB, db *DB) (*dynamodb.Client, *dynamodbstreams.Client, string) {
	t.Helper()
	srv := httptest.NewServer(db.Handler())
	t.Cleanup(srv.Close)
	cfg := aws.Config{
		Region: "us-east-1", RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDLOCAL", SecretAccessKey: "local"}, nil
		}),
	}
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	st := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	return ddb, st, srv.URL
}

// readAll reads a shard from TRIM_HORIZON until a read returns nothing or the shard ends.
func readAll(t *testing.T, st *dynamodbstreams.Client, arn, shard string) ([]streamtypes.Record, bool) {
	t.Helper()
	ctx := context.Background()
	it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(shard), ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	var recs []streamtypes.Record
	next := it.ShardIterator
	for next != nil {
		out, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, out.Records...)
		next = out.NextShardIterator
		if len(out.Records) == 0 {
			break
		}
	}
	return recs, next == nil
}

func item(kv ...string) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = &types.AttributeValueMemberS{Value: kv[i+1]}
	}
	return m
}

// TestServedStreamsWithSDK drives the served DB with the SDK's own clients: every kind of
// write makes one record in order with NEW_AND_OLD_IMAGES, a write that changes nothing makes
// none, a cancelled transaction none, and the typed errors arrive typed.
func TestServedStreamsWithSDK(t *testing.T) {
	ctx := context.Background()
	ddb, st, _ := served(t, New())
	arn := newStreamTable(t, ddb, "orders", types.StreamViewTypeNewAndOldImages)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("orders"), Item: item("k", "a", "v", "1")}))
	must(ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("orders"), Item: item("k", "a", "v", "1")})) // no change: no record
	must(ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("orders"), Key: item("k", "a"),
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: item(":v", "2")}))
	must(ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"orders": {
		{PutRequest: &types.PutRequest{Item: item("k", "b", "v", "1")}},
	}}}))
	must(ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("orders"), Item: item("k", "c", "v", "1")}},
		{Delete: &types.Delete{TableName: aws.String("orders"), Key: item("k", "b")}},
	}}))
	_, err := ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("orders"), Item: item("k", "d")}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String("orders"), Key: item("k", "a"), ConditionExpression: aws.String("v = :x"), ExpressionAttributeValues: item(":x", "9")}},
	}})
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 || aws.ToString(tce.CancellationReasons[1].Code) != "ConditionalCheckFailed" {
		t.Fatalf("failed transaction: %v (%+v)", err, tce)
	}
	must(ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("orders"), Key: item("k", "zz")})) // nothing to delete: no record
	must(ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("orders"), Key: item("k", "a")}))

	desc, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.StreamDescription.Shards) != 1 || desc.StreamDescription.StreamStatus != streamtypes.StreamStatusEnabled {
		t.Fatalf("DescribeStream: %+v", desc.StreamDescription)
	}
	recs, ended := readAll(t, st, arn, *desc.StreamDescription.Shards[0].ShardId)
	if ended {
		t.Fatal("an open shard ended")
	}
	type ev struct {
		name          streamtypes.OperationType
		key, old, new string // v of the images, "-" when absent
	}
	v := func(img map[string]streamtypes.AttributeValue) string {
		if img == nil {
			return "-"
		}
		if s, ok := img["v"].(*streamtypes.AttributeValueMemberS); ok {
			return s.Value
		}
		return "?"
	}
	want := []ev{{"INSERT", "a", "-", "1"}, {"MODIFY", "a", "1", "2"}, {"INSERT", "b", "-", "1"}, {"INSERT", "c", "-", "1"}, {"REMOVE", "b", "1", "-"}, {"REMOVE", "a", "2", "-"}}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(want), recs)
	}
	prev := ""
	for i, r := range recs {
		got := ev{r.EventName, r.Dynamodb.Keys["k"].(*streamtypes.AttributeValueMemberS).Value, v(r.Dynamodb.OldImage), v(r.Dynamodb.NewImage)}
		if got != want[i] {
			t.Errorf("record %d: %+v, want %+v", i, got, want[i])
		}
		seq := aws.ToString(r.Dynamodb.SequenceNumber)
		if len(seq) < 21 || seq <= prev || aws.ToString(r.EventVersion) != "1.1" || aws.ToString(r.EventSource) != "aws:dynamodb" || r.Dynamodb.StreamViewType != streamtypes.StreamViewTypeNewAndOldImages || r.Dynamodb.ApproximateCreationDateTime == nil {
			t.Errorf("record %d: %+v %+v", i, r, r.Dynamodb)
		}
		prev = seq
	}
	_, err = st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(arn + "|1|garbage!")})
	if err == nil {
		t.Fatal("a garbage iterator was accepted")
	}
	_, err = st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn + "x")})
	var rnf *streamtypes.ResourceNotFoundException
	if !errors.As(err, &rnf) {
		t.Fatalf("unknown stream: %v", err)
	}
}

// TestServedRefusesNumbersDynamoDBRefuses: a number beyond DynamoDB's range is a
// ValidationException, as DynamoDB answers (the fake computes numbers exactly, with big.Rat: an
// exponent of a billion would be a number of billions of bits when compared or added).
func TestServedRefusesNumbersDynamoDBRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ddb, _, _ := served(t, New())
	newStreamTable(t, ddb, "nums", types.StreamViewTypeNewAndOldImages)
	for _, n := range []string{"1e999999999", "1e999999998"} {
		_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("nums"), Item: map[string]types.AttributeValue{
			"k": &types.AttributeValueMemberS{Value: "a"}, "n": &types.AttributeValueMemberN{Value: n},
		}})
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" {
			t.Fatalf("PutItem of N %s: %v", n, err)
		}
	}
}
