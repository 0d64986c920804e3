package redrive

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/kinesis-esm/esm/dlq"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

const (
	functionARN = "arn:aws:lambda:us-east-1:000000000000:function:f"
	shard0      = "shardId-000000000000"
)

// fn is an invoker that records every payload and fails the batches fail picks.
type fn struct {
	mu       sync.Mutex
	payloads [][]byte
	arns     []string // the ARN each invocation was made as (invoke.FunctionARN)
	fail     func(payload []byte) bool
	response []byte // the response of a success (default null)
}

func (f *fn) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.payloads = append(f.payloads, bytes.Clone(payload))
	f.arns = append(f.arns, invoke.FunctionARN(ctx, ""))
	if f.fail != nil && f.fail(payload) {
		return invoke.Response{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: invoke.FunctionErrorUnhandled,
			Payload: []byte(`{"errorMessage":"poison record","errorType":"errorString"}`)}, nil
	}
	resp := f.response
	if resp == nil {
		resp = []byte("null")
	}
	return invoke.Response{StatusCode: 200, ExecutedVersion: "$LATEST", Payload: resp}, nil
}

func (f *fn) calls() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.payloads...)
}

func poisoned(payload []byte) bool { return bytes.Contains(payload, []byte(`"data":"cG9pc29u"`)) } // base64("poison")

// capture is an on-failure destination that keeps what it is given.
type capture chan poller.FailureRecord

func (c capture) Deliver(_ context.Context, f poller.FailureRecord) error { c <- f; return nil }

// fixedClock is the clock of every fake: arrival timestamps are the same in every run.
func fixedClock() time.Time { return time.Date(2026, 11, 30, 9, 15, 42, 123_000_000, time.UTC) }

// newStream makes a one-shard stream on a fake holding data, in order.
func newStream(t *testing.T, data ...string) (*fakekinesis.Fake, string, []string) {
	t.Helper()
	f := fakekinesis.New(fakekinesis.WithClock(fixedClock))
	arn := f.CreateStream("orders", 1)
	var entries []fakekinesis.Entry
	for i, d := range data {
		entries = append(entries, fakekinesis.Entry{PartitionKey: fmt.Sprint("key-", i%2), Data: []byte(d)})
	}
	return f, arn, f.PutMany("orders", entries)
}

func mapping(arn string) poller.Config {
	return poller.Config{StartingPosition: poller.TrimHorizon}
}

// failOnce runs the real poller over the stream with a function that fails on the poison record,
// no retries, and returns the failure record it sends to the on-failure destination and the
// payload of the last invocation that failed: what Lambda invoked the function with.
func failOnce(t *testing.T, f *fakekinesis.Fake, arn string, cfg poller.Config) (poller.FailureRecord, []byte) {
	t.Helper()
	cfg.MaximumRetryAttempts = new(int)
	cfg.PollInterval = 10 * time.Millisecond
	cfg.OnFailureDestination = "arn:aws:sqs:us-east-1:000000000000:failures"
	inv := &fn{fail: poisoned}
	dest := make(capture, 10)
	// The poller's clock is the fake's, a second on: the records are fresh, whatever the date, for
	// the record-age and retention rules.
	p, err := poller.New(kinesissrc.MustNew(f, arn), cfg, poller.NewMemoryStore(), inv, poller.WithDestination(dest), poller.WithFunctionARN(functionARN),
		poller.WithClock(func() time.Time { return fixedClock().Add(time.Second) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("poller: %v", err)
		}
	}()
	select {
	case fr := <-dest:
		calls := inv.calls()
		for i := len(calls) - 1; i >= 0; i-- {
			if poisoned(calls[i]) {
				return fr, calls[i]
			}
		}
		t.Fatal("no failed invocation recorded")
	case <-time.After(10 * time.Second):
		t.Fatal("no failure record")
	}
	return poller.FailureRecord{}, nil
}

// writeMessages writes message bodies to a file, one a line, and returns its path.
func writeMessages(t *testing.T, bodies ...[]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "messages.jsonl")
	if err := os.WriteFile(path, append(bytes.Join(bodies, []byte("\n")), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func run(t *testing.T, arn string, cfg poller.Config, kin kinesissrc.API, src Source, opts ...Option) (Summary, string) {
	t.Helper()
	var out bytes.Buffer
	r, err := New(kinesissrc.MustNew(kin, arn), cfg, append([]Option{WithFunctionARN(functionARN)}, append(opts, WithReporter(NewLineReporter(&out)))...)...)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := r.Run(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return sum, out.String()
}

// TestRedriveIsTheFailedBatch: the poller fails a batch (bisected down to the poison record, or
// whole) and sends its failure record; redriving that record's SQS message invokes the fixed
// function once, with exactly the bytes of the invocation that failed (same eventIDs, arrival
// timestamps, order), and consumes the message; a second redrive does nothing.
func TestRedriveIsTheFailedBatch(t *testing.T) {
	for _, bisect := range []bool{true, false} {
		t.Run(fmt.Sprintf("bisect=%v", bisect), func(t *testing.T) {
			f, arn, seqs := newStream(t, "a", "b", "poison", "d", "e", "f")
			cfg := mapping(arn)
			cfg.BatchSize, cfg.BisectBatchOnFunctionError = 6, bisect
			fr, failed := failOnce(t, f, arn, cfg)
			wantRecords := 6
			if bisect {
				wantRecords = 1
				if fr.StartSequenceNumber != seqs[2] || fr.EndSequenceNumber != seqs[2] {
					t.Fatalf("bisect isolated %s-%s, want the poison record %s", fr.StartSequenceNumber, fr.EndSequenceNumber, seqs[2])
				}
			} else if fr.StartSequenceNumber != seqs[0] || fr.EndSequenceNumber != seqs[5] {
				t.Fatalf("failure record covers %s-%s, want the whole batch", fr.StartSequenceNumber, fr.EndSequenceNumber)
			}
			path := writeMessages(t, dlq.Message(fr))
			fixed := &fn{}
			src, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sum, out := run(t, arn, cfg, f, src, WithInvoker(fixed))
			if sum.Redriven != 1 || !sum.OK() {
				t.Fatalf("summary %+v\n%s", sum, out)
			}
			calls := fixed.calls()
			if len(calls) != 1 || !bytes.Equal(calls[0], failed) {
				t.Fatalf("redrive invoked %d times; want once with the failed batch\n got: %s\nwant: %s", len(calls), calls, failed)
			}
			fixed.mu.Lock()
			as := fixed.arns[0]
			fixed.mu.Unlock()
			if as != functionARN {
				t.Fatalf("redrive invoked the function as %q, want the mapping's %s (as the poller invokes it)", as, functionARN)
			}
			if n := bytes.Count(calls[0], []byte(`"eventID"`)); n != wantRecords {
				t.Fatalf("redriven batch holds %d records, want %d", n, wantRecords)
			}
			if left, _ := os.ReadFile(path); len(bytes.TrimSpace(left)) != 0 {
				t.Fatalf("the message file still holds %q", left)
			}
			src, err = ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if sum, _ := run(t, arn, cfg, f, src, WithInvoker(fixed)); sum.Messages != 0 || len(fixed.calls()) != 1 {
				t.Fatalf("second redrive: %+v, %d invocations in all", sum, len(fixed.calls()))
			}
		})
	}
}

// TestRedriveFromS3Payload: an S3 failure object is redriven from the payload it carries, without
// reading the stream (here, its records are already trimmed away), byte for byte.
func TestRedriveFromS3Payload(t *testing.T) {
	f, arn, seqs := newStream(t, "a", "poison", "c")
	cfg := mapping(arn)
	cfg.BatchSize = 3
	fr, failed := failOnce(t, f, arn, cfg)
	obj := dlq.S3Object(fr)
	f.TrimBefore("orders", shard0, "9"+strings.Repeat("0", len(seqs[2]))) // every record gone
	fixed := &fn{}
	src, err := ReadMessages(bytes.NewReader(obj), "object")
	if err != nil {
		t.Fatal(err)
	}
	sum, out := run(t, arn, cfg, f, src, WithInvoker(fixed))
	if sum.Redriven != 1 {
		t.Fatalf("summary %+v\n%s", sum, out)
	}
	if calls := fixed.calls(); len(calls) != 1 || !bytes.Equal(calls[0], failed) {
		t.Fatalf("redrive invoked with %s, want the payload %s", calls, failed)
	}
	if n := f.Calls(fakekinesis.OpGetRecords); n != 1 {
		t.Fatalf("%d GetRecords calls: only the poller's one, the redrive reads nothing", n)
	}
}

// TestTrimmedRangeIsKept: a range trimmed by retention, wholly or in part, is reported expired,
// nothing is invoked, and its message stays in the queue, visible for the next redrive at once.
func TestTrimmedRangeIsKept(t *testing.T) {
	ctx := context.Background()
	f, arn, seqs := newStream(t, "a", "b", "c", "d")
	f.TrimBefore("orders", shard0, seqs[2])
	url, _, err := createQueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	whole := failureRecord(arn, seqs[0], seqs[1], 2)
	part := failureRecord(arn, seqs[1], seqs[3], 3)
	for _, fr := range []poller.FailureRecord{whole, part} {
		send(t, url, dlq.Message(fr))
	}
	inv := &fn{}
	sum, out := run(t, arn, mapping(arn), f, NewQueue(sqsC, url, time.Minute), WithInvoker(inv))
	if sum.Expired != 2 || sum.OK() || len(inv.calls()) != 0 {
		t.Fatalf("summary %+v, %d invocations\n%s", sum, len(inv.calls()), out)
	}
	for _, want := range []string{
		"expired        ", "records " + seqs[0] + "-" + seqs[1] + " of " + shard0 + " are trimmed by retention: the shard's oldest record is now " + seqs[2],
		"records " + seqs[1] + "-" + seqs[3] + " of " + shard0 + " are partly trimmed by retention: the oldest left is " + seqs[2],
		"2 messages: 0 redriven, 0 exported, 0 still failing, 2 expired",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("report lacks %q:\n%s", want, out)
		}
	}
	left := receiveAll(t, url)
	if len(left) != 2 || left[0] != string(dlq.Message(whole)) && left[1] != string(dlq.Message(whole)) {
		t.Fatalf("queue holds %q after the redrive; want both messages", left)
	}
}

// TestFailingRedriveKeepsMessage: while the function still fails, the message stays (the file is
// unchanged) and the summary says so; once it is fixed, the next redrive consumes it.
func TestFailingRedriveKeepsMessage(t *testing.T) {
	f, arn, seqs := newStream(t, "a", "poison")
	body := dlq.Message(failureRecord(arn, seqs[0], seqs[1], 2))
	path := writeMessages(t, body)
	src, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum, out := run(t, arn, mapping(arn), f, src, WithInvoker(&fn{fail: poisoned}))
	if sum.Failing != 1 || sum.OK() || !strings.Contains(out, `messages.jsonl:1  shardId-000000000000 `+seqs[0]+`-`+seqs[1]+`: function error (Unhandled): {"errorMessage":"poison record"`) {
		t.Fatalf("summary %+v\n%s", sum, out)
	}
	if left, _ := os.ReadFile(path); !bytes.Equal(bytes.TrimSpace(left), body) {
		t.Fatalf("file after a failing redrive: %q", left)
	}
	src, _ = ReadFile(path)
	if sum, out := run(t, arn, mapping(arn), f, src, WithInvoker(&fn{})); sum.Redriven != 1 || !sum.OK() {
		t.Fatalf("after the fix: %+v\n%s", sum, out)
	}
}

// TestPartialBatchResponseFails: with ReportBatchItemFailures, a response naming a record failed
// is a failing redrive, as it is a failing batch for the poller.
func TestPartialBatchResponseFails(t *testing.T) {
	f, arn, seqs := newStream(t, "a", "b", "c")
	cfg := mapping(arn)
	cfg.ReportBatchItemFailures = true
	src, _ := ReadMessages(bytes.NewReader(dlq.Message(failureRecord(arn, seqs[0], seqs[2], 3))), "m")
	inv := &fn{response: []byte(`{"batchItemFailures":[{"itemIdentifier":"` + seqs[1] + `"}]}`)}
	sum, out := run(t, arn, cfg, f, src, WithInvoker(inv))
	if sum.Failing != 1 || !strings.Contains(out, "partial batch response: 1 of 3 records handled, from "+seqs[1]+" on they failed") {
		t.Fatalf("summary %+v\n%s", sum, out)
	}
}

// TestFiltersAndBatchLimits: the mapping's filters pick the records of the range that were
// invoked, and a range longer than today's BatchSize is cut into batches, in order.
func TestFiltersAndBatchLimits(t *testing.T) {
	f, arn, seqs := newStream(t, `{"t":"buy","n":1}`, `{"t":"sell"}`, `{"t":"buy","n":2}`, `{"t":"sell"}`, `{"t":"buy","n":3}`)
	cfg := mapping(arn)
	cfg.FilterPatterns = []string{`{"data":{"t":["buy"]}}`}
	cfg.BatchSize = 2
	src, _ := ReadMessages(bytes.NewReader(dlq.Message(failureRecord(arn, seqs[0], seqs[4], 3))), "m")
	inv := &fn{}
	sum, out := run(t, arn, cfg, f, src, WithInvoker(inv))
	if sum.Redriven != 1 || !strings.Contains(out, "3 records in 2 invocations") {
		t.Fatalf("summary %+v\n%s", sum, out)
	}
	calls := inv.calls()
	enc, _ := poller.NewBatchEncoder(kinesissrc.MustNew(nil, arn), cfg)
	recs := fetched(t, f, arn, seqs[0], seqs[4])
	want1, _ := enc.Next(shard0, []source.Record{recs[0], recs[2]})
	want2, _ := enc.Next(shard0, []source.Record{recs[4]})
	if len(calls) != 2 || !bytes.Equal(calls[0], want1) || !bytes.Equal(calls[1], want2) {
		t.Fatalf("invocations %s", calls)
	}
	// A message whose count does not match the range (another filter, another stream) is refused.
	src, _ = ReadMessages(bytes.NewReader(dlq.Message(failureRecord(arn, seqs[0], seqs[4], 5))), "m")
	if sum, out := run(t, arn, cfg, f, src, WithInvoker(inv)); sum.Failing != 1 || !strings.Contains(out, "holds 3 records the mapping would invoke, the message names 5") {
		t.Fatalf("count mismatch: %+v\n%s", sum, out)
	}
}

// TestOtherMappingsSkipped: a queue shared with other mappings: their messages are left alone.
func TestOtherMappingsSkipped(t *testing.T) {
	f, arn, seqs := newStream(t, "a")
	other := failureRecord("arn:aws:kinesis:us-east-1:000000000000:stream/other", seqs[0], seqs[0], 1)
	otherFn := failureRecord(arn, seqs[0], seqs[0], 1)
	otherFn.FunctionARN = "arn:aws:lambda:us-east-1:000000000000:function:g"
	path := writeMessages(t, dlq.Message(other), dlq.Message(otherFn))
	src, _ := ReadFile(path)
	inv := &fn{}
	sum, out := run(t, arn, mapping(arn), f, src, WithInvoker(inv))
	if sum.Skipped != 2 || !sum.OK() || len(inv.calls()) != 0 {
		t.Fatalf("summary %+v\n%s", sum, out)
	}
}

func TestNewNeedsSomethingToDo(t *testing.T) {
	_, arn, _ := newStream(t)
	if _, err := New(kinesissrc.MustNew(fakekinesis.New(), arn), mapping(arn)); err == nil {
		t.Fatal("a redriver with no invoker, export or dry run")
	}
	cfg := mapping(arn)
	cfg.TumblingWindow = time.Minute
	if _, err := New(kinesissrc.MustNew(fakekinesis.New(), arn), cfg, WithInvoker(&fn{})); err == nil || !strings.Contains(err.Error(), "tumbling windows") {
		t.Fatalf("windowed mapping: %v", err)
	}
	if _, err := New(kinesissrc.MustNew(fakekinesis.New(), arn), cfg, WithInvoker(&fn{}), WithDryRun()); err != nil {
		t.Fatalf("a windowed mapping's dry run: %v", err)
	}
}

func failureRecord(streamARN, start, end string, n int) poller.FailureRecord {
	at := fixedClock()
	return poller.FailureRecord{
		Condition: poller.ConditionRetryAttemptsExhausted, RequestID: "6f1c2a5e-0000-4000-8000-000000000001",
		FunctionARN: functionARN, ApproximateInvokeCount: 3, Timestamp: at.Add(time.Minute),
		Response:  &poller.FailureResponse{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: "Unhandled"},
		StreamARN: streamARN, ShardID: shard0, StartSequenceNumber: start, EndSequenceNumber: end,
		FirstArrival: at, LastArrival: at, BatchSize: n,
	}
}

func fetched(t *testing.T, kin kinesissrc.API, arn, start, end string) []source.Record {
	t.Helper()
	recs, err := fetch(context.Background(), kinesissrc.MustNew(kin, arn), shard0, start, end)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func createQueue(ctx context.Context) (url, arn string, err error) {
	return local.CreateQueue(ctx, sqsC, uniqueName("failures"))
}

func send(t *testing.T, url string, body []byte) {
	t.Helper()
	if _, err := sqsC.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(string(body))}); err != nil {
		t.Fatal(err)
	}
}

func receiveAll(t *testing.T, url string) []string {
	t.Helper()
	bodies, err := local.ReceiveAll(context.Background(), sqsC, url)
	if err != nil {
		t.Fatal(err)
	}
	return bodies
}

// TestBarReporter: on a terminal, the bar counts every message; only the messages that were not
// redriven get a line, and the summary ends the report.
func TestBarReporter(t *testing.T) {
	var out bytes.Buffer
	rep := NewBarReporter(&out)
	rep.Begin(2)
	rep.Result(Result{Item: "m:1", Outcome: Redriven, Message: Message{ShardID: shard0, StartSequenceNumber: "1", EndSequenceNumber: "1"}, Records: 1, Invocations: 1})
	rep.Result(Result{Item: "m:2", Outcome: Expired, Message: Message{ShardID: shard0, StartSequenceNumber: "2", EndSequenceNumber: "3"}, Detail: "trimmed"})
	sum := Summary{Messages: 2, Redriven: 1, Expired: 1}
	rep.End(sum)
	s := out.String()
	if strings.Contains(s, "m:1") || !strings.Contains(s, "expired        m:2  shardId-000000000000 2-3: trimmed\n") ||
		!strings.HasSuffix(s, "2 messages: 1 redriven, 0 exported, 0 still failing, 1 expired\n") || !strings.Contains(s, "(1/2, ") {
		t.Fatalf("bar report:\n%q", s)
	}
}

// TestRedriveParallelizedBatch: with ParallelizationFactor > 1 a failed batch holds only the
// records of one slot, though its range spans the others' records too: the redrive picks the
// same records, and invokes the same bytes.
func TestRedriveParallelizedBatch(t *testing.T) {
	f := fakekinesis.New(fakekinesis.WithClock(fixedClock))
	arn := f.CreateStream("orders", 1)
	cfg := mapping(arn)
	cfg.ParallelizationFactor, cfg.BatchSize = 3, 10
	enc, err := poller.NewBatchEncoder(kinesissrc.MustNew(nil, arn), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var entries []fakekinesis.Entry
	slots := map[int]int{}
	for i := range 12 {
		key := fmt.Sprint("key-", i)
		slots[enc.Slot(key)]++
		entries = append(entries, fakekinesis.Entry{PartitionKey: key, Data: []byte(fmt.Sprint("r", i))})
	}
	poisonSlot := enc.Slot(entries[1].PartitionKey)
	if len(slots) < 2 || slots[poisonSlot] < 2 {
		t.Fatalf("keys spread over slots %v: the test needs the poison record's slot to hold more records, and other slots", slots)
	}
	entries[1].Data = []byte("poison")
	f.PutMany("orders", entries)
	fr, failed := failOnce(t, f, arn, cfg)
	if fr.BatchSize != slots[poisonSlot] {
		t.Fatalf("the failed batch held %d records, the poison record's slot %d", fr.BatchSize, slots[poisonSlot])
	}
	src, _ := ReadMessages(bytes.NewReader(dlq.Message(fr)), "m")
	inv := &fn{}
	sum, out := run(t, arn, cfg, f, src, WithInvoker(inv))
	if calls := inv.calls(); sum.Redriven != 1 || len(calls) != 1 || !bytes.Equal(calls[0], failed) {
		t.Fatalf("summary %+v\n%s\ninvoked %s\nwant %s", sum, out, calls, failed)
	}
}
