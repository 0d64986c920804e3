package redrive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/dlq"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

const testStream = "arn:aws:kinesis:us-east-1:111111111111:stream/orders"

// recordedMessages are the on-failure messages AWS recorded (kept by the dlq package), with their
// placeholders replaced by values of the right form.
func recordedMessages(t testing.TB) map[string][]byte {
	t.Helper()
	raw, err := os.ReadFile("../dlq/testdata/aws-recorded-failures.json")
	if err != nil {
		t.Fatal(err)
	}
	raw = []byte(strings.NewReplacer(
		"<timestamp:2022-07-13T13:48:01.000Z>", "2022-07-13T13:48:01.000Z",
		"<partition>", "aws", "<region>", "us-east-1", "<resource:2>", "orders",
		"<kinesis-shard-id>", "shardId-000000000000",
		`"<approximate-arrival-timestamp>"`, "1657720081.123",
	).Replace(string(raw)))
	// Every sequence number placeholder becomes one value: each recorded message names one record.
	raw = regexp.MustCompile(`<(start-)?sequence-number:\d+>`).ReplaceAll(raw, []byte("49590338271490256608559692538361571095921575989136588898"))
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestParseRecordedMessages: every message AWS recorded parses, the S3 object with its payload.
func TestParseRecordedMessages(t *testing.T) {
	const seq = "49590338271490256608559692538361571095921575989136588898"
	for key, body := range recordedMessages(t) {
		m, err := ParseMessage(body)
		if err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		if m.StreamARN != testStream || m.ShardID != "shardId-000000000000" || m.StartSequenceNumber != seq || m.EndSequenceNumber != seq ||
			m.BatchSize != 1 || m.FirstArrival.IsZero() || m.Timestamp.IsZero() {
			t.Errorf("%s: %+v", key, m)
		}
		if (key == "s3_object") != (m.Payload != nil) {
			t.Errorf("%s: payload %q", key, m.Payload)
		}
	}
}

// TestParseWhatDLQWrites: the SQS/SNS message and the S3 object esm writes parse back to the
// failure record they came from; an SNS notification around the message too.
func TestParseWhatDLQWrites(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 1, 2, 345_000_000, time.UTC)
	payload := []byte(`{"Records":[{"kinesis":{"sequenceNumber":"100","data":"PCY+"},"eventID":"shardId-000000000002:100"},{"kinesis":{"sequenceNumber":"205"}}]}`)
	fr := poller.FailureRecord{Condition: poller.ConditionRecordAgeExceeded, RequestID: "r-1", FunctionARN: "arn:aws:lambda:us-east-1:111111111111:function:f",
		ApproximateInvokeCount: 4, Timestamp: at, StreamARN: testStream, ShardID: "shardId-000000000002",
		StartSequenceNumber: "100", EndSequenceNumber: "205", FirstArrival: at, LastArrival: at.Add(time.Second), BatchSize: 2, Payload: payload}
	want := Message{Condition: fr.Condition, RequestID: "r-1", FunctionARN: fr.FunctionARN, InvokeCount: 4, Timestamp: at,
		StreamARN: testStream, ShardID: fr.ShardID, StartSequenceNumber: "100", EndSequenceNumber: "205",
		FirstArrival: at, LastArrival: at.Add(time.Second), BatchSize: 2}
	sns, _ := json.Marshal(map[string]string{"Type": "Notification", "MessageId": "m", "TopicArn": "arn:aws:sns:us-east-1:111111111111:t", "Message": string(dlq.Message(fr))})
	for name, body := range map[string][]byte{"sqs": dlq.Message(fr), "sns": sns} {
		got, err := ParseMessage(body)
		if err != nil || !equalMessage(got, want) {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, want)
		}
	}
	got, err := ParseMessage(dlq.S3Object(fr))
	want.Payload = payload
	if err != nil || !equalMessage(got, want) {
		t.Errorf("s3: %+v, %v", got, err)
	}
	fr.Response = &poller.FailureResponse{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: "Unhandled"}
	if got, _ := ParseMessage(dlq.Message(fr)); got.FunctionError != "Unhandled" {
		t.Errorf("functionError %q", got.FunctionError)
	}
}

func equalMessage(a, b Message) bool {
	return bytes.Equal(a.Payload, b.Payload) && reflect.DeepEqual(withoutPayload(a), withoutPayload(b))
}

func withoutPayload(m Message) Message { m.Payload = nil; return m }

func TestParseRejects(t *testing.T) {
	good := `{"KinesisBatchInfo":{"shardId":"shardId-000000000000","startSequenceNumber":"5","endSequenceNumber":"7","batchSize":3,"streamArn":"` + testStream + `"}}`
	if _, err := ParseMessage([]byte(good)); err != nil {
		t.Fatalf("the minimal message: %v", err)
	}
	for name, body := range map[string]string{
		"not JSON":           `hello`,
		"no batch info":      `{"requestContext":{}}`,
		"SQS event source":   `{"Records":[{"eventSource":"aws:sqs"}]}`,
		"no shard":           strings.Replace(good, `"shardId-000000000000"`, `""`, 1),
		"shard with a slash": strings.Replace(good, `"shardId-000000000000"`, `"../x"`, 1),
		"start not digits":   strings.Replace(good, `"5"`, `"5a"`, 1),
		"end missing":        strings.Replace(good, `"endSequenceNumber":"7",`, ``, 1),
		"start after end":    strings.Replace(good, `"5"`, `"70"`, 1),
		"batch size 0":       strings.Replace(good, `3,`, `0,`, 1),
		"batch size too big": strings.Replace(good, `3,`, `10001,`, 1),
		"queue ARN":          strings.Replace(good, testStream, "arn:aws:sqs:us-east-1:1:q", 1),
		"payload not event":  strings.Replace(good, `}}`, `},"payload":"[1]"}`, 1),
		"payload elsewhere":  strings.Replace(good, `}}`, `},"payload":"{\"Records\":[{\"kinesis\":{\"sequenceNumber\":\"6\"}}]}"}`, 1),
		"SNS without body":   `{"Type":"Notification","Message":"{}"}`,
	} {
		if _, err := ParseMessage([]byte(body)); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestCompareSeq(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"1", "2", -1}, {"10", "9", 1}, {"007", "7", 0}, {"49590338271490256608559692538361571095921575989136588898", "49590338271490256608559692538361571095921575989136588899", -1}} {
		if got := compareSeq(c.a, c.b); got != c.want {
			t.Errorf("compareSeq(%s, %s) = %d", c.a, c.b, got)
		}
	}
}

// FuzzParseMessage: any input either fails with ErrInvalidMessage or gives a message a redrive
// can act on: a shard, an ordered range of sequence numbers, a batch size in Lambda's range, a
// Kinesis stream ARN, and a payload whose records span the range.
func FuzzParseMessage(f *testing.F) {
	for _, body := range recordedMessages(f) {
		f.Add(body)
	}
	fr := poller.FailureRecord{StreamARN: testStream, ShardID: "shardId-000000000001", StartSequenceNumber: "1", EndSequenceNumber: "2", BatchSize: 2,
		Payload: []byte(`{"Records":[{"kinesis":{"sequenceNumber":"1"}},{"kinesis":{"sequenceNumber":"2"}}]}`)}
	f.Add(dlq.Message(fr))
	f.Add(dlq.S3Object(fr))
	f.Add([]byte(`{"Type":"Notification","Message":` + strconvQuote(string(dlq.Message(fr))) + `}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := ParseMessage(body)
		if err != nil {
			if !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("error %v does not wrap ErrInvalidMessage", err)
			}
			return
		}
		if m.ShardID == "" || !isSequence(m.StartSequenceNumber) || !isSequence(m.EndSequenceNumber) ||
			compareSeq(m.StartSequenceNumber, m.EndSequenceNumber) > 0 || m.BatchSize < 1 || m.BatchSize > poller.MaxBatchSize {
			t.Fatalf("accepted %+v", m)
		}
		if _, err := kinesissrc.ParseStreamARN(m.StreamARN); err != nil {
			t.Fatalf("accepted stream %q: %v", m.StreamARN, err)
		}
		if m.Payload != nil {
			recs, err := payloadRecords(m.Payload)
			if err != nil || len(recs) == 0 || recs[0].seq != m.StartSequenceNumber || recs[len(recs)-1].seq != m.EndSequenceNumber {
				t.Fatalf("accepted payload %q: %v", m.Payload, err)
			}
		}
	})
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestReadMessagesForms: a file may hold messages one a line, pretty-printed, in an array, or as
// an SQS ReceiveMessage response (their bodies).
func TestReadMessagesForms(t *testing.T) {
	body := func(start string) string {
		return `{"KinesisBatchInfo":{"shardId":"shardId-000000000000","startSequenceNumber":"` + start + `","endSequenceNumber":"9","batchSize":1,"streamArn":"` + testStream + `"}}`
	}
	in := body("1") + "\n" + "{\n  \"KinesisBatchInfo\": {\"shardId\": \"shardId-000000000000\", \"startSequenceNumber\": \"2\", \"endSequenceNumber\": \"9\", \"batchSize\": 1, \"streamArn\": \"" + testStream + "\"}\n}\n" +
		"[" + body("3") + "," + body("4") + "]\n" +
		`{"Messages":[{"MessageId":"m","Body":` + strconvQuote(body("5")) + `}]}`
	f, err := ReadMessages(strings.NewReader(in), "in")
	if err != nil {
		t.Fatal(err)
	}
	var starts []string
	for {
		it, err := f.Next(context.Background())
		if err != nil {
			break
		}
		m, err := ParseMessage(it.Body)
		if err != nil {
			t.Fatalf("%s: %v", it.ID, err)
		}
		starts = append(starts, it.ID+"="+m.StartSequenceNumber)
	}
	if want := []string{"in:1=1", "in:2=2", "in:3=3", "in:4=4", "in:5=5"}; !reflect.DeepEqual(starts, want) {
		t.Fatalf("read %q, want %q", starts, want)
	}
	if _, err := ReadMessages(strings.NewReader(body("1")+"\n{broken"), "in"); err == nil || !strings.Contains(err.Error(), "in: message 2") {
		t.Fatalf("a broken file: %v", err)
	}
}
