package poller

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/source"
)

// TestBatchEncoderIsThePollersEncoder: the exported encoder renders the same bytes as the
// encoder New builds for the same mapping, defaults included, and cuts at BatchSize.
func TestBatchEncoderIsThePollersEncoder(t *testing.T) {
	cfg := Config{BatchSize: 3, StartingPosition: Latest}
	src := kinesisSource(fakekinesis.New(), "arn:aws:kinesis:eu-west-1:111111111111:stream/s")
	p, err := New(src, cfg, NewMemoryStore(), inprocess.New(func() error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	cfg.StartingPosition = "" // not needed to encode
	e, err := NewBatchEncoder(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 29, 12, 0, 0, 123_000_000, time.UTC)
	var recs []source.Record
	for i := range 5 {
		recs = append(recs, record(fmt.Sprint("k", i), fmt.Sprint(100+i), []byte("d<&>"), at))
	}
	got, n := e.Next("shardId-000000000001", recs)
	want, wn := p.enc.encodeBatch(nil, "shardId-000000000001", recs, 3, MaxPayloadBytes)
	if n != 3 || wn != 3 || !bytes.Equal(got, want) {
		t.Fatalf("Next took %d records:\n%s\nthe poller takes %d:\n%s", n, got, wn, want)
	}
	if !bytes.Contains(got, []byte(`"invokeIdentityArn":"arn:aws:iam::111111111111:role/esm"`)) {
		t.Fatalf("default invokeIdentityArn missing: %s", got)
	}
	one := e.Record("shardId-000000000001", &recs[0])
	if single, _ := e.Next("shardId-000000000001", recs[:1]); !bytes.Equal(single, append(append([]byte(eventHead), one...), eventEnd...)) {
		t.Fatalf("Record %s is not the event's only record %s", one, single)
	}
	if e.Slot("any") != 0 {
		t.Fatal("one slot without ParallelizationFactor")
	}
	cfg.ParallelizationFactor = 7
	if e, _ = NewBatchEncoder(src, cfg); e.Slot("k3") != slotOf("k3", 7) {
		t.Fatal("Slot is not the poller's routing")
	}
	if _, err := NewBatchEncoder(nil, cfg); err == nil {
		t.Fatal("no source was accepted")
	}
}

func TestHandled(t *testing.T) {
	recs := []source.Record{record("k", "1", nil, time.Time{}), record("k", "2", nil, time.Time{}), record("k", "3", nil, time.Time{})}
	for _, tc := range []struct {
		name   string
		resp   invoke.Response
		report bool
		want   int
	}{
		{"success", invoke.Response{StatusCode: 200, Payload: []byte(`null`)}, false, 3},
		{"function error", invoke.Response{StatusCode: 200, FunctionError: "Unhandled"}, false, 0},
		{"partial", invoke.Response{StatusCode: 200, Payload: []byte(`{"batchItemFailures":[{"itemIdentifier":"3"},{"itemIdentifier":"2"}]}`)}, true, 1},
		{"partial ignored without RBIF", invoke.Response{StatusCode: 200, Payload: []byte(`{"batchItemFailures":[{"itemIdentifier":"2"}]}`)}, false, 3},
		{"invalid", invoke.Response{StatusCode: 200, Payload: []byte(`{"batchItemFailures":[{"itemIdentifier":"9"}]}`)}, true, 0},
	} {
		if got := Handled(tc.resp, recs, tc.report); got != tc.want {
			t.Errorf("%s: handled %d, want %d", tc.name, got, tc.want)
		}
	}
}
