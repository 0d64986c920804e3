package redrive

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/dlq"
	"github.com/kinesis-esm/esm/poller"
)

const ddbStream = "arn:aws:dynamodb:us-east-1:111111111111:table/orders/stream/2026-12-07T00:00:00.000"

// TestParseRecordedDynamoDBMessage: the DynamoDB on-failure message AWS recorded parses, its
// arrival times in whole seconds.
func TestParseRecordedDynamoDBMessage(t *testing.T) {
	raw, err := os.ReadFile("../dlq/testdata/aws-recorded-ddb-failure.json")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.NewReplacer("<region>", "us-east-1", "<table>", "orders", "<label>", "2026-12-07T00:00:00.000",
		"<shard-id>", "shardId-00000001764000000000-0a1b2c3d", "<sequence-number>", "4000000000000000000001").Replace(string(raw))
	m, err := ParseMessage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2022, 7, 13, 13, 48, 1, 0, time.UTC)
	if m.StreamARN != ddbStream || m.ShardID != "shardId-00000001764000000000-0a1b2c3d" || m.StartSequenceNumber != "4000000000000000000001" ||
		m.BatchSize != 1 || !m.FirstArrival.Equal(at) || !m.LastArrival.Equal(at) || m.InvokeCount != 2 || m.FunctionError != "Unhandled" {
		t.Fatalf("parsed %+v", m)
	}
}

// TestParseWhatDLQWritesForDynamoDB: the SQS message, the SNS notification and the S3 object esm
// writes for a DynamoDB stream parse back, the S3 object's payload records found by their
// dynamodb.SequenceNumber.
func TestParseWhatDLQWritesForDynamoDB(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 1, 2, 0, time.UTC)
	payload := []byte(`{"Records":[{"eventID":"a","eventName":"INSERT","dynamodb":{"SequenceNumber":"100"}},{"eventID":"b","eventName":"MODIFY","dynamodb":{"SequenceNumber":"205"}}]}`)
	fr := poller.FailureRecord{Condition: poller.ConditionRetryAttemptsExhausted, RequestID: "r-1", FunctionARN: "arn:aws:lambda:us-east-1:111111111111:function:f",
		ApproximateInvokeCount: 3, Timestamp: at, StreamARN: ddbStream, ShardID: "shardId-1",
		StartSequenceNumber: "100", EndSequenceNumber: "205", FirstArrival: at, LastArrival: at.Add(time.Second), BatchSize: 2, Payload: payload}
	want := Message{Condition: fr.Condition, RequestID: "r-1", FunctionARN: fr.FunctionARN, InvokeCount: 3, Timestamp: at,
		StreamARN: ddbStream, ShardID: "shardId-1", StartSequenceNumber: "100", EndSequenceNumber: "205",
		FirstArrival: at, LastArrival: at.Add(time.Second), BatchSize: 2}
	sns, _ := json.Marshal(map[string]string{"Type": "Notification", "Message": string(dlq.Message(fr))})
	for name, body := range map[string][]byte{"sqs": dlq.Message(fr), "sns": sns} {
		got, err := ParseMessage(body)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %+v, %v\nwant %+v", name, got, err, want)
		}
	}
	got, err := ParseMessage(dlq.S3Object(fr))
	if err != nil || string(got.Payload) != string(payload) {
		t.Fatalf("S3 object: %+v, %v", got, err)
	}
}

// TestParseDynamoDBMessageRefused: a batch info whose stream is of the other kind, or both batch
// infos, are not on-failure messages.
func TestParseDynamoDBMessageRefused(t *testing.T) {
	info := func(key, arn string) string {
		return `"` + key + `":{"shardId":"shardId-1","startSequenceNumber":"1","endSequenceNumber":"2","batchSize":1,"streamArn":"` + arn + `"}`
	}
	for name, body := range map[string]string{
		"kinesis ARN in DDBStreamBatchInfo": "{" + info("DDBStreamBatchInfo", testStream) + "}",
		"DynamoDB ARN in KinesisBatchInfo":  "{" + info("KinesisBatchInfo", ddbStream) + "}",
		"both":                              "{" + info("DDBStreamBatchInfo", ddbStream) + "," + info("KinesisBatchInfo", testStream) + "}",
		"a table's ARN":                     "{" + info("DDBStreamBatchInfo", "arn:aws:dynamodb:us-east-1:1:table/orders") + "}",
	} {
		if _, err := ParseMessage([]byte(body)); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%s: %v, want ErrInvalidMessage", name, err)
		}
	}
	if _, err := ParseMessage([]byte("{" + info("DDBStreamBatchInfo", ddbStream) + "}")); err != nil {
		t.Fatalf("the same with a DynamoDB stream: %v", err)
	}
}
