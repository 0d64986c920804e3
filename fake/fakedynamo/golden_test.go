package fakedynamo

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// post sends one JSON 1.0 request to a served DB and decodes the answer.
func post(t *testing.T, url, target string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %s", target, raw)
	}
	return resp.StatusCode, out
}

// TestGoldenRecordNewImage: the record GetRecords serves for a PutItem on a NEW_IMAGE table is
// the record AWS recorded (aws-recorded.md, "The event"), member for member: names, order-free
// values, SizeBytes 70, eventVersion "1.1"; the masked values have AWS's form (a 32-hex event
// id, whole epoch seconds, a sequence number of at least 21 digits). The recording is of the
// Lambda event, which adds eventSourceARN to what GetRecords returns; it is left out here.
func TestGoldenRecordNewImage(t *testing.T) {
	ddb, _, url := served(t, New(WithRegion("eu-west-1")))
	ctx := t.Context()
	if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("golden"), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("my_partition_key"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("my_partition_key"), AttributeType: types.ScalarAttributeTypeS}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("golden"), Item: map[string]types.AttributeValue{
		"my_partition_key": &types.AttributeValueMemberS{Value: "hello world"}, "binary_key": &types.AttributeValueMemberB{Value: []byte("foobar")},
	}}); err != nil {
		t.Fatal(err)
	}
	_, streams := post(t, url, "DynamoDBStreams_20120810.ListStreams", map[string]any{"TableName": "golden"})
	arn := streams["Streams"].([]any)[0].(map[string]any)["StreamArn"].(string)
	_, desc := post(t, url, "DynamoDBStreams_20120810.DescribeStream", map[string]any{"StreamArn": arn})
	shard := desc["StreamDescription"].(map[string]any)["Shards"].([]any)[0].(map[string]any)["ShardId"].(string)
	_, it := post(t, url, "DynamoDBStreams_20120810.GetShardIterator", map[string]any{"StreamArn": arn, "ShardId": shard, "ShardIteratorType": "TRIM_HORIZON"})
	_, got := post(t, url, "DynamoDBStreams_20120810.GetRecords", map[string]any{"ShardIterator": it["ShardIterator"]})
	rec := got["Records"].([]any)[0].(map[string]any)
	ddbPart := rec["dynamodb"].(map[string]any)
	masks := []struct {
		obj       map[string]any
		key, mask string
		form      *regexp.Regexp
	}{
		{rec, "eventID", "<event-id>", regexp.MustCompile(`^[0-9a-f]{32}$`)},
		{rec, "awsRegion", "<region>", regexp.MustCompile(`^eu-west-1$`)},
		{ddbPart, "ApproximateCreationDateTime", "<approximate-creation-datetime>", regexp.MustCompile(`^[0-9]{10}$`)},
		{ddbPart, "SequenceNumber", "<sequence-number>", regexp.MustCompile(`^[0-9]{21,}$`)},
	}
	for _, m := range masks {
		v, _ := json.Marshal(m.obj[m.key])
		if !m.form.Match(bytes.Trim(v, `"`)) {
			t.Errorf("%s = %s, not of AWS's form %s", m.key, v, m.form)
		}
		m.obj[m.key] = m.mask
	}
	raw, err := os.ReadFile("testdata/record_new_image.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rec, want) {
		g, _ := json.MarshalIndent(rec, "", "  ")
		t.Fatalf("record differs from AWS's recording:\n%s\nwant:\n%s", g, raw)
	}
}
