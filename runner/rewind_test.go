package runner

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

func (r *received) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// rewindWatch is an Observer that keeps the rewinds it is told of.
type rewindWatch struct {
	poller.NopObserver
	mu          sync.Mutex
	seen, ended []poller.RewindNotice
}

func (w *rewindWatch) RewindSeen(n poller.RewindNotice) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, n)
}

func (w *rewindWatch) RewindEnded(n poller.RewindNotice) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = append(w.ended, n)
}

func (w *rewindWatch) states() (seen, ended []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.seen {
		seen = append(seen, n.State)
	}
	for _, n := range w.ended {
		ended = append(ended, n.State)
	}
	return seen, ended
}

// sixRecords is a stream "s" of one shard with six records: the shard and its first record.
func sixRecords() (kin *fakekinesis.Fake, shard, first string) {
	kin = fakekinesis.New()
	kin.CreateStream("s", 1)
	for i := range 6 {
		id, seq := kin.Put("s", "k", []byte{byte('a' + i)})
		if i == 0 {
			shard, first = id, seq
		}
	}
	return kin, shard, first
}

// TestRunTellsRewinds: a worker on a lease table that stops for a rewind tells its observer of
// the rewind in progress while it waits, then of it applied (seen, and ended once), and reads
// the rewound records again; a worker started after it sees it as the last rewind, not ended.
func TestRunTellsRewinds(t *testing.T) {
	kin, shard, first := sixRecords()
	ddb := fakedynamo.New()
	r, _ := fakeRunner(t, kin, ddb)
	rec := newReceived(12)
	watch := &rewindWatch{}
	m := Mapping{
		Source:   Source{Stream: "s"},
		Function: Function{Handler: rec.handle},
		Config:   poller.Config{StartingPosition: poller.TrimHorizon, PollInterval: 10 * time.Millisecond},
		Store:    Store{LeaseTable: "leases", CreateLeaseTable: true, WorkerID: "w1", LeaseDuration: 2 * time.Second},
		Hooks:    Hooks{Observer: watch},
	}
	stop := runUntil(r, m)
	testkit.WaitFor(t, "6 records", 30*time.Second, func() bool { return rec.count() >= 6 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ls, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s")})
	if err != nil {
		t.Fatal(err)
	}
	q := poller.RewindRequest{Sequences: map[string]string{shard: first}}
	if _, err := lease.Rewind(ctx, ddb, "leases", kinesissrc.ShardsOf(ls.Shards), q, lease.RewindOptions{By: "ops", Wait: 20 * time.Second, LeaseDuration: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	await(t, rec.got, "the 6 records again after the rewind")
	testkit.WaitFor(t, "the rewind told ended", 30*time.Second, func() bool { _, ended := watch.states(); return len(ended) > 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	seen, ended := watch.states()
	if want := []string{lease.RewindRequested, lease.RewindApplied}; !slices.Equal(seen, want) || !slices.Equal(ended, []string{lease.RewindApplied}) {
		t.Fatalf("seen %v, ended %v; want seen %v and ended [applied]", seen, ended, want)
	}
	if n := watch.seen[0]; !n.InProgress || n.Revision != 1 || n.By != "ops" || n.Request.Sequences[shard] != first {
		t.Fatalf("the rewind in progress as seen: %+v", n)
	}
	if n := watch.ended[0]; n.InProgress || n.DoneAt.IsZero() || n.Report == "" {
		t.Fatalf("the rewind ended as seen: %+v", n)
	}

	later := &rewindWatch{}
	m.Hooks.Observer, m.Store.WorkerID = later, "w2"
	stop = runUntil(r, m)
	testkit.WaitFor(t, "the later worker told the last rewind", 30*time.Second, func() bool { seen, _ := later.states(); return len(seen) > 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if seen, ended := later.states(); !slices.Equal(seen, []string{lease.RewindApplied}) || len(ended) != 0 {
		t.Fatalf("a worker started after the rewind: seen %v, ended %v; want seen [applied], none ended", seen, ended)
	}
}

// TestRunOpenedStoreRewinds: a mapping whose store is opened by Store.Open (esm serve's
// per-mapping lease tables) stops when its lease.Dynamo sees a rewind requested, opens its store
// again (which waits for the rewind and starts under its revision), reads the rewound records,
// and tells its observer of the rewind in progress and applied, as esm run's lease table does.
func TestRunOpenedStoreRewinds(t *testing.T) {
	kin, shard, first := sixRecords()
	ddb := fakedynamo.New()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := lease.EnsureTable(ctx, ddb, "leases", true); err != nil {
		t.Fatal(err)
	}
	r, _ := fakeRunner(t, kin, ddb)
	rec := newReceived(12)
	watch := &rewindWatch{}
	var opens atomic.Int32
	open := func(ctx context.Context) (poller.Store, error) {
		opens.Add(1)
		last, err := lease.AwaitRewinds(ctx, ddb, "leases", r.Logger())
		if err != nil {
			return nil, err
		}
		return lease.NewDynamo(ddb, "leases", "w1", lease.WithLeaseDuration(2*time.Second), lease.WithRewindRevision(last.Revision))
	}
	stop := runUntil(r, Mapping{
		Source:   Source{Stream: "s"},
		Function: Function{Handler: rec.handle},
		Config:   poller.Config{StartingPosition: poller.TrimHorizon, PollInterval: 10 * time.Millisecond},
		Store:    Store{Open: open},
		Hooks:    Hooks{Observer: watch},
		UUID:     "0e6a9a3c-6b1f-4d7e-9d1e-2f3a4b5c6d7e",
	})
	testkit.WaitFor(t, "6 records", 30*time.Second, func() bool { return rec.count() >= 6 })
	ls, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s")})
	if err != nil {
		t.Fatal(err)
	}
	q := poller.RewindRequest{Sequences: map[string]string{shard: first}}
	if _, err := lease.Rewind(ctx, ddb, "leases", kinesissrc.ShardsOf(ls.Shards), q, lease.RewindOptions{Wait: 10 * time.Second, LeaseDuration: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	await(t, rec.got, "the 6 records again after the rewind")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := opens.Load(); n != 2 {
		t.Fatalf("the store was opened %d times, want 2 (at the start, after the rewind)", n)
	}
	if seen, ended := watch.states(); !slices.Equal(seen, []string{lease.RewindRequested, lease.RewindApplied}) || !slices.Equal(ended, []string{lease.RewindApplied}) {
		t.Fatalf("seen %v, ended %v; want seen [requested applied] and ended [applied]", seen, ended)
	}
}
