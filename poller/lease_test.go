package poller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

// leaseTable is an in-memory stand-in for a shared lease table, to test how the poller drives a
// Coordinator (the DynamoDB implementation is tested in the lease package).
type leaseTable struct {
	mu       sync.Mutex
	owner    map[string]string
	pending  map[string]string
	progress map[string]ShardProgress
}

func newLeaseTable() *leaseTable {
	return &leaseTable{owner: map[string]string{}, pending: map[string]string{}, progress: map[string]ShardProgress{}}
}

// memWorker is one worker's view of the table; it implements Store and Coordinator.
type memWorker struct {
	t        *leaseTable
	id       string
	claims   atomic.Int64
	released chan string // when set, receives each shard whose reader stopped and released it
	// abandoned, when set, receives each shard whose reader stopped with an invocation cut off
	// by the shutdown grace (Abandoner).
	abandoned chan string
}

func (w *memWorker) Abandon(id string) {
	if w.abandoned != nil {
		w.abandoned <- id
	}
}

func (w *memWorker) Load(context.Context) (map[string]ShardProgress, error) {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	return maps.Clone(w.t.progress), nil
}

func (w *memWorker) Save(_ context.Context, updates map[string]ShardProgress) error {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	for id, pr := range updates {
		if w.t.owner[id] != w.id {
			return fmt.Errorf("shard %s: %w", id, ErrLeaseLost)
		}
		w.t.progress[id] = pr
	}
	return nil
}

func (w *memWorker) Register(_ context.Context, shards []ShardInfo) error {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	for _, s := range shards {
		if _, ok := w.t.progress[s.ShardID]; !ok {
			w.t.progress[s.ShardID] = s.Initial
		}
	}
	return nil
}

func (w *memWorker) Claim(_ context.Context, candidates []string) ([]string, error) {
	w.claims.Add(1)
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	sort.Strings(candidates)
	owners := map[string]int{w.id: 0}
	for _, id := range candidates {
		if o := w.t.owner[id]; o != "" {
			owners[o]++
		}
	}
	target := (len(candidates) + len(owners) - 1) / len(owners)
	for _, id := range candidates {
		if owners[w.id] >= target {
			break
		}
		if w.t.owner[id] == "" {
			w.t.owner[id] = w.id
			owners[w.id]++
		}
	}
	for _, id := range candidates { // ask the most loaded for one shard per cycle
		if o := w.t.owner[id]; owners[w.id] < target && o != w.id && owners[o] > target && w.t.pending[id] == "" {
			w.t.pending[id] = w.id
			break
		}
	}
	var held []string
	for _, id := range candidates {
		if w.t.owner[id] == w.id && w.t.pending[id] == "" {
			held = append(held, id)
		}
	}
	return held, nil
}

func (w *memWorker) Held(id string) bool {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	return w.t.owner[id] == w.id
}

func (w *memWorker) Release(_ context.Context, id string) error {
	if w.released != nil {
		w.released <- id
	}
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	if w.t.owner[id] != w.id {
		return nil
	}
	w.t.owner[id] = w.t.pending[id]
	delete(w.t.pending, id)
	return nil
}

func (t *leaseTable) owned() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := map[string]int{}
	for _, o := range t.owner {
		if o != "" {
			n[o]++
		}
	}
	return n
}

func startWorker(t *testing.T, f *fakekinesis.Fake, arn string, table *leaseTable, w *memWorker, rec *recorder, tune ...func(*Config)) func() error {
	t.Helper()
	return startWorkerInvoking(t, f, arn, w, inprocess.New(rec.handle), tune...)
}

// startWorkerInvoking runs worker w's poller with the invoker inv; the returned stop ends it and
// returns what Run returned.
func startWorkerInvoking(t *testing.T, f *fakekinesis.Fake, arn string, w *memWorker, inv Invoker, tune ...func(*Config)) func() error {
	t.Helper()
	return startWorkerWith(t, f, arn, w, inv, []Option{WithCoordinator(w)}, tune...)
}

// startWorkerWith is startWorkerInvoking with the options opts, its Coordinator among them.
func startWorkerWith(t *testing.T, f *fakekinesis.Fake, arn string, w *memWorker, inv Invoker, opts []Option, tune ...func(*Config)) func() error {
	t.Helper()
	cfg := Config{StartingPosition: TrimHorizon, PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond,
		ShardSyncInterval: time.Hour, ClaimInterval: 20 * time.Millisecond}
	for _, fn := range tune {
		fn(&cfg)
	}
	p, err := New(kinesisSource(f, arn), cfg, w, inv, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error { once.Do(func() { cancel(); runErr = <-done }); return runErr }
	t.Cleanup(func() { _ = stop() })
	return stop
}

// TestWorkersShareShardsThroughCoordinator: a second worker joins, the first hands shards over
// gracefully, every record is delivered exactly once and in order per key, and a stopped worker
// releases its leases to the other.
func TestWorkersShareShardsThroughCoordinator(t *testing.T) {
	f := fakekinesis.New()
	workersShare(t, f, f.CreateStream("s", 4))
}

// workersShare runs the scenario of TestWorkersShareShardsThroughCoordinator on the 4-shard
// stream "s" of f, with tune applied to each worker's configuration.
func workersShare(t *testing.T, f *fakekinesis.Fake, arn string, tune ...func(*Config)) {
	table := newLeaseTable()
	rec := &recorder{}
	counters := map[string]int{}
	put := func(n int) {
		for i := range n {
			k := fmt.Sprintf("key-%d", i%20)
			f.Put("s", k, fmt.Appendf(nil, "%s:%d", k, counters[k]))
			counters[k]++
		}
	}
	put(200)
	stopA := startWorker(t, f, arn, table, &memWorker{t: table, id: "A"}, rec, tune...)
	testkit.WaitFor(t, "A holds every shard", 5*time.Second, func() bool { return table.owned()["A"] == 4 })
	startWorker(t, f, arn, table, &memWorker{t: table, id: "B"}, rec, tune...)
	testkit.WaitFor(t, "an even split", 5*time.Second, func() bool { o := table.owned(); return o["A"] == 2 && o["B"] == 2 })
	put(200)
	testkit.WaitFor(t, "all 400 records", 10*time.Second, func() bool { return len(rec.deliveries()) >= 400 })
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "B takes A's released shards", 5*time.Second, func() bool { return table.owned()["B"] == 4 })
	put(100)
	testkit.WaitFor(t, "all 500 records", 10*time.Second, func() bool { return len(rec.deliveries()) >= 500 })
	checkDelivered(t, rec.deliveries(), counters)
}

// TestLostLeaseStopsReader: when the lease is taken away, the reader's next checkpoint is fenced
// off and it stops; nothing more is invoked for that shard by this worker.
func TestLostLeaseStopsReader(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	table := newLeaseTable()
	rec := &recorder{block: make(chan struct{}), started: make(chan struct{}, 10)}
	f.Put("s", "k", []byte("k:0"))
	w := &memWorker{t: table, id: "A", released: make(chan string, 10)}
	startWorker(t, f, arn, table, w, rec)
	<-rec.started // a batch is in flight...
	table.mu.Lock()
	table.owner["shardId-000000000000"] = "Z" // ...when another worker takes the lease
	table.mu.Unlock()
	rec.block <- struct{}{}
	if id := <-w.released; id != "shardId-000000000000" { // the reader stopped
		t.Fatalf("released %s", id)
	}
	f.Put("s", "k", []byte("k:1"))
	// Nothing more for that shard from this worker, over many claim cycles.
	from := w.claims.Load()
	testkit.WaitFor(t, "ten claim cycles", 5*time.Second, func() bool { return w.claims.Load() >= from+10 })
	select {
	case <-rec.started:
		t.Fatal("the worker invoked again after losing the lease")
	default:
	}
	table.mu.Lock()
	defer table.mu.Unlock()
	if cp := table.progress["shardId-000000000000"].Checkpoint; cp != "" {
		t.Fatalf("a fenced worker moved the checkpoint to %s", cp)
	}
}

// TestInvokerAsksHeldBeforeTheSend: an invoker that waits before it sends (for a concurrency
// slot, an endpoint, an environment) asks the lease again just before the send, through the
// start check the poller puts in the context: a lease lost during the wait sends nothing.
func TestInvokerAsksHeldBeforeTheSend(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	table := newLeaseTable()
	f.Put("s", "k", []byte("k:0"))
	w := &memWorker{t: table, id: "A", released: make(chan string, 10)}
	waiting, proceed := make(chan struct{}), make(chan struct{})
	var sent atomic.Int64
	inv := invoke.InvokerFunc(func(ctx context.Context, _ []byte) (invoke.Response, error) {
		waiting <- struct{}{}
		<-proceed // the wait for a slot
		if err := invoke.CheckStart(ctx); err != nil {
			return invoke.Response{}, err
		}
		sent.Add(1)
		return invoke.Response{StatusCode: 200}, nil
	})
	stop := startWorkerInvoking(t, f, arn, w, inv)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	<-waiting
	table.mu.Lock()
	table.owner["shardId-000000000000"] = "Z" // the lease is lost during the wait
	table.mu.Unlock()
	close(proceed)
	if id := <-w.released; id != "shardId-000000000000" { // the reader stopped
		t.Fatalf("released %s", id)
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d invocations sent after the lease was lost", n)
	}
}

// TestCutOffInvocationIsNotHandedOver: at a stop, an invocation still running when the shutdown
// grace ends is cut off, but may still run where it was sent (Lambda, an HTTP endpoint): the
// poller then tells the coordinator (Abandon) instead of releasing the lease for a next owner to
// start at once.
func TestCutOffInvocationIsNotHandedOver(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	table := newLeaseTable()
	f.Put("s", "k", []byte("k:0"))
	w := &memWorker{t: table, id: "A", released: make(chan string, 10), abandoned: make(chan string, 10)}
	started := make(chan struct{}, 1)
	inv := invoke.InvokerFunc(func(ctx context.Context, _ []byte) (invoke.Response, error) {
		started <- struct{}{}
		<-ctx.Done() // longer than the grace
		return invoke.Response{}, ctx.Err()
	})
	stop := startWorkerInvoking(t, f, arn, w, inv, func(c *Config) { c.ShutdownGrace = 50 * time.Millisecond })
	<-started
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-w.abandoned:
		if id != "shardId-000000000000" {
			t.Fatalf("abandoned %s", id)
		}
	default:
		t.Fatal("the coordinator was not told of the invocation cut off")
	}
	select {
	case id := <-w.released:
		t.Fatalf("%s released for a next owner while its invocation may still run", id)
	default:
	}
}

// overclaimingWorker is a Coordinator that hands this worker more than the poller asked for: the
// shards of extra, with every claim.
type overclaimingWorker struct {
	*memWorker
	extra []string
}

func (w overclaimingWorker) Claim(ctx context.Context, candidates []string) ([]string, error) {
	held, err := w.memWorker.Claim(ctx, candidates)
	return append(held, w.extra...), err
}

// readingOrder records the order in which shards were reported read and finished.
type readingOrder struct {
	NopObserver
	mu     sync.Mutex
	events []string // "reading <id>", "finished <id>"
}

func (o *readingOrder) ShardState(id, state string) {
	if state == StateReading || state == StateFinished {
		o.mu.Lock()
		o.events = append(o.events, state+" "+id)
		o.mu.Unlock()
	}
}

func (o *readingOrder) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.events)
}

// TestChildHandedOverBeforeItsParentFinishedWaits: a Coordinator that hands this worker a child
// while its parent is still being read (Claim returns more than it was asked) does not make the
// poller read the child early: the lineage graph has the last word. The child is read once its
// parent finished, and started once although every claim returns it.
func TestChildHandedOverBeforeItsParentFinishedWaits(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	parent := "shardId-000000000000"
	f.PutToShard("s", parent, "k", []byte("parent:0"))
	kids := f.Split("s", parent)
	f.PutToShard("s", kids[0], "k", []byte("child:0"))
	table := newLeaseTable()
	table.owner[kids[0]] = "A" // this worker holds the child's lease before its parent is read
	rec := &recorder{block: make(chan struct{}), started: make(chan struct{}, 4)}
	obs := &readingOrder{}
	w := &memWorker{t: table, id: "A"}
	stop := startWorkerWith(t, f, arn, w, inprocess.New(rec.handle),
		[]Option{WithCoordinator(overclaimingWorker{w, []string{kids[0]}}), WithObserver(obs)})
	var unblock sync.Once
	t.Cleanup(func() { unblock.Do(func() { close(rec.block) }) }) // runs before the stop
	// The parent's invocation is in flight.
	<-rec.started
	from := w.claims.Load()
	testkit.WaitFor(t, "five claims handing over the child", 5*time.Second, func() bool { return w.claims.Load() >= from+5 })
	if got := obs.seen(); !slices.Equal(got, []string{"reading " + parent}) {
		t.Fatalf("shards read while the parent's invocation is in flight: %v, want the parent only", got)
	}
	unblock.Do(func() { close(rec.block) })
	testkit.WaitFor(t, "the child's record", 5*time.Second, func() bool { return len(rec.deliveries()) == 2 })
	// Both children are read once the parent is finished, in either order (each reader
	// reports its own start).
	testkit.WaitFor(t, "both children read", 5*time.Second, func() bool { return len(obs.seen()) >= 4 })
	got := obs.seen()
	if want := []string{"reading " + parent, "finished " + parent}; len(got) != 4 || !slices.Equal(got[:2], want) {
		t.Fatalf("shard states %v, want %v, then both children read", got, want)
	}
	if kidsRead := []string{got[2], got[3]}; !slices.Contains(kidsRead, "reading "+kids[0]) || !slices.Contains(kidsRead, "reading "+kids[1]) {
		t.Fatalf("shard states %v: after the parent, want both children read", got)
	}
	if d := rec.deliveries(); d[0].data != "parent:0" || d[1].data != "child:0" {
		t.Fatalf("deliveries %v, want parent:0 then child:0", d)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// flakyWorker is a memWorker whose next fails progress writes fail (a lease item's writes
// throttled while its heartbeats go through).
type flakyWorker struct {
	*memWorker
	fails atomic.Int64
}

func (w *flakyWorker) Save(ctx context.Context, updates map[string]ShardProgress) error {
	if w.fails.Add(-1) >= 0 {
		return errors.New("lease table: ProvisionedThroughputExceededException")
	}
	return w.memWorker.Save(ctx, updates)
}

// TestHeldCheckpointOutlastsTheAttempts: with a Coordinator, a checkpoint that keeps failing
// while the lease is held is tried past saveAttempts (for saveHeldFor), and the mapping goes on
// once the writes go through: without one, those failures stop the mapping
// (TestStoreErrorsRetriedThenFatal).
func TestHeldCheckpointOutlastsTheAttempts(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	f.PutToShard("s", "shardId-000000000000", "k", []byte("r:0"))
	table := newLeaseTable()
	w := &flakyWorker{memWorker: &memWorker{t: table, id: "A"}}
	w.fails.Store(3 * saveAttempts)
	rec := &recorder{}
	cfg := Config{StartingPosition: TrimHorizon, PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond,
		ShardSyncInterval: time.Hour, ClaimInterval: 20 * time.Millisecond}
	p, err := New(kinesisSource(f, arn), cfg, w, inprocess.New(rec.handle), WithCoordinator(w))
	if err != nil {
		t.Fatal(err)
	}
	p.retryBase, p.retryMax = time.Millisecond, 2*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	testkit.WaitFor(t, "the checkpoint once the writes go through", 10*time.Second, func() bool {
		table.mu.Lock()
		defer table.mu.Unlock()
		return table.progress["shardId-000000000000"].Checkpoint != ""
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after %d failed checkpoints of a held lease, want nil", err, 3*saveAttempts)
	}
}
