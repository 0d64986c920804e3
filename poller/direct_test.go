package poller

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/source"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// viaJSON is the event aws-lambda-go's own decoding hands a Kinesis handler for payload.
func viaJSON(t testing.TB, payload []byte) events.KinesisEvent {
	t.Helper()
	var got events.KinesisEvent
	if _, err := lambda.NewHandler(func(_ context.Context, e events.KinesisEvent) error {
		got = e
		return nil
	}).Invoke(context.Background(), payload); err != nil {
		t.Fatalf("aws-lambda-go refused the event: %v\n%s", err, payload)
	}
	return got
}

// directReader is a reader of shard shardID of a mapping whose function is a typed Kinesis
// handler in process, so that its batches take the direct path.
func directReader(t testing.TB, shardID string) *reader {
	t.Helper()
	cfg := Config{StartingPosition: TrimHorizon}
	p, err := New(kinesisSource(fakekinesis.New(), "arn:aws:kinesis:eu-west-3:123456789012:stream/s-é", kinesissrc.WithInvokeIdentity("arn:aws:iam::123456789012:role/r<&>")), cfg, NewMemoryStore(), inprocess.New(func(context.Context, events.KinesisEvent) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	r := &reader{p: p, shardID: shardID}
	if r.direct() == nil {
		t.Fatal("a typed Kinesis handler in process does not take the direct path")
	}
	return r
}

// checkDirect checks that the event the direct path builds for recs is deep-equal to what
// aws-lambda-go decodes from the JSON the bytes path sends, and that batch's stand-in has the
// JSON's length and cut.
func checkDirect(t testing.TB, r *reader, recs []source.Record) {
	t.Helper()
	payload, n := r.p.enc.encodeBatch(nil, r.shardID, recs, len(recs), MaxPayloadBytes)
	want := viaJSON(t, payload[:len(payload):len(payload)])
	got := r.kinesisEvent(recs[:n])
	if !reflect.DeepEqual(*got, want) {
		for i := range want.Records {
			if i < len(got.Records) && !reflect.DeepEqual(got.Records[i], want.Records[i]) {
				t.Fatalf("record %d differs\ndirect: %#v\n  JSON: %#v", i, got.Records[i], want.Records[i])
			}
		}
		t.Fatalf("events differ: direct %d records, JSON %d", len(got.Records), len(want.Records))
	}
	stand, m := r.batch(nil, recs, len(recs), MaxPayloadBytes)
	if m != n || len(stand) != len(payload) {
		t.Fatalf("stand-in: %d records of %d bytes, JSON: %d records of %d bytes", m, len(stand), n, len(payload))
	}
}

// kplRecord is data shaped as a KPL aggregated record: the magic, a protobuf-looking body and
// its MD5.
func kplRecord() []byte {
	body := []byte{0x0a, 0x01, 'k', 0x1a, 0x07, 0x08, 0x00, 0x1a, 0x03, 'a', 'b', 'c'}
	sum := md5.Sum(body)
	return append(append([]byte{0xf3, 0x89, 0x9a, 0xc2}, body...), sum[:]...)
}

func TestDirectEventMatchesJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 55, 1, 123_456_789, time.UTC)
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	cases := map[string][]source.Record{
		"plain":                         {record("k", "49590338271490256608559692538361571095921575989136588898", []byte("hello"), at)},
		"binary data, every byte value": {record("k", "1", binary, at)},
		"empty and nil data": {
			record("a", "1", []byte{}, at),
			record("b", "2", nil, at),
			record("c", "3", []byte("x"), at),
		},
		"unicode and control characters in keys": {
			record("clé-ü-日本-🙂", "1", []byte("x"), at),
			record("\x00\x01\x1f\t\n\r\"\\/<>&\u2028\u2029\u007f", "2", []byte("y"), at),
			record("\ufffd literal", "3", nil, at),
		},
		"invalid UTF-8 in key and sequence number": {
			record("bad\xff\xfe-\xc3-\xed\xa0\x80-end", "9\x80", []byte("z"), at),
			record("trunc\xe6\x97", "10", []byte("z"), at),
		},
		"huge and small sequence numbers": {
			record("k", "0", []byte("a"), at),
			record("k", strings.Repeat("9", 128), []byte("b"), at),
			record("k", "", []byte("c"), at),
		},
		"aggregated-looking data": {record("k", "1", kplRecord(), at), record("k", "2", kplRecord(), at)},
		"arrival times": {
			record("k", "1", nil, at.Truncate(time.Millisecond)),
			record("k", "2", nil, time.Unix(1733000000, 999_999_999)),
			record("k", "3", nil, time.Unix(1733000000, 1)),
			record("k", "4", nil, time.Unix(-1, 250_000_000)),
			record("k", "5", nil, time.Unix(0, 0)),
			record("k", "6", nil, time.Date(2262, 1, 1, 0, 0, 0, 7, time.FixedZone("X", 3600))),
			record("k", "7", nil, time.Now()), // with a monotonic reading
		},
		"no arrival time, nil key and sequence number": {{Data: []byte("x")}},
		"1 KiB records": func() []source.Record {
			var rs []source.Record
			for i := range 100 {
				rs = append(rs, record(fmt.Sprint("pk-", i%7), fmt.Sprint(1000+i), bytes.Repeat([]byte{byte(i)}, 1024), at.Add(time.Duration(i)*time.Microsecond)))
			}
			return rs
		}(),
	}
	for _, shard := range []string{"shardId-000000000007", "shard\xff<ü>"} {
		r := directReader(t, shard)
		for name, recs := range cases {
			t.Run(name, func(t *testing.T) { checkDirect(t, r, recs) })
		}
	}
}

// TestDirectBatchCutsAsJSON checks that batch cuts at the 6 MB of the JSON the bytes path would
// send, and leaves an event larger than that to process's check.
func TestDirectBatchCutsAsJSON(t *testing.T) {
	r := directReader(t, "shardId-000000000000")
	at := time.UnixMilli(1)
	var recs []source.Record
	for i := range 12 {
		recs = append(recs, record("k", fmt.Sprint(i), bytes.Repeat([]byte{7}, 1<<20-i*1000), at)) // base64: ~1.33 MiB each
	}
	for _, maxBytes := range []int{1, 100, 1 << 20, 3 << 20, 4<<20 + 123_456, MaxPayloadBytes} {
		payload, n := r.p.enc.encodeBatch(nil, r.shardID, recs, len(recs), maxBytes)
		_, size, m := r.p.enc.sizeBatch(nil, r.shardID, recs, len(recs), maxBytes)
		if m != n || size != len(payload) {
			t.Fatalf("maxBytes %d: sizeBatch %d records of %d bytes, encodeBatch %d of %d", maxBytes, m, size, n, len(payload))
		}
	}
	if stand, n := r.batch(nil, recs, 100, MaxPayloadBytes); n != 4 || len(stand) > MaxPayloadBytes {
		t.Fatalf("batch took %d records in %d bytes, want 4 in at most %d", n, len(stand), MaxPayloadBytes)
	}
	huge := []source.Record{record("k", "1", make([]byte, 5<<20), at)} // 5 MiB of data: ~6.7 MiB of base64
	if stand, n := r.batch(nil, huge, 100, MaxPayloadBytes); n != 1 || stand != nil {
		t.Fatalf("an event over the limit: batch gave %d records in %d bytes, want 1 and nil", n, len(stand))
	}
}

func FuzzDirectEvent(f *testing.F) {
	f.Add("k", "49590338271490256608559692538361571095921575989136588898", []byte("hello"), int64(1733000000), int64(123_456_789), "b\xffd", "shardId-000000000000")
	f.Add("\x00\u2028<", "", []byte{}, int64(-5), int64(999_999_999), "", "s\x80")
	f.Add("", "1", kplRecord(), int64(0), int64(0), "\xed\xa0\x80", "")
	f.Fuzz(func(t *testing.T, pk, seq string, data []byte, sec, nsec int64, pk2, shard string) {
		r := directReader(t, shard)
		at := time.Unix(sec%(1<<33), nsec) // within UnixNano's range, as arrival times are
		recs := []source.Record{
			record(pk, seq, data, at),
			{PartitionKey: pk2, SequenceNumber: seq + pk2, Data: data[:len(data)/2]},
			record(pk2, seq, nil, at.Add(time.Duration(nsec%1000))),
		}
		checkDirect(t, r, recs)
	})
}

// paths counts how the function was invoked.
type paths struct {
	*inprocess.Invoker
	records, bytes atomic.Int64
}

func (p *paths) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	p.bytes.Add(1)
	return p.Invoker.Invoke(ctx, payload)
}

func (p *paths) InvokeRecords(ctx context.Context, e *events.KinesisEvent) (invoke.Response, error) {
	p.records.Add(1)
	return p.Invoker.InvokeRecords(ctx, e)
}

// TestDirectPathThroughThePoller runs one stream through two mappings: one whose function takes
// the direct path, one whose function gets the JSON bytes and aws-lambda-go decodes them. Every
// record the two handlers saw must be deep-equal; and a handler answering each way (success,
// partial batch failure, invalid partial response, error, panic, timeout) must make the poller do
// the same on both paths: the same invocations, in the same order, handled the same way.
func TestDirectPathThroughThePoller(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("direct", 2)
	var entries []fakekinesis.Entry
	for i := range 40 {
		entries = append(entries, fakekinesis.Entry{PartitionKey: fmt.Sprintf("k\xff-%d-ü", i%5), Data: append(kplRecord(), byte(i))})
	}
	f.PutMany("direct", entries)

	// behaviour answers for a batch: a record whose data ends in one of the bytes below makes the
	// first invocation that holds it (fire reports the first time) answer so; otherwise success.
	behaviour := func(e events.KinesisEvent, fire func(byte) bool) (events.KinesisEventResponse, error) {
		for _, r := range e.Records {
			switch b := r.Kinesis.Data[len(r.Kinesis.Data)-1]; {
			case (b == 3 || b == 4) && fire(b):
				return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{{ItemIdentifier: r.Kinesis.SequenceNumber}}}, nil
			case b == 11 && fire(b):
				return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{{ItemIdentifier: "not-in-batch"}}}, nil
			case b == 17 && fire(b):
				return events.KinesisEventResponse{}, errors.New("boom")
			case b == 23 && fire(b):
				panic("kaboom")
			case b == 29 && fire(b):
				time.Sleep(300 * time.Millisecond) // past the timeout
				return events.KinesisEventResponse{}, nil
			}
		}
		return events.KinesisEventResponse{}, nil
	}
	type seen struct {
		mu      sync.Mutex
		records map[string][]events.KinesisEventRecord // by shard, in invocation order
		tries   map[string]int                         // by first sequence number
		handled map[string]bool                        // by data, once handled
		fired   map[byte]bool
	}
	run := func(t *testing.T, direct bool) (*seen, *paths) {
		s := &seen{records: map[string][]events.KinesisEventRecord{}, tries: map[string]int{}, handled: map[string]bool{}, fired: map[byte]bool{}}
		h := func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
			s.mu.Lock()
			first := e.Records[0].Kinesis.SequenceNumber
			s.tries[first]++
			shard, _, _ := strings.Cut(e.Records[0].EventID, ":")
			s.records[shard] = append(s.records[shard], e.Records...)
			s.mu.Unlock()
			resp, err := behaviour(e, func(b byte) bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				first := !s.fired[b]
				s.fired[b] = true
				return first
			})
			if err != nil {
				return resp, err
			}
			handled := len(e.Records) // the records before the failed one, with a partial response
			for _, f := range resp.BatchItemFailures {
				handled = 0
				for i, r := range e.Records {
					if r.Kinesis.SequenceNumber == f.ItemIdentifier {
						handled = i
					}
				}
			}
			s.mu.Lock()
			for _, r := range e.Records[:handled] {
				s.handled[string(r.Kinesis.Data)] = true
			}
			s.mu.Unlock()
			return resp, err
		}
		inv := &paths{Invoker: inprocess.New(h, inprocess.WithTimeout(100*time.Millisecond), inprocess.WithOverrunWait(time.Second))}
		var target Invoker = inv
		if !direct { // the bytes, decoded by aws-lambda-go itself
			raw := inprocess.New(func(ctx context.Context, e json.RawMessage) (json.RawMessage, error) {
				// A Handler of its own per invocation: a lambda.Handler's output bytes are reused by
				// its next invocation (see inprocess.Invoker.call).
				out, err := lambda.NewHandler(h).Invoke(ctx, e)
				return bytes.Clone(out), err
			},
				inprocess.WithTimeout(100*time.Millisecond), inprocess.WithOverrunWait(time.Second))
			target = invoke.InvokerFunc(func(ctx context.Context, payload []byte) (invoke.Response, error) {
				inv.bytes.Add(1)
				return raw.Invoke(ctx, payload)
			})
		}
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, BatchSize: 6, ReportBatchItemFailures: true,
			PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond}, NewMemoryStore(), target)
		if err != nil {
			t.Fatal(err)
		}
		p.retryBase, p.retryMax = time.Millisecond, time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		testkit.WaitFor(t, "every record handled", 5*time.Second, func() bool {
			select {
			case err := <-errc:
				t.Fatalf("poller stopped: %v", err)
			default:
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.handled) == len(entries)
		})
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		return s, inv
	}
	direct, dp := run(t, true)
	viaBytes, bp := run(t, false)
	if dp.records.Load() == 0 || dp.bytes.Load() != 0 {
		t.Fatalf("direct mapping: %d direct and %d JSON invocations, want only direct", dp.records.Load(), dp.bytes.Load())
	}
	if bp.records.Load() != 0 || bp.bytes.Load() == 0 {
		t.Fatalf("JSON mapping: %d direct and %d JSON invocations, want only JSON", bp.records.Load(), bp.bytes.Load())
	}
	if len(direct.fired) != 6 || !reflect.DeepEqual(direct.fired, viaBytes.fired) {
		t.Fatalf("answers given: direct %v, JSON %v; want all 6 on both", direct.fired, viaBytes.fired)
	}
	if !reflect.DeepEqual(direct.tries, viaBytes.tries) {
		t.Fatalf("invocations per batch differ\ndirect: %v\n  JSON: %v", direct.tries, viaBytes.tries)
	}
	if len(direct.records) != 2 {
		t.Fatalf("records seen on %d shards, want 2", len(direct.records))
	}
	for shard, recs := range direct.records {
		if !reflect.DeepEqual(recs, viaBytes.records[shard]) {
			t.Fatalf("shard %s: the handlers saw different records (direct %d, JSON %d)", shard, len(recs), len(viaBytes.records[shard]))
		}
	}
}

// TestDirectEventIsFresh: what the handler does to its event reaches neither the records (a
// retry, the on-failure record) nor the other records of the event, as with a decoded event.
func TestDirectEventIsFresh(t *testing.T) {
	r := directReader(t, "shardId-000000000000")
	recs := []source.Record{record("a", "1", []byte("one"), time.Unix(1, 0)), record("b", "2", []byte("two"), time.Unix(2, 0))}
	e := r.kinesisEvent(recs)
	e.Records[0].Kinesis.Data[0] = 'X'
	e.Records[0].Kinesis.Data = append(e.Records[0].Kinesis.Data, "!!!"...)
	if string(recs[0].Data) != "one" || string(e.Records[1].Kinesis.Data) != "two" {
		t.Fatalf("handler's change leaked: record %q, next record in the event %q", recs[0].Data, e.Records[1].Kinesis.Data)
	}
	if again := r.kinesisEvent(recs); string(again.Records[0].Kinesis.Data) != "one" {
		t.Fatalf("a retry's event has data %q", again.Records[0].Kinesis.Data)
	}
}
