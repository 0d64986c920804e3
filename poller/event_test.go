package poller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/source"
)

func record(pk, seq string, data []byte, at time.Time) source.Record {
	return source.Record{PartitionKey: pk, SequenceNumber: seq, Data: data, ArrivalTime: at}
}

// TestEventMatchesAWSRecording renders the batch AWS recorded (10 "hello" records, keys test_0…9)
// and compares it with the recording: same keys at every level, same values, where the recording's
// placeholders stand for the values of this run.
func TestEventMatchesAWSRecording(t *testing.T) {
	raw, err := os.ReadFile("testdata/aws-recorded-event.json")
	if err != nil {
		t.Fatal(err)
	}
	const (
		region  = "eu-west-1"
		account = "111111111111"
		stream  = "lambda-stream"
		role    = "lambda-role"
	)
	streamARN := fmt.Sprintf("arn:aws:kinesis:%s:%s:stream/%s", region, account, stream)
	at := time.UnixMilli(1545084650987)
	var recs []source.Record
	seqs := map[string]string{}
	for i := range 10 {
		seq := fmt.Sprintf("4959033827149025660855969253836157109592157598913658%04d", i)
		seqs[fmt.Sprintf("<sequence-number:%d>", i+1)] = seq
		recs = append(recs, record(fmt.Sprintf("test_%d", i), seq, []byte("hello"), at))
	}
	enc := kinesisEncoder(streamARN, fmt.Sprintf("arn:aws:iam::%s:role/%s", account, role), false)
	payload, n := enc.encodeBatch(nil, "shardId-000000000000", recs, 100, MaxPayloadBytes)
	if n != 10 {
		t.Fatalf("encoded %d records, want 10", n)
	}

	want := string(raw)
	for ph, seq := range seqs {
		want = strings.ReplaceAll(want, ph+`"`, seq+`"`)
	}
	want = strings.NewReplacer("<partition>", "aws", "<region>", region, "<resource:1>", stream, "<resource:3>", role,
		`"<approximate-arrival-timestamp>"`, "1545084650.987").Replace(want)
	var got, exp any
	if err := json.Unmarshal(payload, &got); err != nil {
		t.Fatalf("payload is not JSON: %v\n%s", err, payload)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Fatalf("event differs from AWS's recording\n got: %s\nwant: %s", payload, want)
	}
	// AWS never sends encryptionType (the recording has none); aws-lambda-go omits it when empty.
	if bytes.Contains(payload, []byte("encryptionType")) {
		t.Fatal("event carries encryptionType")
	}
}

// TestEventBytesEqualAWSLambdaGo checks that the encoder's output decodes into aws-lambda-go's
// KinesisEvent with every field intact, and that each value is rendered as aws-lambda-go renders it.
func TestEventBytesEqualAWSLambdaGo(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 100_000_000, time.UTC)
	recs := []source.Record{
		record("k<&>\"\\\n\t\u2028é\x01", "1", []byte{0, 1, 2, 0xff}, at),
		record("plain", "2", []byte{}, at.Add(7*time.Millisecond)),
		record("x", "3", bytes.Repeat([]byte("z"), 1000), at.Add(time.Second)),
	}
	enc := kinesisEncoder("arn:aws:kinesis:us-east-1:000000000000:stream/s", "arn:aws:iam::000000000000:role/r", false)
	payload, _ := enc.encodeBatch(nil, "shardId-000000000007", recs, 100, MaxPayloadBytes)

	var ev events.KinesisEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		t.Fatal(err)
	}
	var want events.KinesisEvent
	for _, r := range recs {
		want.Records = append(want.Records, events.KinesisEventRecord{
			AwsRegion: "us-east-1", EventID: "shardId-000000000007:" + r.SequenceNumber, EventName: "aws:kinesis:record",
			EventSource: "aws:kinesis", EventSourceArn: "arn:aws:kinesis:us-east-1:000000000000:stream/s", EventVersion: "1.0",
			InvokeIdentityArn: "arn:aws:iam::000000000000:role/r",
			Kinesis: events.KinesisRecord{
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: r.ArrivalTime},
				Data:                        r.Data, PartitionKey: r.PartitionKey, SequenceNumber: r.SequenceNumber, KinesisSchemaVersion: "1.0",
			},
		})
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, payload, wantJSON) {
		t.Fatalf("encoder and aws-lambda-go disagree\n got: %s\nwant: %s", payload, wantJSON)
	}
	// The arrival time is a number with millisecond precision, as Lambda sends it.
	if !bytes.Contains(payload, []byte(`"approximateArrivalTimestamp":1795953600.1}`)) {
		t.Fatalf("arrival timestamp not rendered as float seconds: %s", payload)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func TestEncodeBatchCutsAtPayloadLimit(t *testing.T) {
	enc := kinesisEncoder("arn:aws:kinesis:us-east-1:000000000000:stream/s", "arn:aws:iam::000000000000:role/r", false)
	at := time.UnixMilli(1)
	data := bytes.Repeat([]byte{7}, 1<<20) // 1 MiB of data is about 1.33 MiB of base64
	var recs []source.Record
	for i := range 10 {
		recs = append(recs, record("k", fmt.Sprint(i), data, at))
	}
	payload, n := enc.encodeBatch(nil, "shardId-000000000000", recs, 100, MaxPayloadBytes)
	if n != 4 {
		t.Fatalf("took %d records of 1 MiB, want 4 (the fifth would pass 6 MiB)", n)
	}
	if len(payload) > MaxPayloadBytes {
		t.Fatalf("payload %d bytes exceeds %d", len(payload), MaxPayloadBytes)
	}
	var ev events.KinesisEvent
	if err := json.Unmarshal(payload, &ev); err != nil || len(ev.Records) != 4 {
		t.Fatalf("cut payload does not decode to 4 records: %v", err)
	}
	// BatchSize still bounds the count.
	if _, n := enc.encodeBatch(nil, "shardId-000000000000", recs[:3], 2, MaxPayloadBytes); n != 2 {
		t.Fatalf("BatchSize 2 took %d", n)
	}
	// A record too large on its own comes back alone, for the caller to refuse.
	huge := []source.Record{record("k", "1", bytes.Repeat([]byte{1}, 5<<20), at), recs[0]}
	payload, n = enc.encodeBatch(nil, "shardId-000000000000", huge, 100, MaxPayloadBytes)
	if n != 1 || len(payload) <= MaxPayloadBytes {
		t.Fatalf("oversize record: n=%d len=%d", n, len(payload))
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a", "<&>", "\u2028\u2029", "\x00\x1f\x7f", "é", "\xff\xfe", "\"\\/\b\f\n\r\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q) = %s, encoding/json gives %s", s, got, want)
		}
	})
}
