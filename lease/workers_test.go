package lease

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// recorder is the function of every worker of a test: it notes each record with the worker that
// invoked it, in one global order, and any moment two workers invoke the same shard at once.
type recorder struct {
	mu       sync.Mutex
	got      []example.Delivery
	by       []string
	inflight map[string]string // shard → worker invoking it now
	overlaps []string
	delay    time.Duration
}

func newRecorder(delay time.Duration) *recorder {
	return &recorder{inflight: map[string]string{}, delay: delay}
}

func (r *recorder) handler(worker string) func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
	return func(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		if len(e.Records) == 0 {
			return events.KinesisEventResponse{}, nil
		}
		shard, _, _ := strings.Cut(e.Records[0].EventID, ":")
		start := time.Now() // lineage is judged on invocation start and end times
		r.mu.Lock()
		if other, ok := r.inflight[shard]; ok {
			r.overlaps = append(r.overlaps, fmt.Sprintf("%s invoked %s while %s was", worker, shard, other))
		}
		r.inflight[shard] = worker
		r.mu.Unlock()
		if r.delay > 0 {
			t := time.NewTimer(r.delay)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.inflight, shard)
		done := time.Now()
		for _, rec := range e.Records {
			r.got = append(r.got, example.Delivery{ShardID: shard, Sequence: rec.Kinesis.SequenceNumber,
				PartitionKey: rec.Kinesis.PartitionKey, Data: string(rec.Kinesis.Data), BatchSize: len(e.Records),
				InvokedAt: start.UnixNano(), DoneAt: done.UnixNano()})
			r.by = append(r.by, worker)
		}
		return events.KinesisEventResponse{}, nil
	}
}

func (r *recorder) deliveries() ([]example.Delivery, []string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got), slices.Clone(r.by), slices.Clone(r.overlaps)
}

func (r *recorder) unique() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, d := range r.got {
		seen[d.Data] = true
	}
	return len(seen)
}

// worker is one in-process esm worker: a Poller sharing the mapping through a Dynamo.
type worker struct {
	id     string
	d      *Dynamo
	cancel context.CancelFunc
	done   chan error // the poller's Run, then the Dynamo's
}

// startWorker runs a poller and its Dynamo until stop; the Dynamo renews until the poller has
// returned, as the service wires them.
func startWorker(t testing.TB, cfg poller.Config, kin kinesissrc.API, arn string, api DynamoAPI, table, id string, inv poller.Invoker, log *slog.Logger, opts ...Option) *worker {
	t.Helper()
	log = log.With("worker", id)
	d, err := NewDynamo(api, table, id, append([]Option{WithLogger(log)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := poller.New(kinesissrc.MustNew(kin, arn), cfg, d, inv, poller.WithCoordinator(d), poller.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{id: id, d: d, cancel: cancel, done: make(chan error, 2)}
	dctx, stopLeases := context.WithCancel(context.Background())
	dDone := make(chan error, 1)
	go func() { dDone <- d.Run(dctx) }()
	go func() {
		err := p.Run(ctx)
		stopLeases()
		w.done <- err
		w.done <- <-dDone
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// stop stops the worker gracefully and waits for it; stopping twice is harmless.
func (w *worker) stop(t testing.TB) {
	t.Helper()
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	for range 2 {
		select {
		case err := <-w.done:
			if err != nil {
				t.Errorf("worker %s: %v", w.id, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("worker %s did not stop", w.id)
		}
	}
}

// openOwners counts, per owner, the leases of unfinished shards.
func openOwners(t testing.TB, table string) (map[string]int, int) {
	t.Helper()
	ls, err := ListLeases(context.Background(), ddb, table)
	if err != nil {
		t.Fatal(err)
	}
	out, open := map[string]int{}, 0
	for _, l := range ls {
		if !l.Finished() {
			open++
			if l.Owner != "" {
				out[l.Owner]++
			}
		}
	}
	return out, open
}

// balanced reports whether every worker owns between floor and ceil of its share of the open
// shards and every open shard is owned.
func balanced(owners map[string]int, open int, workers []string) bool {
	sum := 0
	for _, w := range workers {
		n := owners[w]
		if n < open/len(workers) || n > (open+len(workers)-1)/len(workers) {
			return false
		}
		sum += n
	}
	return sum == open
}

// produceKeys writes total records over keys partition keys in PutRecords calls of 20, data
// "<key>:<n>" numbering each key's records in put order, and reports progress.
func produceKeys(ctx context.Context, stream string, keys, total int, written *atomic.Int64) (map[string]int, error) {
	counters := make([]int, keys)
	for n := 0; n < total; {
		var batch []local.Record
		for len(batch) < 20 && n+len(batch) < total {
			k := (n + len(batch)) % keys
			batch = append(batch, local.Record{PartitionKey: fmt.Sprintf("key-%d", k), Data: fmt.Appendf(nil, "key-%d:%d", k, counters[k])})
			counters[k]++
		}
		if _, err := local.PutRecords(ctx, kin, stream, batch); err != nil {
			return nil, err
		}
		n += len(batch)
		written.Store(int64(n))
	}
	perKey := map[string]int{}
	for k, n := range counters {
		perKey[fmt.Sprintf("key-%d", k)] = n
	}
	return perKey, nil
}

// TestWorkersShareStream runs four pollers, each with its own Dynamo, on one 8-shard stream that
// is split and merged while records flow: they reach their share at cold start, deliver every
// record exactly once in order per key and parents before children, never invoke one shard from
// two workers at once, are balanced again after the reshards, hand a stopped worker's shards over
// at once, and release everything when they stop.
func TestWorkersShareStream(t *testing.T) {
	const total, keys, nWorkers = 1000, 50, 4
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stream, arn := newStream(t, "workers", 8)
	table := newTable(t)
	log, _ := testLogger(t)
	rec := newRecorder(5 * time.Millisecond)
	cfg := poller.Config{StartingPosition: poller.TrimHorizon, BatchSize: 10,
		PollInterval: 200 * time.Millisecond, ShardSyncInterval: 5 * time.Second, ClaimInterval: 250 * time.Millisecond,
		ShutdownGrace: 5 * time.Second}
	var ids []string
	var ws []*worker
	start := time.Now()
	for i := range nWorkers {
		id := fmt.Sprintf("worker-%d", i)
		ids = append(ids, id)
		ws = append(ws, startWorker(t, cfg, kin, arn, ddb, table, id, inprocess.New(rec.handler(id)), log))
	}
	testkit.WaitFor(t, "balance at cold start", 30*time.Second, func() bool { o, n := openOwners(t, table); return n == 8 && balanced(o, n, ids) })
	t.Logf("cold start: 4 workers own 2 of 8 shards each after %s", time.Since(start).Round(time.Millisecond))

	var written atomic.Int64
	prodErr := make(chan error, 1)
	var perKey map[string]int
	go func() {
		var err error
		perKey, err = produceKeys(ctx, stream, keys, total, &written)
		prodErr <- err
	}()
	testkit.WaitFor(t, "300 records written", time.Minute, func() bool { return written.Load() >= 300 })
	open, err := local.OpenShards(ctx, kin, stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := local.SplitInHalf(ctx, kin, stream, *open[3].ShardId); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "600 records written", time.Minute, func() bool { return written.Load() >= 600 })
	if _, _, err := local.MergeFirstAdjacent(ctx, kin, stream); err != nil {
		t.Fatal(err)
	}
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "every record delivered", 90*time.Second, func() bool { return rec.unique() >= total })
	testkit.WaitFor(t, "balance after the reshards", 30*time.Second, func() bool { o, n := openOwners(t, table); return n == 8 && balanced(o, n, ids) })

	// A worker stopping hands its shards to the others at once.
	stopped := time.Now()
	ws[0].stop(t)
	testkit.WaitFor(t, "the stopped worker's shards taken", 5*time.Second, func() bool {
		o, n := openOwners(t, table)
		return balanced(o, n, ids[1:])
	})
	takeover := time.Since(stopped)
	t.Logf("graceful stop: its shards owned by the others %s after the stop began", takeover.Round(time.Millisecond))
	if takeover > 2*time.Second {
		t.Errorf("takeover after a graceful stop took %s, want < 2 s", takeover)
	}
	for _, w := range ws[1:] {
		w.stop(t)
	}
	for _, l := range leasesOfTable(t, table) {
		if l.Owner != "" || l.PendingOwner != "" {
			t.Errorf("after every worker stopped: %+v", l)
		}
	}

	got, by, overlaps := rec.deliveries()
	if len(overlaps) > 0 {
		t.Fatalf("one shard invoked by two workers at once: %v", overlaps)
	}
	lineage, err := local.Lineage(ctx, kin, stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(lineage) != 8+2+1 {
		t.Fatalf("stream has %d shards, want 11 after a split and a merge", len(lineage))
	}
	if bad := verify.Failed(verify.Deliveries(got, perKey, lineage)); bad != "" {
		t.Fatal(bad)
	}
	if len(got) != total {
		t.Errorf("%d deliveries of %d records: hand-overs repeated records", len(got), total)
	}
	perWorker := map[string]int{}
	for _, w := range by {
		perWorker[w]++
	}
	t.Logf("deliveries per worker: %v", perWorker)
}

func leasesOfTable(t testing.TB, table string) []Lease {
	t.Helper()
	ls, err := ListLeases(context.Background(), ddb, table)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

var _ DynamoAPI = (*dynamodb.Client)(nil)
