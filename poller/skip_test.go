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
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

// skipSeen is an observer that records the skips it is told of.
type skipSeen struct {
	NopObserver
	mu      sync.Mutex
	skipped []Skipped
	pending []string // "first..last pending", in order
	dropped atomic.Int64
}

func (s *skipSeen) BatchSkipped(_ string, k Skipped) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skipped = append(s.skipped, k)
}

func (s *skipSeen) SkipPending(_, first, last string, pending bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, fmt.Sprint(first, "..", last, " ", pending))
}

func (s *skipSeen) RecordsDropped(_ string, n int) { s.dropped.Add(int64(n)) }

func (s *skipSeen) all() []Skipped {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Skipped(nil), s.skipped...)
}

// poisonFirst fails every invocation whose first record is "poison".
func poisonFirst() *scripted {
	return &scripted{decide: func(_ int, e events.KinesisEvent) (json.RawMessage, error) {
		if string(e.Records[0].Kinesis.Data) == "poison" {
			return nil, errors.New("cannot parse poison")
		}
		return nil, nil
	}}
}

// TestSkipBlockedBatch: a batch retried for ever (MaximumRetryAttempts -1) is skipped on an
// order: its failure record, condition OperatorSkipped, reaches the destination once, the
// checkpoint moves past it, the next record is invoked, the observer is told; a second skip is
// refused, the shard no longer being blocked. Refusals leave the shard as it was.
func TestSkipBlockedBatch(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 3, func(i int) string { return []string{"poison", "poison", "ok"}[i] })
	h := poisonFirst()
	obs := &skipSeen{}
	sk := NewSkips()
	fh := startFailureHarness(t, Config{BatchSize: 2, MaximumRetryAttempts: new(-1)}, f, arn, h, WithObserver(obs), WithSkips(sk))
	testkit.WaitFor(t, "the poison batch retried", 5*time.Second, func() bool { return len(h.invocations()) >= 3 })

	ctx := context.Background()
	for _, c := range []struct {
		req  SkipRequest
		want error
	}{
		{SkipRequest{ShardID: "shardId-000000000009"}, ErrSkipUnknownShard},
		{SkipRequest{ShardID: shard0, First: seqs[1]}, ErrSkipBatchChanged},
		{SkipRequest{ShardID: shard0, First: seqs[0], Last: seqs[2]}, ErrSkipBatchChanged},
	} {
		if _, err := sk.Skip(ctx, c.req); !errors.Is(err, c.want) {
			t.Fatalf("Skip(%+v) = %v, want %v", c.req, err, c.want)
		}
	}
	if got := fh.dest.records(); len(got) != 0 {
		t.Fatalf("a refused skip delivered %d failure records", len(got))
	}
	got, err := sk.Skip(ctx, SkipRequest{ShardID: shard0, First: seqs[0], Last: seqs[1]})
	if err != nil {
		t.Fatal(err)
	}
	if got.First != seqs[0] || got.Last != seqs[1] || got.Records != 2 || got.Attempts < 3 || got.Destination != "" {
		t.Fatalf("Skipped %+v", got) // the harness's Config names no destination ARN
	}
	waitCheckpoint(t, fh.store, seqs[2])
	recs := fh.dest.records()
	if len(recs) != 1 || recs[0].Condition != ConditionOperatorSkipped || recs[0].StartSequenceNumber != seqs[0] ||
		recs[0].EndSequenceNumber != seqs[1] || recs[0].BatchSize != 2 || recs[0].ApproximateInvokeCount < 3 || recs[0].Response == nil {
		t.Fatalf("failure records %+v", recs)
	}
	if calls := h.invocations(); calls[len(calls)-1][0] != "ok" {
		t.Fatalf("the record after the skipped batch was not invoked: %q", calls)
	}
	if s := obs.all(); len(s) != 1 || s[0] != got {
		t.Fatalf("observer told %+v, want %+v", s, got)
	}
	obs.mu.Lock()
	pending := obs.pending
	obs.mu.Unlock()
	if want := []string{seqs[0] + ".." + seqs[1] + " true", seqs[0] + ".." + seqs[1] + " false"}; !slices.Equal(pending, want) {
		t.Fatalf("SkipPending calls %q, want %q", pending, want)
	}
	if _, err := sk.Skip(ctx, SkipRequest{ShardID: shard0}); !errors.Is(err, ErrSkipNotBlocked) {
		t.Fatalf("second skip: %v, want ErrSkipNotBlocked", err)
	}
	if err := fh.stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(fh.dest.records()); n != 1 {
		t.Fatalf("%d failure records, want the skipped batch's alone", n)
	}
}

// TestSkipWithoutDestination: without an on-failure destination the skipped batch is dropped,
// logged and counted (DroppedEventCount), and the shard moves on.
func TestSkipWithoutDestination(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 2, func(i int) string { return []string{"poison", "ok"}[i] })
	h := poisonFirst()
	obs := &skipSeen{}
	sk := NewSkips()
	store := NewMemoryStore()
	p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, BatchSize: 1, PollInterval: 10 * time.Millisecond,
		MinPollSpacing: time.Millisecond, ShardSyncInterval: time.Hour}, store, inprocess.New(h.handle), WithObserver(obs), WithSkips(sk))
	if err != nil {
		t.Fatal(err)
	}
	stop := startPoller(t, p)
	testkit.WaitFor(t, "the poison record retried", 5*time.Second, func() bool { return len(h.invocations()) >= 2 })
	got, err := sk.Skip(context.Background(), SkipRequest{ShardID: shard0})
	if err != nil {
		t.Fatal(err)
	}
	waitCheckpoint(t, store, seqs[1])
	if got.Destination != "" || got.Records != 1 || obs.dropped.Load() != 1 {
		t.Fatalf("Skipped %+v, dropped %d", got, obs.dropped.Load())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestSkipFencedByLease: an order taken after the worker lost the shard's lease skips nothing:
// no failure record, no checkpoint; the caller is told. The order is armed while an invocation
// hangs, the lease is taken away, then the invocation fails: the batch takes the order at its
// retry and refuses it.
func TestSkipFencedByLease(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	putN(f, 1, func(int) string { return "poison" })
	release := make(chan struct{})
	var calls atomic.Int64
	inv := inprocess.New(func(ctx context.Context, e events.KinesisEvent) (json.RawMessage, error) {
		if calls.Add(1) == 2 { // the second invocation hangs until released
			<-release
		}
		return nil, errors.New("cannot parse poison")
	})
	table := newLeaseTable()
	w := &memWorker{t: table, id: "w1"}
	sk := NewSkips()
	dest := &memDest{}
	startWorkerWith(t, f, arn, w, inv, []Option{WithCoordinator(w), WithSkips(sk), WithDestination(dest)})
	testkit.WaitFor(t, "the second invocation hanging", 5*time.Second, func() bool { return calls.Load() == 2 })
	res := make(chan error, 1)
	go func() { _, err := sk.Skip(context.Background(), SkipRequest{ShardID: shard0}); res <- err }()
	testkit.WaitFor(t, "the order armed", 5*time.Second, func() bool {
		sk.mu.Lock()
		defer sk.mu.Unlock()
		for _, k := range sk.runs[shard0] {
			if k.order != nil {
				return true
			}
		}
		return false
	})
	table.mu.Lock()
	table.owner[shard0] = "w2" // another worker took the lease
	table.mu.Unlock()
	close(release)
	select {
	case err := <-res:
		if !errors.Is(err, ErrSkipNotDone) || !strings.Contains(err.Error(), "lost its lease") {
			t.Fatalf("Skip = %v, want refused: the lease was lost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Skip did not return")
	}
	if n := len(dest.records()); n != 0 {
		t.Fatalf("a worker without the lease delivered %d failure records", n)
	}
	table.mu.Lock()
	defer table.mu.Unlock()
	if cp := table.progress[shard0].Checkpoint; cp != "" {
		t.Fatalf("checkpoint moved to %s by a worker without the lease", cp)
	}
}

// TestSkipWithdrawn: a request whose context ends before the batch took the order withdraws it:
// nothing is skipped later.
func TestSkipWithdrawn(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	putN(f, 1, func(int) string { return "poison" })
	release := make(chan struct{})
	var calls atomic.Int64
	h := &scripted{decide: func(int, events.KinesisEvent) (json.RawMessage, error) {
		if calls.Add(1) == 2 {
			<-release
		}
		return nil, errors.New("cannot parse poison")
	}}
	sk := NewSkips()
	fh := startFailureHarness(t, Config{BatchSize: 1}, f, arn, h, WithSkips(sk))
	testkit.WaitFor(t, "the second invocation hanging", 5*time.Second, func() bool { return calls.Load() == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := sk.Skip(ctx, SkipRequest{ShardID: shard0}); !errors.Is(err, ErrSkipNotDone) {
		t.Fatalf("Skip = %v, want withdrawn", err)
	}
	close(release)
	testkit.WaitFor(t, "the batch retried after the withdrawn order", 5*time.Second, func() bool { return calls.Load() >= 4 })
	if n := len(fh.dest.records()); n != 0 {
		t.Fatalf("a withdrawn skip delivered %d failure records", n)
	}
}
