package poller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/source"
)

// twoSlotKeys returns two partition keys that ParallelizationFactor 2 routes to different slots.
func twoSlotKeys() (string, string) {
	for i := 1; ; i++ {
		if k := fmt.Sprintf("k%d", i); slotOf(k, 2) != slotOf("k0", 2) {
			return "k0", k
		}
	}
}

// TestSkipAtPFOutlivesItsWorker: at ParallelizationFactor 2, an operator skips a batch of one
// slot while a batch before it, of the other slot, still fails, so the checkpoint cannot pass
// the skipped record. The worker is then lost; the next one, with a function that now accepts
// everything, must not invoke the skipped record (it went to the destination; invoked now, it
// would reach the function after a later record of its key), and still handles the rest.
// Without the skip written into the progress (ShardProgress.Discarded) the second worker
// invokes it.
func TestSkipAtPFOutlivesItsWorker(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	ka, kb := twoSlotKeys()
	f.Put("s", ka, []byte("a-fails"))
	_, seqB1 := f.Put("s", kb, []byte("b-poison"))
	_, seqB2 := f.Put("s", kb, []byte("b-ok"))
	cfg := Config{StartingPosition: TrimHorizon, BatchSize: 1, ParallelizationFactor: 2, MaximumRetryAttempts: new(-1),
		PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond, ShardSyncInterval: time.Hour}
	store, dest, sk := NewMemoryStore(), &memDest{}, NewSkips()
	first := &scripted{decide: func(_ int, e events.KinesisEvent) (json.RawMessage, error) {
		if d := string(e.Records[0].Kinesis.Data); d != "b-ok" {
			return nil, errors.New("cannot handle " + d)
		}
		return nil, nil
	}}
	p, err := New(kinesisSource(f, arn), cfg, store, inprocess.New(first.handle), WithDestination(dest), WithSkips(sk))
	if err != nil {
		t.Fatal(err)
	}
	stop := startPoller(t, p)
	testkit.WaitFor(t, "both slots' batches retried", 5*time.Second, func() bool {
		return slices.ContainsFunc(first.invocations(), func(c []string) bool { return c[0] == "b-poison" }) && len(first.invocations()) >= 4
	})
	if _, err := sk.Skip(context.Background(), SkipRequest{ShardID: shard0, First: seqB1, Last: seqB1}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the record after the skipped one invoked", 5*time.Second, func() bool {
		return slices.ContainsFunc(first.invocations(), func(c []string) bool { return c[0] == "b-ok" })
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	prog, _ := store.Load(context.Background())
	if pr := prog[shard0]; seqLess(seqB1, pr.Checkpoint) || len(pr.Discarded) != 1 || pr.Discarded[0].First != seqB1 {
		t.Fatalf("progress after the skip %+v: want the checkpoint before %s and the skipped run named", pr, seqB1)
	}

	second := &scripted{decide: func(int, events.KinesisEvent) (json.RawMessage, error) { return nil, nil }}
	p2, err := New(kinesisSource(f, arn), cfg, store, inprocess.New(second.handle), WithDestination(dest))
	if err != nil {
		t.Fatal(err)
	}
	stop2 := startPoller(t, p2)
	waitCheckpoint(t, store, seqB2)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range second.invocations() {
		got = append(got, c...)
	}
	if slices.Contains(got, "b-poison") || !slices.Contains(got, "a-fails") {
		t.Fatalf("the next worker invoked %q: want a-fails, and never the skipped b-poison", got)
	}
	if pr := mustLoad(t, store)[shard0]; len(pr.Discarded) != 0 {
		t.Fatalf("the checkpoint %s passed the skipped run, still named: %+v", pr.Checkpoint, pr.Discarded)
	}
}

func mustLoad(t *testing.T, s Store) map[string]ShardProgress {
	t.Helper()
	prog, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// TestDiscardedCutInAReplay: in a rewind's window being replayed, a run discarded before that
// rewind is read again (the replay invokes it), one discarded during the replay is not (its
// records went to the destination in this replay; simulation lease seed 159: a skip in the
// replay sent again after a change of owner); after the window every run is dropped.
func TestDiscardedCutInAReplay(t *testing.T) {
	until := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	rec := func(seq, key string, at time.Time) source.Record {
		return source.Record{SequenceNumber: seq, PartitionKey: key, ArrivalTime: at}
	}
	before, during, after := rec("10", "a", until.Add(-time.Minute)), rec("20", "a", until.Add(-time.Second)), rec("30", "a", until)
	r := &reader{p: &Poller{log: slog.New(slog.DiscardHandler)}, shardID: shard0, replay: &Rewind{Revision: 2, Until: until},
		discarded: []DiscardedRun{{First: "10", Last: "10", Replay: 1}, {First: "20", Last: "20", Replay: 2}, {First: "30", Last: "30", Replay: 1}}}
	var got []string
	for _, x := range r.discardedCut([]source.Record{before, during, after}) {
		got = append(got, x.SequenceNumber)
	}
	if !slices.Equal(got, []string{"10"}) {
		t.Fatalf("records read %v, want [10]: the run discarded before the rewind, in its window", got)
	}
}
