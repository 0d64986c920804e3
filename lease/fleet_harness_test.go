package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// gatedAPI is one worker's path to DynamoDB. While stalled, a call waits until the stall ends
// and then goes through (a network stall: TCP retransmits, then the request arrives); while
// cut, a call fails at once (a partition).
type gatedAPI struct {
	lease.DynamoAPI
	stallUntil atomic.Int64 // UnixNano
	// rosterOnly: the stall holds only the writes to the roster item (heartbeats): the lease
	// items, and reads, go through.
	rosterOnly atomic.Bool
	cut        atomic.Bool
	calls      atomic.Int64
}

var errCut = errors.New("dial tcp: i/o timeout (partitioned)")

func (g *gatedAPI) gate(ctx context.Context) error { return g.gateIf(ctx, !g.rosterOnly.Load()) }

// gateIf is gate; the stall holds the call only when stallable.
func (g *gatedAPI) gateIf(ctx context.Context, stallable bool) error {
	g.calls.Add(1)
	if g.cut.Load() {
		return errCut
	}
	if d := time.Until(time.Unix(0, g.stallUntil.Load())); stallable && d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (g *gatedAPI) stall(d time.Duration) { g.stallUntil.Store(time.Now().Add(d).UnixNano()) }

func (g *gatedAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := g.gate(ctx); err != nil {
		return nil, err
	}
	return g.DynamoAPI.GetItem(ctx, in, o...)
}
func (g *gatedAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if err := g.gate(ctx); err != nil {
		return nil, err
	}
	return g.DynamoAPI.BatchGetItem(ctx, in, o...)
}
func (g *gatedAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := g.gate(ctx); err != nil {
		return nil, err
	}
	return g.DynamoAPI.PutItem(ctx, in, o...)
}
func (g *gatedAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	k, _ := in.Key["leaseKey"].(*types.AttributeValueMemberS)
	if err := g.gateIf(ctx, !g.rosterOnly.Load() || k != nil && k.Value == "!esm-workers"); err != nil {
		return nil, err
	}
	return g.DynamoAPI.UpdateItem(ctx, in, o...)
}
func (g *gatedAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := g.gate(ctx); err != nil {
		return nil, err
	}
	return g.DynamoAPI.DeleteItem(ctx, in, o...)
}
func (g *gatedAPI) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if err := g.gate(ctx); err != nil {
		return nil, err
	}
	return g.DynamoAPI.Scan(ctx, in, o...)
}

// span is one invocation of one shard by one worker.
type span struct {
	worker, shard, first, last string
	start, end                 time.Time
}

// world is several in-process workers (lease.Dynamo + poller) on one fakedynamo table and one
// fakekinesis stream, every invocation recorded.
type world struct {
	t     *testing.T
	fk    *fakekinesis.Fake
	db    *fakedynamo.DB
	arn   string
	L     time.Duration
	log   *slog.Logger
	t0    time.Time
	mu    sync.Mutex
	spans []*span
	// run, when set, is called at the start of every invocation and may take time (the
	// function's work).
	run func(worker, shard string, e events.KinesisEvent)
}

func newWorld(t *testing.T, shards int, L time.Duration) *world {
	t.Helper()
	w := &world{t: t, fk: fakekinesis.New(), db: fakedynamo.New(), L: L, t0: time.Now()}
	w.arn = w.fk.CreateStream("s", shards)
	if err := lease.EnsureTable(context.Background(), w.db, "leases", true); err != nil {
		t.Fatal(err)
	}
	lvl := slog.LevelWarn
	if os.Getenv("AUDIT_DEBUG") != "" {
		lvl = slog.LevelInfo
	}
	w.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	return w
}

// produce puts a record on every open shard every period until the test ends; its goroutine is
// stopped and waited for then.
func (w *world) produce(t *testing.T, period time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		i := 0
		for ctx.Err() == nil {
			for _, sh := range w.fk.OpenShards("s") {
				w.fk.PutToShard("s", sh, fmt.Sprintf("k%d", i), []byte(fmt.Sprintf(`{"i":%d}`, i)))
			}
			i++
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
		}
	}()
}

type worker struct {
	id   string
	api  *gatedAPI
	d    *lease.Dynamo
	stop func()
}

// start runs worker id: its Dynamo (lease duration w.L, invocation bound bound) and its poller
// with an in-process handler whose timeout is timeout.
func (w *world) start(id string, bound, timeout time.Duration) *worker {
	w.t.Helper()
	return w.startWith(id, bound, timeout, nil)
}

// startWith is start with the worker's DynamoDB client wrapped by wrap, when given.
func (w *world) startWith(id string, bound, timeout time.Duration, wrap func(*gatedAPI) lease.DynamoAPI) *worker {
	w.t.Helper()
	return w.startL(id, w.L, bound, timeout, wrap)
}

// startL is startWith with a lease duration of its own (--lease-duration of this worker).
func (w *world) startL(id string, L, bound, timeout time.Duration, wrap func(*gatedAPI) lease.DynamoAPI) *worker {
	w.t.Helper()
	api := &gatedAPI{DynamoAPI: w.db}
	var client lease.DynamoAPI = api
	if wrap != nil {
		client = wrap(api)
	}
	d, err := lease.NewDynamo(client, "leases", id, lease.WithLeaseDuration(L), lease.WithFunctionTimeout(bound),
		lease.WithLogger(w.log.With("worker", id)))
	if err != nil {
		w.t.Fatal(err)
	}
	handler := func(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		s := &span{worker: id, start: time.Now()}
		if len(e.Records) > 0 {
			s.shard = strings.SplitN(e.Records[0].EventID, ":", 2)[0]
			s.first, s.last = e.Records[0].Kinesis.SequenceNumber, e.Records[len(e.Records)-1].Kinesis.SequenceNumber
		}
		w.mu.Lock()
		w.spans = append(w.spans, s)
		w.mu.Unlock()
		if w.run != nil {
			w.run(id, s.shard, e)
		}
		w.mu.Lock()
		s.end = time.Now()
		w.mu.Unlock()
		return events.KinesisEventResponse{}, nil
	}
	cfg := poller.Config{BatchSize: 5,
		StartingPosition: poller.TrimHorizon, PollInterval: 50 * time.Millisecond, ClaimInterval: d.ClaimInterval(),
		ShardSyncInterval: time.Second, ShutdownGrace: 5 * time.Second}
	var inv invoke.Invoker = inprocess.New(handler, inprocess.WithTimeout(timeout))
	p, err := poller.New(kinesissrc.MustNew(w.fk, w.arn), cfg, d, inv, poller.WithCoordinator(d), poller.WithLogger(w.log.With("worker", id)),
		poller.WithFunctionARN("arn:aws:lambda:us-east-1:000000000000:function:f"))
	if err != nil {
		w.t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	dctx, stopD := context.WithCancel(context.Background())
	pdone, ddone := make(chan struct{}), make(chan struct{})
	go func() { _ = d.Run(dctx); close(ddone) }()
	go func() { _ = p.Run(pctx); stopD(); close(pdone) }()
	wk := &worker{id: id, api: api, d: d}
	var once sync.Once
	wk.stop = func() { once.Do(func() { cancel(); <-pdone; <-ddone }) }
	w.t.Cleanup(wk.stop)
	return wk
}

// owners counts the leases each worker owns in the table.
func (w *world) owners() map[string]int {
	out := map[string]int{}
	ls, err := lease.ListLeases(context.Background(), w.db, "leases")
	if err != nil {
		w.t.Fatal(err)
	}
	for _, l := range ls {
		if !l.Finished() {
			out[l.Owner]++
		}
	}
	return out
}

func (w *world) waitFor(what string, d time.Duration, ok func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// overlaps lists invocations of one shard by two workers that ran at the same time.
func (w *world) overlaps() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	at := func(t time.Time) string { return "+" + t.Sub(w.t0).Round(time.Millisecond).String() }
	for i, x := range w.spans {
		for _, y := range w.spans[i+1:] {
			if x.shard != y.shard || x.worker == y.worker {
				continue
			}
			xe, ye := x.end, y.end
			if xe.IsZero() {
				xe = time.Now()
			}
			if ye.IsZero() {
				ye = time.Now()
			}
			if x.start.Before(ye) && y.start.Before(xe) {
				out = append(out, fmt.Sprintf("%s: %s invoked %s..%s while %s invoked %s..%s", x.shard, y.worker, at(y.start), at(ye), x.worker, at(x.start), at(xe)))
			}
		}
	}
	sort.Strings(out)
	return out
}
