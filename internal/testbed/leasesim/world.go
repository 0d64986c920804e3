// Package leasesim simulates many esm workers sharing a stream through DynamoDB leases, in
// virtual time (testing/synctest): real pollers and the real lease code (lease.Dynamo) on the
// in-memory Kinesis (fake/fakekinesis) and DynamoDB (fake/fakedynamo, with capacity
// accounting and throttling). It measures what the lease protocol costs and how fast it
// moves (the figures of `make sim-scale`) and checks its invariants under faults.
//
// A world must be built and run inside a synctest bubble.
package leasesim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// Config sizes a world.
type Config struct {
	Shards, Workers int
	LeaseDuration   time.Duration
	Seed            uint64
	// TableRead and TableWrite cap the table (units per second); zero: DynamoDB's defaults.
	TableRead, TableWrite float64
	// Latency of every DynamoDB call.
	Latency time.Duration
	// ShardSync is the pollers' ShardSyncInterval.
	ShardSync time.Duration
	// Poll is the pollers' PollInterval (zero: 5 s).
	Poll time.Duration
}

// world is one simulated deployment.
type world struct {
	cfg    Config
	db     *fakedynamo.DB
	kin    *fakekinesis.Fake
	stream string
	arn    string
	table  string
	rnd    *rand.Rand
	log    *slog.Logger
	counts *countHandler

	mu      sync.Mutex
	workers map[string]*simWorker
	running map[string]string    // shard → worker whose reader runs it
	since   map[string]time.Time // shard → when the worker of running claimed it
	stopped map[string]time.Time // shard → when its last reader stopped
	everRun map[string]bool
	moves   int
	gaps    []time.Duration
	maxNote string
	// fleetChanged is when a worker last started or stopped: the bound on one worker's
	// shards applies once the others had the time to see it (settleGrace).
	fleetChanged time.Time
	t0           time.Time
	maxHeld      float64 // most shards one worker ran ÷ ceil(1.1 × shards / live workers), once it had seen its peers
	finished     map[string]time.Time
	claimed      map[string]time.Time // first start of each shard
	faults       []string             // invariant violations
	exits        []error
	calls        []invocation         // every invocation, by its start and end at the function
	invokeTime   time.Duration        // how long the function runs (10 ms by default)
	injected     map[string]int       // fault kind → times it took effect
	unkind       [][2]time.Time       // when faults of one worker were on (from, to)
	delivered    map[string]bool      // eventIDs invoked
	firstCall    map[string]time.Time // shard → when its first invocation started
	lastStart    map[string]time.Time // worker → when its last invocation started
	lastEnd      map[string]time.Time // shard → when its last invocation ended
	invoked      atomic.Int64
	// leaseWrites counts the conditional writes to lease items (creates, takes, hand-overs,
	// releases, checkpoints), leaving out the roster's heartbeats.
	leaseWrites atomic.Int64
}

type simWorker struct {
	id        string
	d         *lease.Dynamo
	api       *cutAPI
	link      *link
	cancel    context.CancelFunc
	done      chan struct{}
	started   time.Time
	seenPeers bool
	marks     *lease.BlockedMarks // its blocked shards' marks, as esm run wires them
}

// cutAPI fails every call once cut (a killed worker), or while its worker is partitioned from
// DynamoDB; a paused worker's calls wait.
type cutAPI struct {
	lease.DynamoAPI
	cut  atomic.Bool
	link *link
}

// link is a worker's network and process state: what it is cut off from, and until when it is
// paused (SIGSTOP). A paused worker's calls wait until it resumes; its invocations in flight go
// on at the function.
type link struct {
	mu                             sync.Mutex
	cutDynamo, cutKinesis, cutFunc bool
	pausedUntil                    time.Time
	dead                           chan struct{}
}

func newLink() *link { return &link{dead: make(chan struct{})} }

// gate waits while the worker is paused.
func (l *link) gate(ctx context.Context) error {
	for {
		l.mu.Lock()
		wait := time.Until(l.pausedUntil)
		l.mu.Unlock()
		if wait <= 0 {
			return ctx.Err()
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-l.dead:
			t.Stop()
			return errCut
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

func (l *link) set(f func(l *link)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(l)
}

func (l *link) cut(which func(l *link) bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return which(l)
}

func (c *cutAPI) check(ctx context.Context) error {
	if c.cut.Load() {
		return errCut
	}
	if err := c.link.gate(ctx); err != nil {
		return err
	}
	if c.cut.Load() || c.link.cut(func(l *link) bool { return l.cutDynamo }) {
		return errCut
	}
	return nil
}

// linkKinesis is a worker's connection to Kinesis: refused while it is partitioned from it,
// waiting while it is paused.
type linkKinesis struct {
	*fakekinesis.Fake
	l *link
}

func (k linkKinesis) check(ctx context.Context) error {
	if err := k.l.gate(ctx); err != nil {
		return err
	}
	if k.l.cut(func(l *link) bool { return l.cutKinesis }) {
		return errCut
	}
	return nil
}

func (k linkKinesis) ListShards(ctx context.Context, in *kinesis.ListShardsInput, o ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if err := k.check(ctx); err != nil {
		return nil, err
	}
	return k.Fake.ListShards(ctx, in, o...)
}

func (k linkKinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, o ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if err := k.check(ctx); err != nil {
		return nil, err
	}
	return k.Fake.GetShardIterator(ctx, in, o...)
}

func (k linkKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, o ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if err := k.check(ctx); err != nil {
		return nil, err
	}
	return k.Fake.GetRecords(ctx, in, o...)
}

func (k linkKinesis) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, o ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	if err := k.check(ctx); err != nil {
		return nil, err
	}
	return k.Fake.DescribeStreamSummary(ctx, in, o...)
}

// invocation is one invocation as the function saw it.
type invocation struct {
	worker, shard string
	start, end    time.Time
}

// settleGrace is how long after a worker starts or stops the bound on one worker's shards
// waits: the others see the change at their next roster read and hand over within a batch.
const settleGrace = 5 * time.Second

var errCut = errors.New("leasesim: connection refused")

func (c *cutAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	return c.DynamoAPI.GetItem(ctx, in, o...)
}

func (c *cutAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	return c.DynamoAPI.BatchGetItem(ctx, in, o...)
}

func (c *cutAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	return c.DynamoAPI.PutItem(ctx, in, o...)
}

func (c *cutAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	return c.DynamoAPI.UpdateItem(ctx, in, o...)
}

func (c *cutAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	return c.DynamoAPI.DeleteItem(ctx, in, o...)
}

func (c *cutAPI) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	return c.DynamoAPI.Scan(ctx, in, o...)
}

// checkingAPI verifies at DynamoDB what only DynamoDB can tell: every checkpoint that went
// through was written by the lease's owner (the write returns the item it left).
type checkingAPI struct {
	*fakedynamo.DB
	w *world
}

// leaseItem: a key of a shard's lease (not the roster or the mapping item).
func leaseItem(k map[string]types.AttributeValue) bool {
	v, ok := k["leaseKey"].(*types.AttributeValueMemberS)
	return ok && !strings.HasPrefix(v.Value, "!")
}

// countLeaseWrite counts a conditional write to a lease item that DynamoDB served (a throttled
// request has no effect and is not charged).
func (c *checkingAPI) countLeaseWrite(cond *string, k map[string]types.AttributeValue, err error) {
	var pt *types.ProvisionedThroughputExceededException
	if cond != nil && leaseItem(k) && !errors.As(err, &pt) {
		c.w.leaseWrites.Add(1)
	}
}

func (c *checkingAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := c.DB.PutItem(ctx, in, o...)
	c.countLeaseWrite(in.ConditionExpression, in.Item, err)
	return out, err
}

func (c *checkingAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	out, err := c.DB.DeleteItem(ctx, in, o...)
	c.countLeaseWrite(in.ConditionExpression, in.Key, err)
	return out, err
}

func (c *checkingAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.DB.UpdateItem(ctx, in, o...)
	c.countLeaseWrite(in.ConditionExpression, in.Key, err)
	if err == nil && in.ExpressionAttributeValues[":cp"] != nil && in.ReturnValues == types.ReturnValueAllNew {
		me, _ := in.ExpressionAttributeValues[":me"].(*types.AttributeValueMemberS)
		owner, _ := out.Attributes["leaseOwner"].(*types.AttributeValueMemberS)
		if me == nil || owner == nil || me.Value != owner.Value {
			c.w.violation("checkpoint of %v by %v, a non-holder", in.Key["leaseKey"], me)
		}
	}
	return out, err
}

// countHandler counts log records by message (and drops them).
type countHandler struct {
	mu   sync.Mutex
	n    map[string]int
	next slog.Handler // also logs here, when set (debugging one seed)
}

// debugLog, when set, receives the lease code's log lines too.
var debugLog slog.Handler

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo {
		return nil
	}
	h.mu.Lock()
	h.n[r.Message]++
	h.mu.Unlock()
	if h.next != nil {
		return h.next.Handle(context.Background(), r)
	}
	return nil
}
func (h *countHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if h.next == nil {
		return h
	}
	return &countHandler{n: h.n, next: h.next.WithAttrs(as), mu: sync.Mutex{}}
}
func (h *countHandler) WithGroup(string) slog.Handler { return h }
func (h *countHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[msg]
}

func newWorld(cfg Config, opts ...fakedynamo.Option) *world {
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = lease.DefaultLeaseDuration
	}
	if cfg.ShardSync == 0 {
		cfg.ShardSync = 30 * time.Second
	}
	if cfg.Latency > 0 {
		l := cfg.Latency
		opts = append(opts, fakedynamo.WithLatency(func(string) time.Duration { return l }))
	}
	if cfg.TableRead > 0 {
		opts = append(opts, fakedynamo.WithTableCapacity(cfg.TableRead, cfg.TableWrite))
	}
	counts := &countHandler{n: map[string]int{}, next: debugLog}
	w := &world{
		cfg: cfg, db: fakedynamo.New(opts...), kin: fakekinesis.New(), rnd: rand.New(rand.NewPCG(cfg.Seed, 15)),
		stream: "sim", table: "sim-leases", counts: counts, log: slog.New(counts),
		workers: map[string]*simWorker{}, running: map[string]string{}, since: map[string]time.Time{}, stopped: map[string]time.Time{},
		everRun: map[string]bool{}, finished: map[string]time.Time{}, claimed: map[string]time.Time{},
		t0: time.Now(), delivered: map[string]bool{}, invokeTime: 10 * time.Millisecond, injected: map[string]int{},
		firstCall: map[string]time.Time{}, lastStart: map[string]time.Time{}, lastEnd: map[string]time.Time{},
	}
	w.arn = w.kin.CreateStream(w.stream, cfg.Shards)
	if err := lease.EnsureTable(context.Background(), w.db, w.table, true); err != nil {
		panic(err)
	}
	return w
}

func (w *world) violation(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.faults = append(w.faults, fmt.Sprintf(format, args...))
}

// observed wraps a worker's Dynamo to see which shards its poller reads.
type observed struct {
	*lease.Dynamo
	w  *world
	sw *simWorker
}

// A paused worker's poller waits at its coordinator and store before it reaches the lease code
// (whose goroutines would otherwise wait on each other's locks, which virtual time cannot pass).
func (o *observed) Claim(ctx context.Context, candidates []string) ([]string, error) {
	if err := o.sw.link.gate(ctx); err != nil {
		return nil, err
	}
	held, err := o.Dynamo.Claim(ctx, candidates)
	now := time.Now()
	w := o.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range held {
		prev, ok := w.running[id]
		if ok && prev == o.sw.id {
			continue
		}
		if other := w.workers[prev]; ok && other != nil && other.d.Held(id) {
			w.faults = append(w.faults, fmt.Sprintf("%s starts %s while %s holds it", o.sw.id, id, prev))
		}
		w.running[id], w.since[id] = o.sw.id, now
		if _, seen := w.claimed[id]; !seen {
			w.claimed[id] = now
		}
		if w.everRun[id] {
			w.moves++
			if at, ok := w.stopped[id]; ok {
				w.gaps = append(w.gaps, now.Sub(at))
				if debugLog != nil && now.Sub(at) > 5*time.Second {
					fmt.Printf("GAP %s %s stopped at %s, started by %s at %s\n", id, now.Sub(at), at.Sub(w.t0), o.sw.id, now.Sub(w.t0))
				}
			}
		}
		w.everRun[id] = true
	}
	if o.sw.seenPeers && now.Sub(w.fleetChanged) >= settleGrace {
		n := 0
		for _, owner := range w.running {
			if owner == o.sw.id {
				n++
			}
		}
		// Against the bound for the workers alive now.
		bound := ceilFrac(11*w.cfg.Shards, 10*max(1, len(w.workers)))
		if r := float64(n) / float64(bound); r > w.maxHeld {
			w.maxHeld, w.maxNote = r, fmt.Sprintf("%s ran %d of %d shards with %d workers alive, at %s", o.sw.id, n, w.cfg.Shards, len(w.workers), time.Since(w.t0).Round(time.Millisecond))
		}
	}
	return held, err
}

func (o *observed) Register(ctx context.Context, shards []poller.ShardInfo) error {
	if err := o.sw.link.gate(ctx); err != nil {
		return err
	}
	return o.Dynamo.Register(ctx, shards)
}

func (o *observed) Load(ctx context.Context) (map[string]poller.ShardProgress, error) {
	if err := o.sw.link.gate(ctx); err != nil {
		return nil, err
	}
	return o.Dynamo.Load(ctx)
}

func (o *observed) Release(ctx context.Context, id string) error {
	if err := o.sw.link.gate(ctx); err != nil {
		return err
	}
	o.w.stop(o.sw.id, id)
	return o.Dynamo.Release(ctx, id)
}

func (o *observed) Save(ctx context.Context, updates map[string]poller.ShardProgress) error {
	if err := o.sw.link.gate(ctx); err != nil {
		return err
	}
	err := o.Dynamo.Save(ctx, updates)
	if err == nil {
		for id, pr := range updates {
			if pr.Finished {
				o.w.mu.Lock()
				o.w.finished[id] = time.Now()
				o.w.mu.Unlock()
			}
		}
	}
	return err
}

// stop records that a worker's reader of a shard stopped.
func (w *world) stop(worker, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running[id] == worker {
		delete(w.running, id)
		w.stopped[id] = time.Now()
	}
}

// start runs a worker: a poller and its Dynamo, as esm run wires them.
func (w *world) start(id string) *simWorker {
	l := newLink()
	api := &cutAPI{DynamoAPI: &checkingAPI{DB: w.db, w: w}, link: l}
	d, err := lease.NewDynamo(api, w.table, id, lease.WithLeaseDuration(w.cfg.LeaseDuration),
		lease.WithLogger(w.log.With("worker", id)), lease.WithShardSettle(2*w.cfg.ShardSync), lease.WithFunctionTimeout(w.functionTimeout()),
		lease.WithRand(rand.New(rand.NewPCG(w.rnd.Uint64(), 1))), lease.WithStatusAddr(id+".workers.example.internal:9090"))
	if err != nil {
		panic(err)
	}
	sw := &simWorker{id: id, d: d, api: api, link: l, done: make(chan struct{}), started: time.Now(), marks: d.BlockedMarks()}
	co := &observed{Dynamo: d, w: w, sw: sw}
	cfg := poller.Config{StartingPosition: poller.TrimHorizon, ClaimInterval: d.ClaimInterval(),
		PollInterval: cmp.Or(w.cfg.Poll, 5*time.Second), ShardSyncInterval: w.cfg.ShardSync, ShutdownGrace: 5 * time.Second, BatchSize: 100}
	inv := invoke.InvokerFunc(func(ctx context.Context, payload []byte) (invoke.Response, error) {
		// A request made while paused goes out on resume, unless its context ended meanwhile;
		// none goes out while the worker is cut off from its function.
		if err := l.gate(ctx); err != nil {
			return invoke.Response{}, fmt.Errorf("%w: %w", invoke.ErrUnavailable, err)
		}
		if err := invoke.CheckStart(ctx); err != nil {
			return invoke.Response{}, err
		}
		if l.cut(func(l *link) bool { return l.cutFunc }) {
			return invoke.Response{}, fmt.Errorf("%w: %w", invoke.ErrUnavailable, errCut)
		}
		resp, err := w.invoke(id, payload)
		_ = l.gate(context.Background()) // a paused worker reads the response when it resumes
		return resp, err
	})
	src, err := kinesissrc.New(linkKinesis{Fake: w.kin, l: l}, w.arn)
	if err != nil {
		panic(err)
	}
	p, err := poller.New(src, cfg, co, inv, poller.WithCoordinator(co),
		poller.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), poller.WithObserver(sw.marks))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sw.cancel = cancel
	dctx, stopLeases := context.WithCancel(context.Background())
	dDone, mDone := make(chan struct{}), make(chan struct{})
	go func() { _ = d.Run(dctx); close(dDone) }()
	go func() { _ = sw.marks.Run(dctx); close(mDone) }()
	go func() {
		if err := p.Run(ctx); err != nil && !api.cut.Load() {
			w.mu.Lock()
			w.exits = append(w.exits, fmt.Errorf("%s: %w", id, err))
			w.mu.Unlock()
		}
		stopLeases()
		<-dDone
		<-mDone
		close(sw.done)
	}()
	w.mu.Lock()
	w.workers[id] = sw
	w.fleetChanged = time.Now()
	w.mu.Unlock()
	return sw
}

// stopWorker stops a worker gracefully (SIGTERM) and waits for it.
func (w *world) stopWorker(id string) {
	w.mu.Lock()
	sw := w.workers[id]
	delete(w.workers, id)
	w.fleetChanged = time.Now()
	w.mu.Unlock()
	sw.cancel()
	<-sw.done
}

// kill cuts a worker off DynamoDB and stops its readers at once (SIGKILL, as the table sees it).
func (w *world) kill(id string) time.Time {
	w.mu.Lock()
	sw := w.workers[id]
	delete(w.workers, id)
	now := time.Now()
	w.fleetChanged = now
	for shard, owner := range w.running {
		if owner == id {
			delete(w.running, shard)
			w.stopped[shard] = now
		}
	}
	w.mu.Unlock()
	sw.api.cut.Store(true)
	close(sw.link.dead)
	sw.cancel()
	<-sw.done
	return now
}

func (w *world) stopAll() {
	w.mu.Lock()
	ids := slices.Sorted(mapsKeys(w.workers))
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() { defer wg.Done(); w.stopWorker(id) }()
	}
	wg.Wait()
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// invoke runs the function (for invokeTime, wherever its worker is) and records the
// invocation by its start and end, judged by overlaps afterwards.
func (w *world) invoke(worker string, payload []byte) (invoke.Response, error) {
	shard := shardOf(payload)
	w.mu.Lock()
	c := invocation{worker: worker, shard: shard, start: time.Now()}
	if _, ok := w.firstCall[shard]; !ok {
		w.firstCall[shard] = c.start
	}
	w.lastStart[worker] = c.start
	d := w.invokeTime
	w.mu.Unlock()
	time.Sleep(d) // the handler's work, in virtual time
	w.mu.Lock()
	c.end = time.Now()
	w.calls = append(w.calls, c)
	if c.end.After(w.lastEnd[shard]) {
		w.lastEnd[shard] = c.end
	}
	w.mu.Unlock()
	w.invoked.Add(1)
	w.noteDelivered(payload)
	return invoke.Response{StatusCode: 200, Payload: []byte("null")}, nil
}

// overlaps judges every invocation against the ones of its shard that started before it: it
// reports those that started while another ran, and how many pairs it judged.
func (w *world) overlaps() (bad []string, judged int) {
	calls := slices.Clone(w.calls)
	slices.SortStableFunc(calls, func(a, b invocation) int { return a.start.Compare(b.start) })
	last := map[string]invocation{}
	for _, c := range calls {
		prev, ok := last[c.shard]
		if ok {
			judged++
			if c.start.Before(prev.end) {
				bad = append(bad, fmt.Sprintf("%s invokes %s at %s while %s's invocation (%s..%s) runs",
					c.worker, c.shard, c.start.Sub(w.t0), prev.worker, prev.start.Sub(w.t0), prev.end.Sub(w.t0)))
			}
		}
		if !ok || c.end.After(prev.end) {
			last[c.shard] = c
		}
	}
	return bad, judged
}

// counts per worker of the shards being read now.
func (w *world) loads() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, o := range w.running {
		out[o]++
	}
	return out
}

// balanced: every open shard is read, by a live worker, and no worker reads more than
// ceil(1.1 × shards / workers).
func (w *world) balanced(open int) bool {
	w.mu.Lock()
	n := len(w.workers)
	live := map[string]bool{}
	for id := range w.workers {
		live[id] = true
	}
	w.mu.Unlock()
	loads := w.loads()
	total := 0
	for o, c := range loads {
		if !live[o] || c > ceilFrac(11*open, 10*n) {
			return false
		}
		total += c
	}
	return total == open
}

func ceilFrac(a, b int) int { return (a + b - 1) / b }

// waitFor advances virtual time in steps until cond holds or limit passes; it reports how long
// it took.
func waitFor(limit, step time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) <= limit {
		if cond() {
			return time.Since(start), true
		}
		time.Sleep(step)
	}
	return time.Since(start), false
}

// usage is the table's consumed units so far.
func (w *world) usage() (ru, wu float64, cond int64) {
	st := w.db.TableStats(w.table)
	return st.ReadUnits, st.WriteUnits, st.ConditionalWrites
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return s[i]
}

func shardOf(payload []byte) string {
	// The event's first eventID is "shardId-…:seq"; find the shard id without decoding all.
	const k = `"eventID":"`
	i := indexOf(payload, k)
	if i < 0 {
		return ""
	}
	rest := payload[i+len(k):]
	for j, c := range rest {
		if c == ':' || c == '"' {
			return string(rest[:j])
		}
	}
	return ""
}

func indexOf(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}

var _ = aws.String

// functionTimeout is the invocation bound the workers give their lease tables: the function's
// time, rounded up (at least the default).
func (w *world) functionTimeout() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return max(invoke.DefaultTimeout, w.invokeTime.Truncate(time.Second)+time.Second)
}
