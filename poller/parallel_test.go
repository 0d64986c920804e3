package poller

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

func TestTrackerFinishedPrefix(t *testing.T) {
	tr := newTracker()
	recs := []string{"1", "2", "3", "4", "5"}
	add := func(seqs ...string) {
		for _, s := range seqs {
			tr.add([]source.Record{record("k", s, nil, time.Time{})})
		}
	}
	add(recs...)
	fin := func(seqs ...string) string {
		var batch []source.Record
		for _, s := range seqs {
			batch = append(batch, record("k", s, nil, time.Time{}))
		}
		return tr.finish(batch)
	}
	if got := fin("2", "3"); got != "" {
		t.Fatalf("finished 2,3 before 1: checkpoint %q, want none", got)
	}
	if got := fin("1"); got != "3" {
		t.Fatalf("after 1: checkpoint %q, want 3", got)
	}
	if got := fin("5"); got != "" {
		t.Fatalf("after 5 with 4 open: %q", got)
	}
	if got := fin("4"); got != "5" || tr.outstanding() != 0 {
		t.Fatalf("after 4: %q, outstanding %d", got, tr.outstanding())
	}
}

// TestParallelizationFactorTenInFlight: PF 10 on one shard with 100 partition keys: ten batches
// are in flight at once, per-key order holds, everything is delivered once.
func TestParallelizationFactorTenInFlight(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	counters := map[string]int{}
	for i := range 1000 {
		k := fmt.Sprintf("key-%d", i%100)
		f.Put("s", k, fmt.Appendf(nil, "%s:%d", k, counters[k]))
		counters[k]++
	}
	var inFlight, peak atomic.Int64
	reached := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var got []delivery
	handler := func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if n == 10 {
			once.Do(func() { close(reached) })
		}
		select { // hold each batch until ten are in flight together
		case <-reached:
		case <-time.After(5 * time.Second):
			return events.KinesisEventResponse{}, errors.New("ten batches were never in flight at once")
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range e.Records {
			got = append(got, delivery{pk: r.Kinesis.PartitionKey, seq: r.Kinesis.SequenceNumber, data: string(r.Kinesis.Data)})
		}
		return events.KinesisEventResponse{}, nil
	}
	store := NewMemoryStore()
	p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, BatchSize: 10, ParallelizationFactor: 10,
		PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond}, store, inprocess.New(handler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	testkit.WaitFor(t, "1000 records", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= 1000 })
	testkit.WaitFor(t, "checkpoint at the last record", 5*time.Second, func() bool {
		pr, _ := store.Load(context.Background())
		mu.Lock()
		defer mu.Unlock()
		last := got[0].seq
		for _, d := range got {
			if fakekinesis.CompareSeq(d.seq, last) > 0 {
				last = d.seq
			}
		}
		return pr["shardId-000000000000"].Checkpoint == last
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if peak.Load() != 10 {
		t.Fatalf("peak %d batches in flight, want 10", peak.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	checkDelivered(t, got, counters)
}

// crashStore persists saves until crash() is called, then freezes: what it holds is what a killed
// process would have left on disk.
type crashStore struct {
	mu      sync.Mutex
	m       map[string]ShardProgress
	crashed bool
}

func (s *crashStore) Load(context.Context) (map[string]ShardProgress, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.m), nil
}

func (s *crashStore) Save(_ context.Context, u map[string]ShardProgress) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.crashed {
		maps.Copy(s.m, u)
	}
	return nil
}

// TestParallelCrashLosesNothing: a PF-10 mapping "crashes" mid-run (its store and its handler's
// record freeze at one instant); a new one started from what was persisted delivers the rest. Each
// record is delivered at least once and first deliveries keep put order per key.
func TestParallelCrashLosesNothing(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	counters := map[string]int{}
	for i := range 2000 {
		k := fmt.Sprintf("key-%d", i%100)
		f.Put("s", k, fmt.Appendf(nil, "%s:%d", k, counters[k]))
		counters[k]++
	}
	store := &crashStore{m: map[string]ShardProgress{}}
	var mu sync.Mutex
	var got []delivery
	crashed := false
	handler := func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		time.Sleep(time.Millisecond) // a handler that takes a little time, so batches overlap
		mu.Lock()
		defer mu.Unlock()
		if !crashed {
			for _, r := range e.Records {
				got = append(got, delivery{pk: r.Kinesis.PartitionKey, seq: r.Kinesis.SequenceNumber, data: string(r.Kinesis.Data)})
			}
		}
		return events.KinesisEventResponse{}, nil
	}
	run := func() func() {
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, BatchSize: 10, ParallelizationFactor: 10,
			PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond}, store, inprocess.New(handler))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	stop := run()
	testkit.WaitFor(t, "700 deliveries", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= 700 })
	mu.Lock()
	store.mu.Lock()
	crashed, store.crashed = true, true // the instant of the crash
	store.mu.Unlock()
	pre := len(got)
	mu.Unlock()
	stop()
	store.mu.Lock()
	store.crashed = false
	store.mu.Unlock()
	mu.Lock()
	crashed = false
	mu.Unlock()
	stop = run()
	testkit.WaitFor(t, "every record after the restart", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]bool{}
		for _, d := range got {
			seen[d.data] = true
		}
		return len(seen) == 2000
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	var first []delivery
	for _, d := range got {
		if !seen[d.data] {
			seen[d.data] = true
			first = append(first, d)
		}
	}
	checkDelivered(t, first, counters)
	t.Logf("crash after %d deliveries; %d records delivered again after the restart", pre, len(got)-len(first))
}

// TestParallelAcrossSplit: with slots, a parent read to its end is drained (every slot finished)
// before it is recorded finished, and its children start only then.
func TestParallelAcrossSplit(t *testing.T) {
	h := newHarness(t, 1)
	h.cfg.ParallelizationFactor = 4
	h.cfg.BatchSize = 5
	counters := map[string]int{}
	h.put(20, 200, counters)
	kids := h.fake.Split("s", "shardId-000000000000")
	h.put(20, 200, counters)
	h.start()
	testkit.WaitFor(t, "all 400 records", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 400 })
	got := h.rec.deliveries()
	checkDelivered(t, got, counters)
	checkLineage(t, got, map[string][]string{kids[0]: {"shardId-000000000000"}, kids[1]: {"shardId-000000000000"}})
	testkit.WaitFor(t, "the parent recorded finished", 5*time.Second, func() bool {
		pr, _ := h.store.Load(context.Background())
		return pr["shardId-000000000000"].Finished
	})
}

// TestParallelSlotCutsAtPayloadLimit: a slot's batch is cut before its event passes 6 MiB and the
// rest goes back to the head of the slot's queue, in order.
func TestParallelSlotCutsAtPayloadLimit(t *testing.T) {
	h := newHarness(t, 1)
	h.cfg.ParallelizationFactor = 2
	h.cfg.BatchSize = 10
	big := make([]byte, 1<<20)
	var seqs []string
	for range 10 {
		_, seq := h.fake.Put("s", "one-key", big)
		seqs = append(seqs, seq)
	}
	h.start()
	testkit.WaitFor(t, "ten 1 MiB records", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 10 })
	got := h.rec.deliveries()
	sizes := map[int]int{}
	for i, d := range got {
		if d.seq != seqs[i] {
			t.Fatalf("delivery %d is %s, want %s (order)", i, d.seq, seqs[i])
		}
		sizes[d.invocation]++
	}
	for inv, n := range sizes {
		if n > 4 {
			t.Fatalf("invocation %d carried %d MiB records: over the 6 MiB limit", inv, n)
		}
	}
}
