package poller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke"
)

// Regression tests for interleavings the hand-written scenarios missed (issue 11). They run
// under testing/synctest: virtual time, and synctest.Wait to reach the instant every goroutine
// is blocked, so the interleaving each one needs is reached every run.

// timedInvoker succeeds after taking d of (virtual) time, and records every invocation's shard,
// records and start and end times. hold, when set, is called at the start of each invocation.
type timedInvoker struct {
	d    time.Duration
	hold func(shard string)

	mu    sync.Mutex
	calls []timedCall
}

type timedCall struct {
	shard      string
	seqs       []string
	start, end time.Time
}

func (v *timedInvoker) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	var e events.KinesisEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return invoke.Response{}, err
	}
	c := timedCall{start: time.Now()}
	for _, r := range e.Records {
		c.shard, _, _ = strings.Cut(r.EventID, ":")
		c.seqs = append(c.seqs, r.Kinesis.SequenceNumber)
	}
	if v.hold != nil {
		v.hold(c.shard)
	}
	if v.d > 0 {
		t := time.NewTimer(v.d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	c.end = time.Now()
	v.mu.Lock()
	v.calls = append(v.calls, c)
	v.mu.Unlock()
	return invoke.Response{StatusCode: 200, ExecutedVersion: "$LATEST", Payload: []byte("{}")}, nil
}

func (v *timedInvoker) invocations() []timedCall {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]timedCall(nil), v.calls...)
}

// brokenStore accepts saves until broken is set, then fails every one; it counts the failures.
type brokenStore struct {
	*MemoryStore
	broken atomic.Bool
	failed atomic.Int64
}

func (s *brokenStore) Save(ctx context.Context, u map[string]ShardProgress) error {
	if s.broken.Load() {
		s.failed.Add(1)
		return errors.New("store unreachable")
	}
	return s.MemoryStore.Save(ctx, u)
}

func runPoller(t *testing.T, p *Poller) (context.CancelFunc, chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return cancel, done
}

// TestParallelStoreFailureEndsRun (issue 11, bug a): with PF > 1, slots that give up on a store
// that keeps failing end the mapping with the store's error, also while the reader waits for
// space in the slots, and also when the failure comes during a stop.
func TestParallelStoreFailureEndsRun(t *testing.T) {
	for _, stopFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("stop=%t", stopFirst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fakekinesis.New()
				arn := f.CreateStream("s", 1)
				for range 200 { // one key: one slot works, and nothing else wakes the reader
					f.Put("s", "key", []byte("x"))
				}
				store := &brokenStore{MemoryStore: NewMemoryStore()}
				p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, BatchSize: 1, ParallelizationFactor: 4,
					PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond}, store, &timedInvoker{d: time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				p.retryBase, p.retryMax = 5*time.Millisecond, 20*time.Millisecond
				store.broken.Store(true)
				if err := store.MemoryStore.Save(context.Background(), map[string]ShardProgress{"shardId-000000000000": {Start: TrimHorizon}}); err != nil {
					t.Fatal(err)
				}
				cancel, done := runPoller(t, p)
				defer cancel()
				if stopFirst {
					// Stop once the first save failed: the slots still retry on workCtx and give up.
					for store.failed.Load() == 0 {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), "store unreachable") {
						t.Fatalf("Run = %v, want the store's error", err)
					}
				default:
					cancel()
					t.Fatalf("Run still running a minute after the slots gave up on the store; after a stop it returned %v", <-done)
				}
			})
		})
	}
}

// TestParallelIteratorExpiryNoRace (issue 11, bug b): with PF > 1 the reader reopens an expired
// iterator from the shard's progress while the slots checkpoint it. Run with -race.
func TestParallelIteratorExpiryNoRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		want := map[string]bool{}
		for i := range 400 {
			_, seq := f.Put("s", fmt.Sprintf("key-%d", i%40), []byte("x"))
			want[seq] = true
		}
		var reads, expired atomic.Int64
		f.Inject(func(op string, _ any) error {
			if op == fakekinesis.OpGetRecords && reads.Add(1)%2 == 0 {
				expired.Add(1)
				return fakekinesis.ErrExpired()
			}
			return nil
		})
		inv := &timedInvoker{d: time.Millisecond}
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, BatchSize: 5, ParallelizationFactor: 4,
			PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond}, NewMemoryStore(), inv)
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		for {
			seen := 0
			for _, c := range inv.invocations() {
				seen += len(c.seqs)
			}
			if seen >= len(want) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, c := range inv.invocations() {
			for _, s := range c.seqs {
				got[s] = true
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%d of %d records delivered", len(got), len(want))
		}
		if expired.Load() < 10 || f.Calls(fakekinesis.OpGetShardIterator) < 10 {
			t.Fatalf("only %d expiries injected, %d iterators opened", expired.Load(), f.Calls(fakekinesis.OpGetShardIterator))
		}
	})
}

// TestTrimmedParentInFlightBlocksChildren (issue 11, bug c): a parent that retention trims while
// its batch is being invoked still blocks its children until that invocation has ended.
func TestTrimmedParentInFlightBlocksChildren(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		const parent = "shardId-000000000000"
		for i := range 3 {
			f.Put("s", fmt.Sprintf("key-%d", i), []byte("x"))
		}
		started, release := make(chan struct{}), make(chan struct{})
		var mu sync.Mutex
		var childStarts []time.Time
		inv := &timedInvoker{d: time.Millisecond, hold: func(shard string) {
			if shard == parent {
				close(started)
				<-release
				return
			}
			mu.Lock()
			childStarts = append(childStarts, time.Now())
			mu.Unlock()
		}}
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, PollInterval: 10 * time.Millisecond,
			MinPollSpacing: time.Millisecond, ShardSyncInterval: 100 * time.Millisecond}, NewMemoryStore(), inv)
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		<-started
		kids := f.Split("s", parent)
		for i := range 20 {
			f.Put("s", fmt.Sprintf("key-%d", i), []byte("y"))
		}
		f.Trim("s", parent)
		lists := f.Calls(fakekinesis.OpListShards)
		time.Sleep(time.Second) // ten shard syncs see the parent gone
		synctest.Wait()
		if n := f.Calls(fakekinesis.OpListShards) - lists; n < 5 {
			t.Fatalf("only %d shard syncs after the trim", n)
		}
		mu.Lock()
		early := len(childStarts)
		mu.Unlock()
		if early > 0 {
			t.Errorf("%d child invocations started while the trimmed parent's batch was still being invoked", early)
		}
		close(release)
		for {
			n := 0
			for _, c := range inv.invocations() {
				if c.shard == kids[0] || c.shard == kids[1] {
					n += len(c.seqs)
				}
			}
			if n == 20 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		var parentEnd time.Time
		for _, c := range inv.invocations() {
			if c.shard == parent {
				parentEnd = c.end
			}
		}
		for _, c := range inv.invocations() {
			if c.shard != parent && c.start.Before(parentEnd) {
				t.Errorf("child %s invoked at %v, before the parent's last invocation ended at %v", c.shard, c.start, parentEnd)
			}
		}
	})
}

// TestLatestRestartResumesWhereItStarted (issue 11, bug d): a LATEST mapping that has handled
// nothing yet resumes after a restart where it first started, so records written while it was
// down are delivered; records from before its first start are not.
func TestLatestRestartResumesWhereItStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		f.Put("s", "key", []byte("before"))
		time.Sleep(time.Second)
		store := NewMemoryStore() // what a file store keeps across the restart
		cfg := Config{StartingPosition: Latest, PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond}
		inv := &timedInvoker{}
		run := func() (context.CancelFunc, chan error) {
			p, err := New(kinesisSource(f, arn), cfg, store, inv)
			if err != nil {
				t.Fatal(err)
			}
			return runPoller(t, p)
		}
		cancel, done := run()
		time.Sleep(time.Second) // polls, finds nothing new
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := len(inv.invocations()); n != 0 {
			t.Fatalf("%d invocations before anything was written after the start", n)
		}
		time.Sleep(time.Second)
		var want []string
		for range 3 { // written while esm is down
			_, seq := f.Put("s", "key", []byte("while down"))
			want = append(want, seq)
		}
		cancel, done = run()
		time.Sleep(time.Second)
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range inv.invocations() {
			got = append(got, c.seqs...)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after the restart got %v, want the 3 records written while down %v", got, want)
		}
	})
}

// TestShardProgressJSONCompatible: progress stored before StartTimestamp existed still loads, and
// the field is left out when zero.
func TestShardProgressJSONCompatible(t *testing.T) {
	var old ShardProgress
	if err := json.Unmarshal([]byte(`{"start":"LATEST","updatedAt":"2026-01-01T00:00:00Z"}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.Start != Latest || !old.StartTimestamp.IsZero() {
		t.Fatalf("old progress decoded as %+v", old)
	}
	b, _ := json.Marshal(ShardProgress{Start: TrimHorizon})
	if strings.Contains(string(b), "startTimestamp") {
		t.Fatalf("zero StartTimestamp written: %s", b)
	}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	b, _ = json.Marshal(ShardProgress{Start: Latest, StartTimestamp: ts})
	var back ShardProgress
	if err := json.Unmarshal(b, &back); err != nil || !back.StartTimestamp.Equal(ts) {
		t.Fatalf("round trip of %s: %+v, %v", b, back, err)
	}
}

// windowCounter is a windowed function: its state counts the window's records; final
// invocations are noted. The first invocation takes firstTook.
type windowCounter struct {
	firstTook time.Duration
	mu        sync.Mutex
	calls     int
	finals    []string // "window start: count"
}

func (w *windowCounter) Invoke(_ context.Context, payload []byte) (invoke.Response, error) {
	var e events.KinesisTimeWindowEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return invoke.Response{}, err
	}
	w.mu.Lock()
	w.calls++
	first := w.calls == 1
	w.mu.Unlock()
	if first {
		time.Sleep(w.firstTook)
	}
	var n int
	fmt.Sscan(e.State["n"], &n)
	n += len(e.Records)
	if e.IsFinalInvokeForWindow {
		w.mu.Lock()
		w.finals = append(w.finals, fmt.Sprintf("%s: %d", e.Window.Start.UTC().Format(time.TimeOnly), n))
		w.mu.Unlock()
	}
	body, _ := json.Marshal(map[string]any{"state": map[string]string{"n": fmt.Sprint(n)}})
	return invoke.Response{StatusCode: 200, ExecutedVersion: "$LATEST", Payload: body}, nil
}

// TestWindowNotClosedOnStaleCatchUp (found by the simulation, seed 14): a window is closed only
// after a read that started after the window's end found nothing more. Records written into the
// window during a long invocation still join it. (The simulation also reaches the other stale
// case: a read that failed with an expired iterator after the window's end.)
func TestWindowNotClosedOnStaleCatchUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		f.Put("s", "key", []byte(`{}`)) // at 0 s: window 00:00:00–00:00:10
		fn := &windowCounter{firstTook: 12 * time.Second}
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, TumblingWindow: 10 * time.Second,
			PollInterval: time.Second, MinPollSpacing: 200 * time.Millisecond}, NewMemoryStore(), fn)
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		time.Sleep(5 * time.Second)
		for range 3 {
			f.Put("s", "key", []byte(`{}`)) // at 5 s, during the first invocation: the same window
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		fn.mu.Lock()
		defer fn.mu.Unlock()
		if want := []string{"00:00:00: 4"}; !slices.Equal(fn.finals, want) {
			t.Fatalf("final invocations %v, want %v", fn.finals, want)
		}
	})
}

// downStore fails every load and save.
type downStore struct{}

func (downStore) Load(context.Context) (map[string]ShardProgress, error) {
	return nil, errors.New("store unreachable")
}
func (downStore) Save(context.Context, map[string]ShardProgress) error {
	return errors.New("store unreachable")
}

// TestStopWhileStartingIsGraceful (found by the simulation, seed 144): a stop that arrives while
// the start still retries an unreachable store ends Run with nil, as any graceful stop does.
func TestStopWhileStartingIsGraceful(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon}, downStore{}, &timedInvoker{})
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		time.Sleep(time.Second) // a few failed loads
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v after a stop during the start, want nil", err)
		}
	})
}
