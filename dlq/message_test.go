package dlq

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

func recorded(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile("testdata/aws-recorded-failures.json")
	if err != nil {
		t.Fatal(err)
	}
	// A timestamp placeholder shows the format of the value it stands for.
	raw = bytes.ReplaceAll(raw, []byte("<timestamp:2022-07-13T13:48:01.000Z>"), []byte("2022-07-13T13:48:01.000Z"))
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// The recording's placeholders are used as the values, so the rendered message must equal the
// recording byte for byte, key order included.
var (
	recordedTime = time.Date(2022, 7, 13, 13, 48, 1, 0, time.UTC)
	recordedFn   = "arn:<partition>:lambda:<region>:111111111111:function:<resource:3>"
	recordedARN  = "arn:<partition>:kinesis:<region>:111111111111:stream/<resource:2>"
)

func failure(condition string, invokes int, resp *poller.FailureResponse, seq string) poller.FailureRecord {
	return poller.FailureRecord{
		Condition: condition, RequestID: "<uuid:2>", FunctionARN: recordedFn, ApproximateInvokeCount: invokes, Response: resp,
		Timestamp: recordedTime, StreamARN: recordedARN, ShardID: "shardId-000000000000",
		StartSequenceNumber: seq, EndSequenceNumber: seq, FirstArrival: recordedTime, LastArrival: recordedTime, BatchSize: 1,
	}
}

func TestMessageMatchesAWSRecordings(t *testing.T) {
	rec := recorded(t)
	unhandled := &poller.FailureResponse{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: "Unhandled"}
	returned := &poller.FailureResponse{StatusCode: 200, ExecutedVersion: "$LATEST"}
	tests := []struct {
		key string
		f   poller.FailureRecord
	}{
		{"sqs_function_error", failure(poller.ConditionRetryAttemptsExhausted, 2, unhandled, "<start-sequence-number:1>")},
		{"sns_message", failure(poller.ConditionRetryAttemptsExhausted, 2, unhandled, "<start-sequence-number:1>")},
		{"record_age_while_retrying", failure(poller.ConditionRecordAgeExceeded, 8, nil, "<start-sequence-number:1>")},
		{"record_age_before_ingestion", failure(poller.ConditionRecordAgeExceeded, 1, nil, "<start-sequence-number:1>")},
		{"partial_batch_failure", failure(poller.ConditionRetryAttemptsExhausted, 4, returned, "<sequence-number:6>")},
		{"invalid_response_failure", failure(poller.ConditionRetryAttemptsExhausted, 3, returned, "<sequence-number:1>")},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, want := compact(t, Message(tt.f)), compact(t, rec[tt.key])
			if got != want {
				t.Fatalf("message differs from AWS's recording\n got: %s\nwant: %s", got, want)
			}
		})
	}
}

// TestS3ObjectMatchesAWSRecording compares the S3 object with AWS's recording byte for byte, key
// order included (sorted at every level in the recording). The payload is stored as an escaped
// JSON string, as Lambda's documentation describes it; the recording's tool decodes strings, so
// the golden has the recorded payload object re-encoded as that string.
func TestS3ObjectMatchesAWSRecording(t *testing.T) {
	var rec struct {
		Payload json.RawMessage `json:"payload"`
	}
	raw := recorded(t)["s3_object"]
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	payload := compact(t, rec.Payload)
	var quoted bytes.Buffer // Lambda writes <, > and & as they are
	enc := json.NewEncoder(&quoted)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(payload); err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(compact(t, raw), `"payload":`+payload, `"payload":`+strings.TrimSpace(quoted.String()), 1)
	if !strings.Contains(want, `"payload":"{`) {
		t.Fatal("golden: the recorded payload was not found to re-encode")
	}
	f := failure(poller.ConditionRetryAttemptsExhausted, 2,
		&poller.FailureResponse{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: "Unhandled"}, "<sequence-number:1>")
	f.ShardID = "<kinesis-shard-id>"
	f.Payload = []byte(payload)
	if got := string(S3Object(f)); got != want {
		t.Fatalf("S3 object differs from AWS's recording\n got: %s\nwant: %s", got, want)
	}
	// The payload is exactly the event the function received.
	var obj struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(S3Object(f), &obj); err != nil || obj.Payload != payload {
		t.Fatalf("payload %q (%v), want the event unchanged", obj.Payload, err)
	}
}

func TestS3Key(t *testing.T) {
	f := poller.FailureRecord{ShardID: "shardId-000000000003", Timestamp: time.Date(2026, 2, 3, 4, 5, 6, 7_000_000, time.FixedZone("x", 3600))}
	key := S3Key("6f1c1e9a-0000-4000-8000-000000000000", f)
	re := regexp.MustCompile(`^aws/lambda/6f1c1e9a-0000-4000-8000-000000000000/shardId-000000000003/2026/02/03/2026-02-03T03\.05\.06-[0-9a-f-]{36}$`)
	if !re.MatchString(key) {
		t.Fatalf("key %q does not follow aws/lambda/<uuid>/<shard>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<uuid> in UTC", key)
	}
}

// TestDynamoDBMessageMatchesAWSRecording: a DynamoDB stream's failure record carries
// DDBStreamBatchInfo, whose arrival times are whole seconds (the records' milliseconds dropped),
// while the top-level timestamp keeps its milliseconds; byte for byte the recording, key order
// included. The recording's placeholders are used as the values.
func TestDynamoDBMessageMatchesAWSRecording(t *testing.T) {
	raw, err := os.ReadFile("testdata/aws-recorded-ddb-failure.json")
	if err != nil {
		t.Fatal(err)
	}
	arrival := recordedTime.Add(734 * time.Millisecond) // dropped from the arrival times
	f := poller.FailureRecord{
		Condition: poller.ConditionRetryAttemptsExhausted, RequestID: "<uuid>", ApproximateInvokeCount: 2,
		FunctionARN: "arn:aws:lambda:<region>:111111111111:function:<function>",
		Response:    &poller.FailureResponse{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: "Unhandled"},
		Timestamp:   recordedTime, StreamARN: "arn:aws:dynamodb:<region>:111111111111:table/<table>/stream/<label>",
		ShardID: "<shard-id>", StartSequenceNumber: "<sequence-number>", EndSequenceNumber: "<sequence-number>",
		FirstArrival: arrival, LastArrival: arrival, BatchSize: 1,
	}
	if got, want := compact(t, Message(f)), compact(t, raw); got != want {
		t.Fatalf("message differs from AWS's recording\n got: %s\nwant: %s", got, want)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(S3Object(f), &obj); err != nil {
		t.Fatal(err)
	}
	if obj["DDBStreamBatchInfo"] == nil || obj["KinesisBatchInfo"] != nil {
		t.Fatalf("S3 object %s: want DDBStreamBatchInfo and no KinesisBatchInfo", S3Object(f))
	}
}
