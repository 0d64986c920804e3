package poller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/source"
)

func TestClassifyResponse(t *testing.T) {
	recs := []source.Record{record("k", "11", nil, time.Time{}), record("k", "12", nil, time.Time{}), record("k", "13", nil, time.Time{})}
	ok := invoke.Response{StatusCode: 200}
	with := func(body string) invoke.Response { r := ok; r.Payload = []byte(body); return r }
	tests := []struct {
		name     string
		resp     invoke.Response
		rbif     bool
		want     outcome
		failedAt int
	}{
		// Successes recorded from AWS (§A.3).
		{"no payload", with(""), true, outcomeSuccess, 0},
		{"null", with("null"), true, outcomeSuccess, 0},
		{"empty string", with(`""`), true, outcomeSuccess, 0},
		{"empty list", with("[]"), true, outcomeSuccess, 0},
		{"empty object", with("{}"), true, outcomeSuccess, 0},
		{"empty failures", with(`{"batchItemFailures":[]}`), true, outcomeSuccess, 0},
		{"null failures", with(`{"batchItemFailures":null}`), true, outcomeSuccess, 0},
		{"aws-lambda-go zero response", with("{\"batchItemFailures\":null}\n"), true, outcomeSuccess, 0},
		// Whole-batch failures recorded from AWS (§A.3).
		{"identifier not in batch (number)", with(`{"batchItemFailures":[{"itemIdentifier":123}]}`), true, outcomeInvalid, 0},
		{"empty identifier", with(`{"batchItemFailures":[{"itemIdentifier":""}]}`), true, outcomeInvalid, 0},
		{"null identifier", with(`{"batchItemFailures":[{"itemIdentifier":null}]}`), true, outcomeInvalid, 0},
		{"no identifier key", with(`{"batchItemFailures":[{"foo":123}]}`), true, outcomeInvalid, 0},
		{"no identifier key, null value", with(`{"batchItemFailures":[{"foo":null}]}`), true, outcomeInvalid, 0},
		// Recommended where AWS is unrecorded.
		{"unknown sequence number string", with(`{"batchItemFailures":[{"itemIdentifier":"99"}]}`), true, outcomeInvalid, 0},
		{"valid mixed with invalid", with(`{"batchItemFailures":[{"itemIdentifier":"12"},{"itemIdentifier":""}]}`), true, outcomeInvalid, 0},
		{"failures not a list", with(`{"batchItemFailures":"12"}`), true, outcomeInvalid, 0},
		{"not JSON", with(`oops`), true, outcomeInvalid, 0},
		{"non-empty list", with(`[1]`), true, outcomeInvalid, 0},
		// Partial failures.
		{"one failed", with(`{"batchItemFailures":[{"itemIdentifier":"12"}]}`), true, outcomePartial, 1},
		{"lowest of several", with(`{"batchItemFailures":[{"itemIdentifier":"13"},{"itemIdentifier":"12"}]}`), true, outcomePartial, 1},
		{"first failed", with(`{"batchItemFailures":[{"itemIdentifier":"11"}]}`), true, outcomePartial, 0},
		// Without ReportBatchItemFailures the response is not read.
		{"ignored without the setting", with(`{"batchItemFailures":[{"itemIdentifier":"12"}]}`), false, outcomeSuccess, 0},
		{"function error", invoke.Response{StatusCode: 200, FunctionError: invoke.FunctionErrorUnhandled}, true, outcomeFunctionError, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, at := classifyResponse(tt.resp, recs, tt.rbif)
			if o != tt.want || at != tt.failedAt {
				t.Fatalf("got (%d, %d), want (%d, %d)", o, at, tt.want, tt.failedAt)
			}
		})
	}
}

func FuzzClassifyResponse(f *testing.F) {
	for _, s := range []string{"", "null", `""`, "[]", "{}", `{"batchItemFailures":[{"itemIdentifier":"2"}]}`, `{"batchItemFailures":[{"itemIdentifier":1e999}]}`, `[{`} {
		f.Add([]byte(s))
	}
	recs := []source.Record{record("k", "1", nil, time.Time{}), record("k", "2", nil, time.Time{})}
	f.Fuzz(func(t *testing.T, body []byte) {
		o, at := classifyResponse(invoke.Response{StatusCode: 200, Payload: body}, recs, true)
		if o == outcomePartial && (at < 0 || at >= len(recs)) {
			t.Fatalf("partial failure at %d of %d records", at, len(recs))
		}
	})
}

// memDest records on-failure records; it fails while down is set.
type memDest struct {
	mu       sync.Mutex
	got      []FailureRecord
	down     atomic.Bool
	attempts atomic.Int64
}

func (d *memDest) Deliver(_ context.Context, f FailureRecord) error {
	d.attempts.Add(1)
	if d.down.Load() {
		return errors.New("destination unreachable")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, f)
	return nil
}

func (d *memDest) records() []FailureRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.got)
}

// scripted is a handler whose response is decided per invocation.
type scripted struct {
	mu     sync.Mutex
	calls  [][]string // data of each invocation's records
	decide func(call int, e events.KinesisEvent) (json.RawMessage, error)
}

func (s *scripted) handle(_ context.Context, e events.KinesisEvent) (json.RawMessage, error) {
	s.mu.Lock()
	var data []string
	for _, r := range e.Records {
		data = append(data, string(r.Kinesis.Data))
	}
	s.calls = append(s.calls, data)
	n := len(s.calls)
	s.mu.Unlock()
	return s.decide(n, e)
}

func (s *scripted) invocations() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

type failureHarness struct {
	fake  *fakekinesis.Fake
	store *MemoryStore
	dest  *memDest
	h     *scripted
	p     *Poller
	stop  func() error
}

func startFailureHarness(t *testing.T, cfg Config, f *fakekinesis.Fake, arn string, h *scripted, opts ...Option) *failureHarness {
	t.Helper()
	fh := &failureHarness{fake: f, store: NewMemoryStore(), dest: &memDest{}, h: h}
	if cfg.StartingPosition == "" {
		cfg.StartingPosition = TrimHorizon
	}
	cfg.PollInterval, cfg.MinPollSpacing = 10*time.Millisecond, time.Millisecond
	if cfg.ShardSyncInterval == 0 {
		cfg.ShardSyncInterval = time.Hour
	}
	p, err := New(kinesisSource(f, arn), cfg, fh.store, inprocess.New(h.handle, inprocess.WithTimeout(10*time.Second)), append([]Option{WithDestination(fh.dest)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	fh.p = p
	fh.stop = startPoller(t, p)
	return fh
}

// startPoller runs p, with retries paced in milliseconds, until the returned stop (also run at the
// test's end), which returns Run's error.
func startPoller(t *testing.T, p *Poller) (stop func() error) {
	t.Helper()
	p.retryBase, p.retryMax = time.Millisecond, 5*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitCheckpoint waits until the store's checkpoint of shard 0 is seq.
func waitCheckpoint(t *testing.T, store Store, seq string) {
	t.Helper()
	testkit.WaitFor(t, "checkpoint "+seq, 5*time.Second, func() bool {
		pr, _ := store.Load(context.Background())
		return pr["shardId-000000000000"].Checkpoint == seq
	})
}

func intp(v int) *int { return &v }

func putN(f *fakekinesis.Fake, n int, data func(i int) string) []string {
	var seqs []string
	for i := range n {
		_, seq := f.Put("s", "k", []byte(data(i)))
		seqs = append(seqs, seq)
	}
	return seqs
}

// TestPartialBatchRetriesSuffix replays AWS's recording (A.3 kinesis_records and sqs_payload):
// BatchSize 3, six records, record 6 reported failed every time, MaximumRetryAttempts 3. Records
// 1–5 are delivered once; record 6 five times: once in [4,5,6], whose partial response moves the
// checkpoint to it, then 1+3 times alone, as the retry count starts again for the shrunken batch.
// One destination record names record 6 alone with approximateInvokeCount 4 and functionError null.
func TestPartialBatchRetriesSuffix(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 6, func(i int) string { return fmt.Sprint(i + 1) })
	h := &scripted{decide: func(_ int, e events.KinesisEvent) (json.RawMessage, error) {
		for _, r := range e.Records {
			if string(r.Kinesis.Data) == "6" {
				return json.RawMessage(fmt.Sprintf(`{"batchItemFailures":[{"itemIdentifier":%q}]}`, r.Kinesis.SequenceNumber)), nil
			}
		}
		return nil, nil
	}}
	fh := startFailureHarness(t, Config{BatchSize: 3, MaximumRetryAttempts: intp(3), ReportBatchItemFailures: true}, f, arn, h)
	testkit.WaitFor(t, "destination record", 5*time.Second, func() bool { return len(fh.dest.records()) == 1 })
	testkit.WaitFor(t, "checkpoint past record 6", 5*time.Second, func() bool {
		p, _ := fh.store.Load(context.Background())
		return p["shardId-000000000000"].Checkpoint == seqs[5]
	})
	d := fh.dest.records()[0]
	if d.Condition != ConditionRetryAttemptsExhausted || d.ApproximateInvokeCount != 4 || d.BatchSize != 1 ||
		d.StartSequenceNumber != seqs[5] || d.EndSequenceNumber != seqs[5] || d.Response == nil || d.Response.FunctionError != "" {
		t.Fatalf("destination record %+v", d)
	}
	want := [][]string{{"1", "2", "3"}, {"4", "5", "6"}, {"6"}, {"6"}, {"6"}, {"6"}}
	got := h.invocations()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("invocations %v, want %v", got, want)
	}
	// The recording's delivery log, sorted by partition key as the recording's test sorts it.
	deliveries := map[string]int{}
	for _, call := range got {
		for _, d := range call {
			deliveries[d]++
		}
	}
	if fmt.Sprint(deliveries) != "map[1:1 2:1 3:1 4:1 5:1 6:5]" {
		t.Fatalf("deliveries per record %v, want record 6 five times and the others once", deliveries)
	}
}

// TestPartialFailureOfFirstRecordCountsOn: when the lowest failed record is the batch's first,
// nothing moves, so the retry count carries on (MaximumRetryAttempts 2 → 3 invocations).
func TestPartialFailureOfFirstRecordCountsOn(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 2, func(i int) string { return fmt.Sprint(i + 1) })
	h := &scripted{decide: func(_ int, e events.KinesisEvent) (json.RawMessage, error) {
		return json.RawMessage(fmt.Sprintf(`{"batchItemFailures":[{"itemIdentifier":%q}]}`, e.Records[0].Kinesis.SequenceNumber)), nil
	}}
	fh := startFailureHarness(t, Config{BatchSize: 2, MaximumRetryAttempts: intp(2), ReportBatchItemFailures: true}, f, arn, h)
	testkit.WaitFor(t, "checkpoint past both records", 5*time.Second, func() bool {
		p, _ := fh.store.Load(context.Background())
		return p["shardId-000000000000"].Checkpoint == seqs[1]
	})
	dl := fh.dest.records()
	if len(dl) != 1 || dl[0].ApproximateInvokeCount != 3 || dl[0].BatchSize != 2 || dl[0].StartSequenceNumber != seqs[0] {
		t.Fatalf("destination records %+v, want both records after 3 invocations", dl)
	}
	if n := len(h.invocations()); n != 3 {
		t.Fatalf("%d invocations, want 3", n)
	}
}

// TestReportBatchItemFailureScenarios replays AWS's recorded responses with BatchSize 1,
// MaximumRetryAttempts 2: failures are invoked 3 times then reach the destination, successes once.
func TestReportBatchItemFailureScenarios(t *testing.T) {
	tests := []struct {
		name     string
		response func(seq string) (json.RawMessage, error)
		invokes  int
		fnError  string // "" = no destination record expected when invokes == 1
	}{
		{"item_identifier_not_present_failure", func(string) (json.RawMessage, error) {
			return json.RawMessage(`{"batchItemFailures":[{"itemIdentifier":123}]}`), nil
		}, 3, ""},
		{"empty_string_item_identifier_failure", func(string) (json.RawMessage, error) {
			return json.RawMessage(`{"batchItemFailures":[{"itemIdentifier":""}]}`), nil
		}, 3, ""},
		{"null_item_identifier_failure", func(string) (json.RawMessage, error) {
			return json.RawMessage(`{"batchItemFailures":[{"itemIdentifier":null}]}`), nil
		}, 3, ""},
		{"invalid_key_foo_failure", func(string) (json.RawMessage, error) {
			return json.RawMessage(`{"batchItemFailures":[{"foo":123}]}`), nil
		}, 3, ""},
		{"invalid_key_foo_null_value_failure", func(string) (json.RawMessage, error) {
			return json.RawMessage(`{"batchItemFailures":[{"foo":null}]}`), nil
		}, 3, ""},
		{"unhandled_exception_in_function", func(string) (json.RawMessage, error) { return nil, errors.New("division by zero") }, 3, invoke.FunctionErrorUnhandled},
		{"empty_string_success", func(string) (json.RawMessage, error) { return json.RawMessage(`""`), nil }, 1, ""},
		{"empty_list_success", func(string) (json.RawMessage, error) { return json.RawMessage(`[]`), nil }, 1, ""},
		{"null_success", func(string) (json.RawMessage, error) { return nil, nil }, 1, ""},
		{"empty_dict_success", func(string) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }, 1, ""},
		{"empty_batch_item_failure_success", func(string) (json.RawMessage, error) { return json.RawMessage(`{"batchItemFailures":[]}`), nil }, 1, ""},
		{"null_batch_item_failure_success", func(string) (json.RawMessage, error) { return json.RawMessage(`{"batchItemFailures":null}`), nil }, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakekinesis.New()
			arn := f.CreateStream("s", 1)
			seqs := putN(f, 1, func(int) string { return "hello" })
			h := &scripted{decide: func(_ int, e events.KinesisEvent) (json.RawMessage, error) {
				return tt.response(e.Records[0].Kinesis.SequenceNumber)
			}}
			fh := startFailureHarness(t, Config{BatchSize: 1, MaximumRetryAttempts: intp(2), ReportBatchItemFailures: true}, f, arn, h)
			testkit.WaitFor(t, "checkpoint", 5*time.Second, func() bool {
				p, _ := fh.store.Load(context.Background())
				return p["shardId-000000000000"].Checkpoint == seqs[0]
			})
			if err := fh.stop(); err != nil {
				t.Fatal(err)
			}
			if n := len(h.invocations()); n != tt.invokes {
				t.Fatalf("%d invocations, want %d", n, tt.invokes)
			}
			dl := fh.dest.records()
			if tt.invokes == 1 {
				if len(dl) != 0 {
					t.Fatalf("success sent %d destination records", len(dl))
				}
				return
			}
			if len(dl) != 1 || dl[0].ApproximateInvokeCount != 3 || dl[0].Response == nil || dl[0].Response.FunctionError != tt.fnError || dl[0].Response.StatusCode != 200 {
				t.Fatalf("destination records %+v", dl)
			}
		})
	}
}

func TestBisectIsolatesPoisonRecord(t *testing.T) {
	for _, bisect := range []bool{true, false} {
		t.Run(fmt.Sprintf("bisect=%v", bisect), func(t *testing.T) {
			f := fakekinesis.New()
			arn := f.CreateStream("s", 1)
			seqs := putN(f, 100, func(i int) string {
				if i == 37 {
					return "poison"
				}
				return fmt.Sprint(i)
			})
			handled := map[string]int{}
			var mu sync.Mutex
			h := &scripted{decide: func(_ int, e events.KinesisEvent) (json.RawMessage, error) {
				for _, r := range e.Records {
					if string(r.Kinesis.Data) == "poison" {
						return nil, errors.New("poison record")
					}
				}
				mu.Lock()
				defer mu.Unlock()
				for _, r := range e.Records {
					handled[string(r.Kinesis.Data)]++
				}
				return nil, nil
			}}
			fh := startFailureHarness(t, Config{BatchSize: 100, MaximumRetryAttempts: intp(2), BisectBatchOnFunctionError: bisect}, f, arn, h)
			testkit.WaitFor(t, "checkpoint at the end", 10*time.Second, func() bool {
				p, _ := fh.store.Load(context.Background())
				return p["shardId-000000000000"].Checkpoint == seqs[99]
			})
			dl := fh.dest.records()
			if len(dl) != 1 {
				t.Fatalf("%d destination records, want 1: %+v", len(dl), dl)
			}
			d := dl[0]
			mu.Lock()
			defer mu.Unlock()
			if bisect {
				if d.BatchSize != 1 || d.StartSequenceNumber != seqs[37] || d.EndSequenceNumber != seqs[37] || d.ApproximateInvokeCount != 3 ||
					d.Response.FunctionError != invoke.FunctionErrorUnhandled {
					t.Fatalf("destination record %+v, want the poison record alone after 3 invocations", d)
				}
				if len(handled) != 99 {
					t.Fatalf("%d good records handled, want all 99", len(handled))
				}
			} else {
				if d.BatchSize != 100 || d.StartSequenceNumber != seqs[0] || d.EndSequenceNumber != seqs[99] || d.ApproximateInvokeCount != 3 {
					t.Fatalf("destination record %+v, want the whole batch after 3 invocations", d)
				}
				if len(handled) != 0 {
					t.Fatalf("%d records handled without bisect", len(handled))
				}
			}
		})
	}
}

// clock is a settable clock for record-age tests.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestRecordAge(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	t.Run("expired before the first invocation", func(t *testing.T) {
		var c clock
		c.set(t0)
		f := fakekinesis.New(fakekinesis.WithClock(c.now))
		arn := f.CreateStream("s", 1)
		old := putN(f, 1, func(int) string { return "old" })
		c.advance(61 * time.Second)
		putN(f, 5, func(i int) string { return fmt.Sprint("fresh", i) })
		h := &scripted{decide: func(int, events.KinesisEvent) (json.RawMessage, error) { return nil, nil }}
		fh := startFailureHarness(t, Config{BatchSize: 10, MaximumRetryAttempts: intp(0), MaximumRecordAgeInSeconds: intp(60)}, f, arn, h, WithClock(c.now))
		testkit.WaitFor(t, "the fresh records", 5*time.Second, func() bool { return len(h.invocations()) == 1 })
		dl := fh.dest.records()
		if len(dl) != 1 || dl[0].Condition != ConditionRecordAgeExceeded || dl[0].ApproximateInvokeCount != 1 || dl[0].Response != nil ||
			dl[0].BatchSize != 1 || dl[0].StartSequenceNumber != old[0] {
			t.Fatalf("destination records %+v", dl)
		}
		if got := h.invocations()[0]; len(got) != 5 || got[0] != "fresh0" {
			t.Fatalf("function received %v, want the 5 fresh records", got)
		}
	})
	t.Run("expires while retrying", func(t *testing.T) {
		var c clock
		c.set(t0)
		f := fakekinesis.New(fakekinesis.WithClock(c.now))
		arn := f.CreateStream("s", 1)
		seqs := putN(f, 1, func(int) string { return "doomed" })
		h := &scripted{decide: func(int, events.KinesisEvent) (json.RawMessage, error) {
			c.advance(8 * time.Second) // each attempt takes 8 s of the record's life
			return nil, errors.New("always fails")
		}}
		fh := startFailureHarness(t, Config{MaximumRecordAgeInSeconds: intp(60)}, f, arn, h, WithClock(c.now))
		testkit.WaitFor(t, "record age exceeded", 5*time.Second, func() bool { return len(fh.dest.records()) == 1 })
		d := fh.dest.records()[0]
		// 7 attempts reach 56 s, the 8th 64 s: the age check before a 9th gives up.
		if d.Condition != ConditionRecordAgeExceeded || d.ApproximateInvokeCount != 8 || d.Response != nil || d.StartSequenceNumber != seqs[0] {
			t.Fatalf("destination record %+v", d)
		}
		if n := len(h.invocations()); n != 8 {
			t.Fatalf("%d invocations, want 8", n)
		}
	})
}

func TestDestinationDownBlocksShard(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 3, func(i int) string { return []string{"a", "poison", "c"}[i] })
	h := &scripted{decide: func(_ int, e events.KinesisEvent) (json.RawMessage, error) {
		if string(e.Records[0].Kinesis.Data) == "poison" {
			return nil, errors.New("poison")
		}
		return nil, nil
	}}
	dest := &memDest{}
	dest.down.Store(true)
	fh := startFailureHarness(t, Config{BatchSize: 1, MaximumRetryAttempts: intp(0)}, f, arn, h, WithDestination(dest))
	testkit.WaitFor(t, "delivery attempts while down", 5*time.Second, func() bool { return dest.attempts.Load() >= 5 })
	p, _ := fh.store.Load(context.Background())
	if cp := p["shardId-000000000000"].Checkpoint; cp != seqs[0] {
		t.Fatalf("checkpoint %q while the destination is down; want it held at %q (before the poison record)", cp, seqs[0])
	}
	for _, call := range h.invocations() {
		if call[0] == "c" {
			t.Fatal("a record after the undelivered one was invoked: the shard did not wait")
		}
	}
	dest.down.Store(false)
	testkit.WaitFor(t, "records flowing again", 5*time.Second, func() bool {
		p, _ := fh.store.Load(context.Background())
		return p["shardId-000000000000"].Checkpoint == seqs[2]
	})
	if dl := dest.records(); len(dl) != 1 || dl[0].StartSequenceNumber != seqs[1] {
		t.Fatalf("destination got %+v", dl)
	}
}

// throttler refuses the first n invocations as throttled.
type throttler struct {
	Invoker
	n atomic.Int64
}

func (t *throttler) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	if t.n.Add(-1) >= 0 {
		return invoke.Response{}, fmt.Errorf("reserved concurrency: %w", invoke.ErrThrottled)
	}
	return t.Invoker.Invoke(ctx, payload)
}

func TestThrottlesDoNotCountAsRetries(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 2, func(i int) string { return fmt.Sprint(i) })
	h := &scripted{decide: func(int, events.KinesisEvent) (json.RawMessage, error) { return nil, nil }}
	th := &throttler{Invoker: inprocess.New(h.handle)}
	th.n.Store(5)
	store, dest := NewMemoryStore(), &memDest{}
	p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, MaximumRetryAttempts: intp(0), PollInterval: 10 * time.Millisecond,
		MinPollSpacing: time.Millisecond}, store, th, WithDestination(dest))
	if err != nil {
		t.Fatal(err)
	}
	stop := startPoller(t, p)
	waitCheckpoint(t, store, seqs[1])
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(dest.records()) != 0 || len(h.invocations()) != 1 {
		t.Fatalf("throttles counted as failures: %d destination records, %d invocations", len(dest.records()), len(h.invocations()))
	}
}

// TestPoisonBlocksOnlyItsShard: one shard retries a poison record forever (the default), the other
// keeps delivering. Reported: the other shard's put-to-invoke latency while the first is blocked.
func TestPoisonBlocksOnlyItsShard(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 2)
	f.PutToShard("s", "shardId-000000000000", "p", []byte("poison"))
	var lat []time.Duration
	var mu sync.Mutex
	h := &scripted{decide: func(_ int, e events.KinesisEvent) (json.RawMessage, error) {
		if string(e.Records[0].Kinesis.Data) == "poison" {
			return nil, errors.New("poison")
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range e.Records {
			var sent time.Time
			if err := sent.UnmarshalText(r.Kinesis.Data); err == nil {
				lat = append(lat, time.Since(sent))
			}
		}
		return nil, nil
	}}
	fh := startFailureHarness(t, Config{}, f, arn, h)
	testkit.WaitFor(t, "poison retried", 5*time.Second, func() bool { return len(h.invocations()) >= 3 })
	for range 50 {
		b, _ := time.Now().MarshalText()
		f.PutToShard("s", "shardId-000000000001", "ok", b)
		time.Sleep(2 * time.Millisecond) // pacing the producer, not synchronising
	}
	testkit.WaitFor(t, "the other shard's 50 records", 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(lat) == 50 })
	p, _ := fh.store.Load(context.Background())
	if p["shardId-000000000000"].Checkpoint != "" {
		t.Fatal("the poisoned shard moved its checkpoint")
	}
	mu.Lock()
	slices.Sort(lat)
	t.Logf("while shard 0 retries a poison record, shard 1 delivered 50 records: p50 %s, max %s put→invoke", lat[25], lat[49])
	mu.Unlock()
}

// TestDestinationDownDropMode: with OnDestinationFailure drop, an undeliverable failure record is
// dropped as Lambda drops it: one failed send counted in DestinationDeliveryFailures, the records
// counted as dropped, and the shard moves on.
func TestDestinationDownDropMode(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 3, func(i int) string { return []string{"a", "poison", "c"}[i] })
	h := &scripted{decide: func(_ int, e events.KinesisEvent) (json.RawMessage, error) {
		if string(e.Records[0].Kinesis.Data) == "poison" {
			return nil, errors.New("poison")
		}
		return nil, nil
	}}
	dest := &memDest{}
	dest.down.Store(true)
	obs := &counting{states: map[string]string{}}
	fh := startFailureHarness(t, Config{BatchSize: 1, MaximumRetryAttempts: intp(0), OnDestinationFailure: DestinationFailureDrop},
		f, arn, h, WithDestination(dest), WithObserver(obs))
	waitCheckpoint(t, fh.store, seqs[2])
	if got := h.invocations(); fmt.Sprint(got) != "[[a] [poison] [c]]" {
		t.Fatalf("invocations %v, want a, poison once, then c", got)
	}
	c := obs.snapshot()
	if n := dest.attempts.Load(); n != 1 || c.destinationFailures != 1 || c.dropped != 1 || c.delivered != 0 || c.errors != 1 {
		t.Fatalf("%d delivery attempts, counts %+v; want one failed send counted, one record dropped, none delivered", n, c)
	}
}
