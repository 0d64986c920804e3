package inprocess

import (
	"context"
	"encoding/base64"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

// viaAWSLambdaGo is the event aws-lambda-go's own decoding hands a Kinesis handler for payload,
// and its error.
func viaAWSLambdaGo(t testing.TB, payload []byte) (events.KinesisEvent, error) {
	t.Helper()
	var got events.KinesisEvent
	_, err := lambda.NewHandler(func(_ context.Context, e events.KinesisEvent) error {
		got = e
		return nil
	}).Invoke(context.Background(), payload)
	return got, err
}

// record renders one record as esm's poller does (poller/event.go), with the given values spliced
// in raw (already escaped as JSON).
func record(pk, seq, data, ts, shard, region string) string {
	return `{"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":"` + pk + `","sequenceNumber":"` + seq +
		`","data":"` + data + `","approximateArrivalTimestamp":` + ts +
		`},"eventSource":"aws:kinesis","eventVersion":"1.0","eventID":"` + shard + ":" + seq +
		`","eventName":"aws:kinesis:record","invokeIdentityArn":"arn:aws:iam::000000000000:role/r","awsRegion":"` + region +
		`","eventSourceARN":"arn:aws:kinesis:us-east-1:000000000000:stream/s"}`
}

func event(records ...string) []byte {
	return []byte(`{"Records":[` + strings.Join(records, ",") + `]}`)
}

var b64 = base64.StdEncoding.EncodeToString

// fastCases are payloads in the fast path's subset: the decoder must take them.
var fastCases = map[string][]byte{
	"no records":  event(),
	"one record":  event(record("k", "49590338271490256608559692538361571095921575989136588898", b64([]byte("hello")), "1700000000.123", "shardId-000000000000", "us-east-1")),
	"empty data":  event(record("k", "1", "", "1700000000", "shardId-000000000000", "us-east-1")),
	"binary data": event(record("k", "1", b64([]byte{0, 1, 0xff, 0xfe, '"', '\\'}), "0", "shardId-000000000000", "us-east-1")),
	"1 KiB data":  event(record("k", "1", b64([]byte(strings.Repeat("x", 1024))), "1733000000.999999", "shardId-000000000001", "us-east-1")),
	"unicode key": event(record("clé-ü-日本", "2", b64([]byte("x")), "1.5", "shardId-000000000000", "eu-west-1")),
	"many records": event(
		record("a", "1", b64([]byte("1")), "1700000000.001", "shardId-000000000000", "us-east-1"),
		record("b", "2", b64([]byte("22")), "1700000000.002", "shardId-000000000000", "us-east-1"),
		record("a", "3", b64([]byte("333")), "1700000001.5", "shardId-000000000000", "us-east-1")),
	"exponent time":   event(record("k", "1", "", "1.7e9", "shardId-000000000000", "us-east-1")),
	"negative time":   event(record("k", "1", "", "-1.25", "shardId-000000000000", "us-east-1")),
	"nanosecond time": event(record("k", "1", "", strconv.FormatFloat(float64(1733000000123456789)/1e9, 'f', -1, 64), "shardId-000000000000", "us-east-1")),
}

// slowCases leave the fast path's subset: the decoder must refuse them (aws-lambda-go decodes).
var slowCases = map[string][]byte{
	"escaped key":         event(record(`a\"b`, "1", "", "1", "shardId-000000000000", "us-east-1")),
	"escaped unicode":     event(record(`\u003c`, "1", "", "1", "shardId-000000000000", "us-east-1")),
	"whitespace":          []byte(`{"Records": []}`),
	"other member":        []byte(`{"Records":[{"kinesis":{},"extra":1}]}`),
	"null data":           []byte(`{"Records":[{"kinesis":{"data":null}}]}`),
	"bad base64":          []byte(`{"Records":[{"kinesis":{"data":"!!"}}]}`),
	"invalid utf-8":       []byte("{\"Records\":[{\"eventID\":\"\xff\"}]}"),
	"trailing bytes":      []byte(`{"Records":[]} {}`),
	"other case key":      []byte(`{"Records":[{"EventID":"x"}]}`),
	"string timestamp":    []byte(`{"Records":[{"kinesis":{"approximateArrivalTimestamp":"1"}}]}`),
	"leading zero":        []byte(`{"Records":[{"kinesis":{"approximateArrivalTimestamp":01}}]}`),
	"huge number":         []byte(`{"Records":[{"kinesis":{"approximateArrivalTimestamp":1e400}}]}`),
	"not an event":        []byte(`{}`),
	"unterminated":        []byte(`{"Records":[{"eventID":"x]}`),
	"raw newline in data": []byte("{\"Records\":[{\"kinesis\":{\"data\":\"aGk=\naGk=\"}}]}"),
	"escape in data":      []byte(`{"Records":[{"kinesis":{"data":"a\/8="}}]}`),
	"control character":   []byte("{\"Records\":[{\"eventID\":\"a\tb\"}]}"),
}

// TestFastDecodeMatchesAWSLambdaGo: for every payload the fast path takes, the struct the handler
// receives is deep-equal to the one aws-lambda-go's decoding gives; payloads outside its subset
// are left to aws-lambda-go.
func TestFastDecodeMatchesAWSLambdaGo(t *testing.T) {
	for name, payload := range fastCases {
		t.Run(name, func(t *testing.T) {
			fast, ok := decodeKinesisEvent(payload)
			if !ok {
				t.Fatalf("fast path refused %s", payload)
			}
			want, err := viaAWSLambdaGo(t, payload)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fast, want) {
				t.Fatalf("fast decode\n%#v\naws-lambda-go\n%#v", fast, want)
			}
		})
	}
	for name, payload := range slowCases {
		t.Run("refuses "+name, func(t *testing.T) {
			if _, ok := decodeKinesisEvent(payload); ok {
				t.Fatalf("fast path took %s", payload)
			}
		})
	}
}

// FuzzFastDecode: whatever the payload, when the fast path takes it, aws-lambda-go decodes it
// without error into a deep-equal struct.
func FuzzFastDecode(f *testing.F) {
	for _, p := range fastCases {
		f.Add(p)
	}
	for _, p := range slowCases {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		fast, ok := decodeKinesisEvent(payload)
		if !ok {
			return
		}
		want, err := viaAWSLambdaGo(t, payload)
		if err != nil {
			t.Fatalf("fast path took %q, which aws-lambda-go rejects: %v", payload, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("%q: fast decode\n%#v\naws-lambda-go\n%#v", payload, fast, want)
		}
	})
}

// TestFastPathIsTaken: a Kinesis handler is called directly for esm's encoding (no reflection:
// no decoding by aws-lambda-go), and its response is encoded as aws-lambda-go encodes it.
func TestFastPathIsTaken(t *testing.T) {
	resp := events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{{ItemIdentifier: "<1&>"}}}
	typed := func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) { return resp, nil }
	if kinesisHandlerOf(typed) == nil || kinesisHandlerOf(func(context.Context, events.KinesisEvent) error { return nil }) == nil {
		t.Fatal("Kinesis signatures not recognised")
	}
	if kinesisHandlerOf(func(context.Context, map[string]any) error { return nil }) != nil {
		t.Fatal("a map handler taken for a Kinesis one")
	}
	for _, r := range []events.KinesisEventResponse{resp, {}, {BatchItemFailures: []events.KinesisBatchItemFailure{}}} {
		want, err := lambda.NewHandler(func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) { return r, nil }).
			Invoke(context.Background(), []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeResponse(r)
		if err != nil || string(got) != string(want) {
			t.Fatalf("response %s (%v), aws-lambda-go's %s", got, err, want)
		}
	}
}
