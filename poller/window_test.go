package poller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/source"
)

// TestWindowEventShape renders a windowed event and decodes it into aws-lambda-go's
// KinesisTimeWindowEvent: every property lands where the Go type expects it.
func TestWindowEventShape(t *testing.T) {
	p, err := New(kinesisSource(fakekinesis.New(), "arn:aws:kinesis:us-east-1:123456789012:stream/lambda-stream"), Config{StartingPosition: TrimHorizon,
		TumblingWindow: 2 * time.Minute}, NewMemoryStore(), inprocess.New(func() {}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2020, 12, 9, 7, 4, 0, 0, time.UTC)
	r := &reader{p: p, shardID: "shardId-000000000006", progress: ShardProgress{Window: &WindowState{Start: start, State: map[string]string{"1": "state 1", "2": "state 2"}}}}
	rec := record("1", "49590338271490256608559692538361571095921575989136588898", []byte("Hello, this is a test."), time.Unix(1607497475, 0))
	payload, n := r.encode(nil, []source.Record{rec}, 10, MaxPayloadBytes)
	if n != 1 {
		t.Fatal(n)
	}
	var ev events.KinesisTimeWindowEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		t.Fatalf("%v\n%s", err, payload)
	}
	want := events.TimeWindowProperties{
		Window:  events.Window{Start: events.RFC3339EpochTime{Time: start}, End: events.RFC3339EpochTime{Time: start.Add(2 * time.Minute)}},
		State:   map[string]string{"1": "state 1", "2": "state 2"},
		ShardID: "shardId-000000000006", EventSourceARN: "arn:aws:kinesis:us-east-1:123456789012:stream/lambda-stream",
	}
	got := ev.TimeWindowProperties
	if !got.Window.Start.Equal(want.Window.Start.Time) || !got.Window.End.Equal(want.Window.End.Time) || !reflect.DeepEqual(got.State, want.State) ||
		got.ShardID != want.ShardID || got.EventSourceARN != want.EventSourceARN || got.IsFinalInvokeForWindow || got.IsWindowTerminatedEarly {
		t.Fatalf("window properties %+v, want %+v", got, want)
	}
	if len(ev.Records) != 1 || string(ev.Records[0].Kinesis.Data) != "Hello, this is a test." {
		t.Fatalf("records %+v", ev.Records)
	}
	if !strings.Contains(string(payload), `"window":{"start":"2020-12-09T07:04:00Z","end":"2020-12-09T07:06:00Z"}`) {
		t.Fatalf("window not rendered as AWS documents it: %s", payload)
	}
}

// windowSums is a handler that sums the integer data of records per partition key in the window's
// state and reports each window's totals at its final invocation.
type windowSums struct {
	mu      sync.Mutex
	totals  map[string]map[string]int // window start → key → sum
	invokes int
	omit    bool // return no state (an invalid response)
}

func (w *windowSums) handle(_ context.Context, e events.KinesisTimeWindowEvent) (events.KinesisTimeWindowEventResponse, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.invokes++
	if w.omit {
		return events.KinesisTimeWindowEventResponse{}, nil
	}
	state := map[string]string{}
	for k, v := range e.State {
		state[k] = v
	}
	for _, r := range e.Records {
		n, _ := strconv.Atoi(string(r.Kinesis.Data))
		cur, _ := strconv.Atoi(state[r.Kinesis.PartitionKey])
		state[r.Kinesis.PartitionKey] = strconv.Itoa(cur + n)
	}
	if e.IsFinalInvokeForWindow {
		if len(e.Records) != 0 {
			return events.KinesisTimeWindowEventResponse{}, fmt.Errorf("final invocation carried %d records", len(e.Records))
		}
		sums := map[string]int{}
		for k, v := range state {
			sums[k], _ = strconv.Atoi(v)
		}
		w.totals[e.Window.Start.UTC().Format(time.RFC3339)] = sums
	}
	return events.KinesisTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: state}}, nil
}

func TestTumblingWindowSumsAcrossRestart(t *testing.T) {
	var c clock
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c.set(t0.Add(5 * time.Second))
	f := fakekinesis.New(fakekinesis.WithClock(c.now))
	arn := f.CreateStream("s", 1)
	want := map[string]map[string]int{}
	put := func(at time.Time, key string, n int) {
		c.set(at)
		f.Put("s", key, []byte(strconv.Itoa(n)))
		w := at.Truncate(time.Minute).Format(time.RFC3339)
		if want[w] == nil {
			want[w] = map[string]int{}
		}
		want[w][key] += n
	}
	for i := range 30 { // window 12:00
		put(t0.Add(time.Duration(i)*time.Second), fmt.Sprint("k", i%3), i)
	}
	store := NewMemoryStore()
	h := &windowSums{totals: map[string]map[string]int{}}
	run := func() func() {
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, BatchSize: 7, TumblingWindow: time.Minute,
			PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond}, store, inprocess.New(h.handle), WithClock(c.now))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		return func() { cancel(); <-done }
	}
	stop := run()
	testkit.WaitFor(t, "the first window's batches", 5*time.Second, func() bool {
		pr, _ := store.Load(context.Background())
		w := pr["shardId-000000000000"].Window
		return w != nil && len(w.State) == 3
	})
	stop() // restart in the middle of the window: its state comes back from the store
	stop = run()
	defer stop()
	for i := range 20 { // window 12:01 closes 12:00
		put(t0.Add(time.Minute+time.Duration(i)*time.Second), fmt.Sprint("k", i%4), 100+i)
	}
	c.set(t0.Add(3 * time.Minute)) // 12:01 is over and idle: it closes too
	testkit.WaitFor(t, "two windows' totals", 5*time.Second, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.totals) == 2
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if !reflect.DeepEqual(h.totals, want) {
		t.Fatalf("window totals %v, want %v", h.totals, want)
	}
}

func TestWindowResponseWithoutStateFails(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 1, func(int) string { return "1" })
	// The handler returns {"state":null,...}: a windowed mapping needs a state object.
	h := &windowSums{totals: map[string]map[string]int{}, omit: true}
	store, dest := NewMemoryStore(), &memDest{}
	p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, TumblingWindow: time.Minute, MaximumRetryAttempts: intp(1),
		PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond}, store, inprocess.New(h.handle), WithDestination(dest))
	if err != nil {
		t.Fatal(err)
	}
	p.retryBase, p.retryMax = time.Millisecond, time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	testkit.WaitFor(t, "discard after 2 invocations", 5*time.Second, func() bool { return len(dest.records()) == 1 })
	cancel()
	<-done
	d := dest.records()[0]
	if d.ApproximateInvokeCount != 2 || d.Response == nil || d.Response.FunctionError != "" || d.StartSequenceNumber != seqs[0] {
		t.Fatalf("destination record %+v", d)
	}
}

// TestWindowWithParallelizationFactor: AWS documents no rejection of TumblingWindowInSeconds with
// ParallelizationFactor > 1, so the mapping is accepted; it runs one batch in flight per shard
// (a window's state passes from one invocation to the next), keeps the window's totals right, and
// logs one warning naming the reason.
func TestWindowWithParallelizationFactor(t *testing.T) {
	var c clock
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c.set(t0)
	f := fakekinesis.New(fakekinesis.WithClock(c.now))
	arn := f.CreateStream("s", 1)
	want := map[string]int{}
	for i := range 40 {
		c.set(t0.Add(time.Duration(i) * time.Second))
		k := fmt.Sprint("k", i%8) // eight keys: with slots they would spread over four
		f.Put("s", k, []byte(strconv.Itoa(i)))
		want[k] += i
	}
	var inFlight, peak atomic.Int64
	h := &windowSums{totals: map[string]map[string]int{}}
	handler := func(ctx context.Context, e events.KinesisTimeWindowEvent) (events.KinesisTimeWindowEventResponse, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(2 * time.Millisecond) // long enough for a second slot, were there one, to start
		return h.handle(ctx, e)
	}
	var logs testkit.SyncBuffer
	obs := &counting{states: map[string]string{}}
	p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, BatchSize: 5, ParallelizationFactor: 4, TumblingWindow: time.Minute,
		PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond}, NewMemoryStore(), inprocess.New(handler),
		WithClock(c.now), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), WithObserver(obs))
	if err != nil {
		t.Fatalf("a windowed mapping with ParallelizationFactor 4 was refused: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	testkit.WaitFor(t, "the window's batches", 5*time.Second, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.invokes >= 8
	})
	c.set(t0.Add(3 * time.Minute)) // the window is over and idle: it closes
	testkit.WaitFor(t, "the window's totals", 5*time.Second, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.totals) == 1
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := peak.Load(); n != 1 {
		t.Fatalf("%d batches of the shard in flight at once, want 1", n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if got := h.totals[t0.Format(time.RFC3339)]; !reflect.DeepEqual(got, want) {
		t.Fatalf("window totals %v, want %v", got, want)
	}
	if c := obs.snapshot(); c.invocations != h.invokes || c.invoked != 40 {
		t.Fatalf("observer saw %d invocations of %d records; the handler ran %d times (the final one too) with 40 records",
			c.invocations, c.invoked, h.invokes)
	}
	if n := strings.Count(logs.String(), "running one batch in flight per shard, because a tumbling window's state passes"); n != 1 {
		t.Fatalf("warning logged %d times, want once:\n%s", n, logs.String())
	}
}
