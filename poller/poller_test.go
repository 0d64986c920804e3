package poller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"go.uber.org/goleak"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// delivery is one record as the handler saw it, with the invocation it came in.
type delivery struct {
	invocation int
	shard      string
	pk, seq    string
	data       string
}

// recorder is a handler run through the real in-process invoker (aws-lambda-go decoding), which
// notes every record and can be told to fail or to block.
type recorder struct {
	mu          sync.Mutex
	invocations int
	got         []delivery
	failFirst   int           // fail this many invocations
	block       chan struct{} // when set, each invocation waits for a value
	started     chan struct{} // when set, signalled as each invocation starts
}

func (r *recorder) handle(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
	if r.started != nil {
		r.started <- struct{}{}
	}
	if r.block != nil {
		<-r.block
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.invocations++
	if r.invocations <= r.failFirst {
		return events.KinesisEventResponse{}, errors.New("induced failure")
	}
	for _, rec := range e.Records {
		shard, _, _ := strings.Cut(rec.EventID, ":")
		r.got = append(r.got, delivery{invocation: r.invocations, shard: shard, pk: rec.Kinesis.PartitionKey, seq: rec.Kinesis.SequenceNumber, data: string(rec.Kinesis.Data)})
	}
	return events.KinesisEventResponse{}, nil
}

func (r *recorder) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

type harness struct {
	t     *testing.T
	fake  *fakekinesis.Fake
	kin   kinesissrc.API
	arn   string
	store *MemoryStore
	rec   *recorder
	cfg   Config
	opts  []Option
	// srcOpts are the Kinesis source's options (its consumer).
	srcOpts []kinesissrc.Option
	cancel  context.CancelFunc
	done    chan error
	// runUntilCaughtUp's handler takes slow, and fails the first two invocations with failSeq.
	slow    time.Duration
	failSeq string
}

func newHarness(t *testing.T, shards int) *harness {
	f := fakekinesis.New()
	h := &harness{t: t, fake: f, kin: f, arn: f.CreateStream("s", shards), store: NewMemoryStore(), rec: &recorder{}}
	h.cfg = Config{StartingPosition: TrimHorizon, PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond, ShardSyncInterval: time.Hour}
	return h
}

func (h *harness) start() {
	h.t.Helper()
	h.startInvoking(inprocess.New(h.rec.handle, inprocess.WithTimeout(10*time.Second)))
}

// startInvoking is start with the invoker inv instead of the recorder, and the options extra
// after the harness' own.
func (h *harness) startInvoking(inv Invoker, extra ...Option) {
	h.t.Helper()
	cfg := h.cfg
	p, err := New(kinesisSource(h.kin, h.arn, h.srcOpts...), cfg, h.store, inv, append(h.opts[:len(h.opts):len(h.opts)], extra...)...)
	if err != nil {
		h.t.Fatal(err)
	}
	p.retryBase, p.retryMax = time.Millisecond, 10*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- p.Run(ctx) }()
	h.t.Cleanup(func() { h.stop() })
}

func (h *harness) stop() error {
	if h.cancel == nil {
		return nil
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("Run did not return after cancel")
		return nil
	}
}

// put writes n records round-robin over keys, with data "<key>:<n-th record of that key>".
func (h *harness) put(keys, n int, counters map[string]int) {
	for i := range n {
		k := fmt.Sprintf("key-%d", i%keys)
		h.fake.Put("s", k, fmt.Appendf(nil, "%s:%d", k, counters[k]))
		counters[k]++
	}
}

// checkDelivered asserts every record put was delivered exactly once, in put order per key.
func checkDelivered(t *testing.T, got []delivery, counters map[string]int) {
	t.Helper()
	total := 0
	for _, c := range counters {
		total += c
	}
	next := map[string]int{}
	for _, d := range got {
		if want := fmt.Sprintf("%s:%d", d.pk, next[d.pk]); d.data != want {
			t.Fatalf("key %s: got %q, want %q next (lost, duplicated or reordered)", d.pk, d.data, want)
		}
		next[d.pk]++
	}
	if len(got) != total {
		t.Fatalf("delivered %d records, want %d", len(got), total)
	}
}

// checkLineage asserts no record of a child was invoked before every record of its parents.
func checkLineage(t *testing.T, got []delivery, parents map[string][]string) {
	t.Helper()
	first, last := map[string]int{}, map[string]int{}
	for i, d := range got {
		if _, ok := first[d.shard]; !ok {
			first[d.shard] = i
		}
		last[d.shard] = i
	}
	judged := 0
	for child, ps := range parents {
		for _, p := range ps {
			fc, okc := first[child]
			lp, okp := last[p]
			if !okc || !okp {
				continue
			}
			judged++
			if fc < lp {
				t.Fatalf("child %s invoked (delivery %d) before parent %s was drained (delivery %d)", child, fc, p, lp)
			}
		}
	}
	if judged == 0 {
		t.Fatalf("lineage judged nothing: no parent-child pair of %v had deliveries of both", parents)
	}
}

func TestReadsEveryShardAcrossSplitAndMerge(t *testing.T) {
	h := newHarness(t, 2)
	counters := map[string]int{}
	h.put(20, 200, counters)
	// Reshard before the consumer starts, so it must follow lineage from the roots.
	kids := h.fake.Split("s", "shardId-000000000000")
	h.put(20, 200, counters)
	merged := h.fake.Merge("s", kids[1], "shardId-000000000001")
	h.put(20, 200, counters)
	h.start()
	// And reshard again while it runs: discovery must be through ChildShards, not a restart.
	testkit.WaitFor(t, "first deliveries", 5*time.Second, func() bool { return len(h.rec.deliveries()) > 0 })
	more := h.fake.Split("s", merged)
	h.put(20, 200, counters)
	testkit.WaitFor(t, "all 800 records", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 800 })
	got := h.rec.deliveries()
	checkDelivered(t, got, counters)
	checkLineage(t, got, map[string][]string{
		kids[0]: {"shardId-000000000000"}, kids[1]: {"shardId-000000000000"},
		merged: {kids[1], "shardId-000000000001"}, more[0]: {merged}, more[1]: {merged},
	})
	if err := h.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	prog, _ := h.store.Load(context.Background())
	for _, id := range []string{"shardId-000000000000", "shardId-000000000001", kids[1], merged} {
		if !prog[id].Finished {
			t.Errorf("closed shard %s not recorded finished: %+v", id, prog[id])
		}
	}
}

func TestFaultsLoseNothing(t *testing.T) {
	tests := []struct {
		name   string
		op     string
		err    func() error
		times  int
		verify func(t *testing.T, h *harness)
	}{
		{name: "throttled reads", op: fakekinesis.OpGetRecords, err: fakekinesis.ErrThrottled, times: 5},
		{name: "5xx reads", op: fakekinesis.OpGetRecords, err: fakekinesis.ErrInternal, times: 3},
		{name: "expired iterators", op: fakekinesis.OpGetRecords, err: fakekinesis.ErrExpired, times: 3,
			verify: func(t *testing.T, h *harness) {
				if n := h.fake.Calls(fakekinesis.OpGetShardIterator); n < 2+3 {
					t.Fatalf("GetShardIterator called %d times; each expiry must reopen the shard", n)
				}
			}},
		{name: "5xx on iterator", op: fakekinesis.OpGetShardIterator, err: fakekinesis.ErrInternal, times: 2},
		{name: "5xx on listing", op: fakekinesis.OpListShards, err: fakekinesis.ErrInternal, times: 2,
			verify: func(t *testing.T, h *harness) {
				if n := h.fake.Calls(fakekinesis.OpListShards); n < 3 {
					t.Fatalf("ListShards called %d times; the failed listings at start must be retried", n)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 2)
			counters := map[string]int{}
			h.put(10, 100, counters)
			var mu sync.Mutex
			left := tt.times
			h.fake.Inject(func(op string, _ any) error {
				mu.Lock()
				defer mu.Unlock()
				if op == tt.op && left > 0 {
					left--
					return tt.err()
				}
				return nil
			})
			h.cfg.BatchSize = 7
			h.start()
			testkit.WaitFor(t, "first deliveries", 10*time.Second, func() bool { return len(h.rec.deliveries()) > 0 })
			h.put(10, 100, counters) // while faults may still be injected
			testkit.WaitFor(t, "all records", 15*time.Second, func() bool { return len(h.rec.deliveries()) >= 200 })
			checkDelivered(t, h.rec.deliveries(), counters)
			mu.Lock()
			if left != 0 {
				t.Fatalf("%d injected faults were never hit", left)
			}
			mu.Unlock()
			if tt.verify != nil {
				tt.verify(t, h)
			}
		})
	}
}

func TestStartFailsOnListingError(t *testing.T) {
	h := newHarness(t, 1)
	h.fake.Inject(func(op string, _ any) error {
		if op == fakekinesis.OpListShards {
			return fakekinesis.ErrInternal()
		}
		return nil
	})
	cfg := h.cfg
	p, err := New(kinesisSource(h.kin, h.arn, h.srcOpts...), cfg, h.store, inprocess.New(h.rec.handle))
	if err != nil {
		t.Fatal(err)
	}
	p.retryBase, p.retryMax = time.Millisecond, 10*time.Millisecond
	if err := p.Run(context.Background()); err == nil {
		t.Fatal("Run succeeded although the stream could not be listed")
	}
	if prog, _ := h.store.Load(context.Background()); len(prog) != 0 {
		t.Fatalf("progress written although the start failed: %v", prog)
	}
	h.fake.Inject(nil)
	p, _ = New(kinesisSource(h.kin, "arn:aws:kinesis:us-east-1:000000000000:stream/missing"), cfg, h.store, inprocess.New(h.rec.handle))
	if err := p.Run(context.Background()); !errors.Is(err, ErrStreamNotFound) {
		t.Fatalf("missing stream: err = %v, want ErrStreamNotFound", err)
	}
}

// pager forces one shard per ListShards page.
type pager struct {
	kinesissrc.API
	mu    sync.Mutex
	pages int
}

func (p *pager) ListShards(ctx context.Context, in *kinesis.ListShardsInput, o ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	p.mu.Lock()
	p.pages++
	p.mu.Unlock()
	in.MaxResults = aws.Int32(1)
	return p.API.ListShards(ctx, in, o...)
}

func TestListShardsPaging(t *testing.T) {
	h := newHarness(t, 5)
	pg := &pager{API: h.fake}
	h.kin = pg
	counters := map[string]int{}
	h.put(50, 250, counters)
	h.start()
	testkit.WaitFor(t, "all records from 5 shards", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 250 })
	checkDelivered(t, h.rec.deliveries(), counters)
	shards := map[string]bool{}
	for _, d := range h.rec.deliveries() {
		shards[d.shard] = true
	}
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if len(shards) != 5 || pg.pages < 5 {
		t.Fatalf("read %d shards over %d ListShards pages; want 5 shards, ≥5 pages", len(shards), pg.pages)
	}
}

func TestTrimmedParentCountsAsFinished(t *testing.T) {
	h := newHarness(t, 1)
	kids := h.fake.Split("s", "shardId-000000000000")
	h.fake.Trim("s", "shardId-000000000000")
	counters := map[string]int{}
	h.put(10, 60, counters)
	h.start()
	testkit.WaitFor(t, "children's records", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 60 })
	checkDelivered(t, h.rec.deliveries(), counters)
	for _, d := range h.rec.deliveries() {
		if d.shard != kids[0] && d.shard != kids[1] {
			t.Fatalf("delivery from %s", d.shard)
		}
	}
}

func TestTrimWhileReadingStopsThatShard(t *testing.T) {
	h := newHarness(t, 1)
	h.cfg.ShardSyncInterval = 20 * time.Millisecond
	h.cfg.BatchSize = 5
	parent := map[string]int{}
	h.put(1, 10, parent)
	kids := h.fake.Split("s", "shardId-000000000000")
	h.rec.block = make(chan struct{})
	h.rec.started = make(chan struct{}, 100)
	h.start()
	<-h.rec.started                          // the parent's first batch is in flight...
	h.fake.Trim("s", "shardId-000000000000") // ...when retention removes the parent
	close(h.rec.block)
	counters := map[string]int{}
	for i := range 20 {
		k := fmt.Sprintf("child-%d", i%4)
		h.fake.Put("s", k, fmt.Appendf(nil, "%s:%d", k, counters[k]))
		counters[k]++
	}
	testkit.WaitFor(t, "children's records", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 25 })
	var fromParent, fromKids []delivery
	for _, d := range h.rec.deliveries() {
		if d.shard == kids[0] || d.shard == kids[1] {
			fromKids = append(fromKids, d)
		} else {
			fromParent = append(fromParent, d)
		}
	}
	if len(fromParent) != 5 {
		t.Fatalf("%d records from the trimmed parent, want the 5 of the batch in flight", len(fromParent))
	}
	checkDelivered(t, fromKids, counters)
}

func TestGracefulStopFinishesBatchInFlight(t *testing.T) {
	h := newHarness(t, 1)
	counters := map[string]int{}
	h.put(5, 10, counters)
	h.rec.block = make(chan struct{})
	h.rec.started = make(chan struct{}, 10)
	h.start()
	<-h.rec.started
	h.cancel() // SIGTERM arrives while the batch is in flight
	h.cancel = nil
	select {
	case err := <-h.done:
		t.Fatalf("Run returned (%v) before the batch in flight finished", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(h.rec.block)
	if err := <-h.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := h.rec.deliveries()
	checkDelivered(t, got, counters)
	prog, _ := h.store.Load(context.Background())
	if cp := prog["shardId-000000000000"].Checkpoint; cp != got[len(got)-1].seq {
		t.Fatalf("checkpoint %q, want the last record of the finished batch %q", cp, got[len(got)-1].seq)
	}
}

func TestRestartResumesAfterCheckpoint(t *testing.T) {
	h := newHarness(t, 2)
	counters := map[string]int{}
	h.put(10, 100, counters)
	h.start()
	testkit.WaitFor(t, "first 100", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 100 })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.put(10, 100, counters)
	h.start() // same store, same recorder
	testkit.WaitFor(t, "next 100", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 200 })
	checkDelivered(t, h.rec.deliveries(), counters)
}

func TestFailingBatchIsRetriedAndCheckpointWaits(t *testing.T) {
	h := newHarness(t, 1)
	counters := map[string]int{}
	h.put(3, 9, counters)
	h.rec.failFirst = 3
	h.start()
	testkit.WaitFor(t, "delivery after 3 failures", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 9 })
	checkDelivered(t, h.rec.deliveries(), counters)
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	if h.rec.invocations != 4 {
		t.Fatalf("%d invocations, want 3 failures then 1 success", h.rec.invocations)
	}
}

func TestReadyAfterStart(t *testing.T) {
	h := newHarness(t, 1)
	ready := make(chan struct{})
	cfg := h.cfg
	p, err := New(kinesisSource(h.kin, h.arn, h.srcOpts...), cfg, h.store, inprocess.New(h.rec.handle), WithReady(func() { close(ready) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("never ready")
	}
	if prog, _ := h.store.Load(context.Background()); len(prog) == 0 {
		t.Fatal("ready before the store was initialised")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestDisabledPollsNothing(t *testing.T) {
	h := newHarness(t, 2)
	counters := map[string]int{}
	h.put(5, 20, counters)
	h.cfg.Disabled = true
	h.start()
	// Give a live mapping time to poll several times over, then check nothing was read.
	time.Sleep(100 * time.Millisecond)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if n := h.fake.Calls(fakekinesis.OpGetRecords) + h.fake.Calls(fakekinesis.OpListShards); n != 0 {
		t.Fatalf("disabled mapping made %d Kinesis calls", n)
	}
	if len(h.rec.deliveries()) != 0 {
		t.Fatal("disabled mapping invoked the function")
	}
}

func TestBatchingWindowGathersRecords(t *testing.T) {
	h := newHarness(t, 1)
	h.cfg.MaximumBatchingWindow = time.Second
	h.cfg.BatchSize = 5
	counters := map[string]int{}
	h.put(1, 2, counters)
	h.start()
	testkit.WaitFor(t, "a few polls", 5*time.Second, func() bool { return h.fake.Calls(fakekinesis.OpGetRecords) >= 3 })
	if len(h.rec.deliveries()) != 0 {
		t.Fatal("invoked before the window closed or the batch filled")
	}
	h.put(1, 4, counters) // fills the batch of 5 before the window closes
	testkit.WaitFor(t, "all 6", 5*time.Second, func() bool { return len(h.rec.deliveries()) >= 6 })
	got := h.rec.deliveries()
	checkDelivered(t, got, counters)
	if got[0].invocation != got[4].invocation || got[5].invocation == got[0].invocation {
		t.Fatalf("want a full batch of 5 then the rest: %+v", got)
	}
}

func TestStartingPositions(t *testing.T) {
	for _, pos := range []string{TrimHorizon, Latest, AtTimestamp} {
		t.Run(pos, func(t *testing.T) {
			now := time.Now()
			clock := now.Add(-time.Hour)
			f := fakekinesis.New(fakekinesis.WithClock(func() time.Time { return clock }))
			h := newHarness(t, 1)
			h.fake, h.kin, h.arn = f, f, f.CreateStream("s", 1)
			old := map[string]int{}
			h.put(1, 3, old) // an hour ago
			clock = now
			h.cfg.StartingPosition = pos
			if pos == AtTimestamp {
				h.cfg.StartingPositionTimestamp = now.Add(-time.Minute)
			}
			h.start()
			testkit.WaitFor(t, "shard open", 5*time.Second, func() bool { return f.Calls(fakekinesis.OpGetRecords) >= 1 })
			newer := map[string]int{"key-0": 3}
			h.put(1, 2, newer)
			want := 2
			if pos == TrimHorizon {
				want = 5
			}
			testkit.WaitFor(t, "deliveries", 5*time.Second, func() bool { return len(h.rec.deliveries()) >= want })
			got := h.rec.deliveries()
			if len(got) != want || got[0].data != fmt.Sprintf("key-0:%d", 5-want) {
				t.Fatalf("%s delivered %+v, want the last %d records", pos, got, want)
			}
		})
	}
}

// flakyStore fails its first n saves (or every save when n < 0).
type flakyStore struct {
	*MemoryStore
	mu sync.Mutex
	n  int
}

func (s *flakyStore) Save(ctx context.Context, u map[string]ShardProgress) error {
	s.mu.Lock()
	fail := s.n != 0
	if s.n > 0 {
		s.n--
	}
	s.mu.Unlock()
	if fail {
		return errors.New("store unreachable")
	}
	return s.MemoryStore.Save(ctx, u)
}

func TestStoreErrorsRetriedThenFatal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails int
		fatal bool
	}{{"transient", 3, false}, {"lasting", -1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1)
			counters := map[string]int{}
			h.put(2, 4, counters)
			store := &flakyStore{MemoryStore: NewMemoryStore()}
			cfg := h.cfg
			p, err := New(kinesisSource(h.kin, h.arn, h.srcOpts...), cfg, store, inprocess.New(h.rec.handle))
			if err != nil {
				t.Fatal(err)
			}
			p.retryBase, p.retryMax = time.Millisecond, 2*time.Millisecond
			// The initial positions are saved before any reader runs; the failures start after.
			if err := store.MemoryStore.Save(context.Background(), initialProgress(kinesissrc.ShardsOf(mustList(t, h)), TrimHorizon, time.Now())); err != nil {
				t.Fatal(err)
			}
			store.n = tc.fails
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			if tc.fatal {
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), "store unreachable") {
						t.Fatalf("Run = %v, want the store's error", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("a store that keeps failing did not stop the mapping")
				}
				return
			}
			testkit.WaitFor(t, "checkpoint after the store recovered", 5*time.Second, func() bool {
				pr, _ := store.Load(context.Background())
				return pr["shardId-000000000000"].Checkpoint != ""
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustList(t *testing.T, h *harness) []types.Shard {
	t.Helper()
	shards, err := kinesissrc.ListShards(context.Background(), h.kin, h.arn)
	if err != nil {
		t.Fatal(err)
	}
	return shards
}
