package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// Result is what one run did and found.
type Result struct {
	Schedule   Schedule
	Violations []string
	Trace      []string
	Injected   map[string]int // fault kind or event → how often it took effect
	Checked    map[string]int // invariant → how many cases it judged
}

// Failed reports whether an invariant broke.
func (r Result) Failed() bool { return len(r.Violations) > 0 }

// Report is a short account of a failing run: the schedule, what broke and the trace's tail.
func (r Result) Report() string {
	var b strings.Builder
	b.WriteString(r.Schedule.String())
	b.WriteString("violations:\n")
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	fmt.Fprintf(&b, "trace (last %d steps):\n", traceTail)
	for _, l := range r.Trace[max(0, len(r.Trace)-traceTail):] {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	if r.Schedule.Workers > 1 {
		fmt.Fprintf(&b, "replay: make sim LEASES=1 SEED=%d\n", r.Schedule.Seed)
	} else {
		fmt.Fprintf(&b, "replay: make sim SEED=%d\n", r.Schedule.Seed)
	}
	return b.String()
}

// traceTail is how much of a failing run's trace is printed (ESM_SIM_TRACE sets it).
var traceTail = 40

// Run plays the seed's schedule. It must be called inside a testing/synctest bubble; dir is a
// directory for the file store (runs that use one).
func Run(seed int64, dir string) Result {
	return RunSchedule(Generate(seed), dir)
}

// RunSchedule plays a schedule (see Run).
func RunSchedule(s Schedule, dir string) Result {
	w := &world{
		s: s, now: time.Now,
		recs: map[string]*rec{}, byShard: map[string][]*rec{}, keyCount: map[string]int{},
		parents: map[string][]string{}, trimmed: map[string]bool{}, handled: map[string]bool{}, sent: map[string]bool{},
		excused: map[string]bool{}, filteredSeen: map[string]bool{}, tenure: map[string]int64{}, beats: map[string]time.Time{}, errKinds: map[string]int{}, live: map[int]*incarnation{}, faults: map[string]time.Time{}, injected: map[string]int{}, attempt: map[string]int{},
		lj: newLeaseJudge(), skipsNotDone: map[int]int{},
	}
	w.fake = fakekinesis.New(fakekinesis.WithIteratorTTL(s.IteratorTTL), fakekinesis.WithListShardsPageSize(s.ListPageSize), s.subscriptionTiming())
	w.arn = w.fake.CreateStream("sim", s.Shards)
	w.useSubscriptions()
	var closeStore func()
	if s.FileStore {
		fs, err := checkpoint.OpenFile(dir)
		if err != nil {
			return Result{Schedule: s, Violations: []string{"open file store: " + err.Error()}}
		}
		w.base = fs.Mapping(checkpoint.MappingKey(w.arn, "sim"))
		closeStore = func() { _ = fs.Close() }
	} else {
		w.base = poller.NewMemoryStore()
		closeStore = func() {}
	}
	defer closeStore()
	w.refreshGraph()
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0xe7e7)) // choices of keys and shards

	d := &driver{w: w, rng: rng, slots: make([]*slot, s.Workers)}
	for i := range d.slots {
		d.slots[i] = &slot{n: i}
	}
	if s.Workers > 1 {
		w.db = fakedynamo.New()
		if err := lease.EnsureTable(context.Background(), w.db, leaseTable, true); err != nil {
			return Result{Schedule: s, Violations: []string{"lease table: " + err.Error()}}
		}
	}
	begin := time.Now()
	d.begin = begin
	d.until(begin)
	for _, e := range s.Events {
		d.until(begin.Add(e.At))
		d.apply(e)
	}
	// Heal everything and let the mapping catch up, then stop it gracefully.
	w.mu.Lock()
	clear(w.faults)
	w.mu.Unlock()
	for _, sl := range d.slots {
		sl.restart = time.Time{}
	}
	// A mapping still making progress is given the time it needs (a slow function bisecting
	// poison records can take long): the wait ends 30 minutes after the last record was done,
	// and after 3 hours at most.
	deadline, limit, done := time.Now().Add(30*time.Minute), time.Now().Add(3*time.Hour), w.doneCount()
	for d.until(time.Now().Add(time.Second)); !w.settled() && time.Now().Before(deadline) && time.Now().Before(limit); {
		if s.Skips { // the operator goes on skipping what is blocked
			d.skipAll(0)
		}
		d.until(time.Now().Add(time.Second))
		if n := w.doneCount(); n > done {
			done, deadline = n, time.Now().Add(30*time.Minute)
		}
	}
	if !w.settled() && w.db != nil && os.Getenv("ESM_SIM_DEBUG") != "" {
		out, _ := w.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(leaseTable)})
		for _, it := range out.Items {
			var b strings.Builder
			for _, k := range slices.Sorted(maps.Keys(it)) {
				switch v := it[k].(type) {
				case *dtypes.AttributeValueMemberS:
					fmt.Fprintf(&b, " %s=%s", k, v.Value)
				case *dtypes.AttributeValueMemberN:
					fmt.Fprintf(&b, " %s=%s", k, v.Value)
				case *dtypes.AttributeValueMemberSS:
					fmt.Fprintf(&b, " %s=%v", k, v.Value)
				}
			}
			fmt.Fprintf(os.Stderr, "lease%s\n", b.String())
		}
	}
	if d.rewinding != nil { // a rewind still waiting for the fleet: it ends within its wait
		<-d.rewinding.done
		d.rewindDone()
	}
	d.checkMembers()
	stopped := map[string]bool{}
	for _, sl := range d.slots {
		if sl.inc != nil {
			stopped[sl.inc.owner] = true
		}
		d.stop(sl, true)
	}
	d.crashed.Wait() // killed workers' Run returns once their functions end
	d.skipping.Wait()
	w.late.Wait() // lease-table writes still in the network land
	w.checkBounds(stopped)
	w.logf("run ended")
	w.injected["records-excused-by-a-trim"] = len(w.excused) // the only ones not judged for loss
	res := Result{Schedule: s, Trace: w.trace, Injected: w.injected, Checked: map[string]int{}}
	w.check(&res, d.incs, d.returned)
	res.Violations = append(res.Violations, w.errs...)
	return res
}

const leaseTable = "sim-leases"

// driver plays a schedule: it owns the workers' lifecycles.
type driver struct {
	w     *world
	rng   *rand.Rand
	slots []*slot
	incs  []*incarnation
	// crashed waits for killed workers' Run to return; returned counts the workers whose Run
	// returned (every goroutine of theirs stopped), guarded by w.mu.
	crashed  sync.WaitGroup
	returned int
	skipping sync.WaitGroup // the operator's skips in progress (skip.go)
	// begin is when the schedule started; rewinding, a lease-table rewind in progress.
	begin     time.Time
	rewinding *rewindRun
}

// slot is one worker (a container): its current incarnation, or when it comes back.
type slot struct {
	n       int
	inc     *incarnation
	restart time.Time
	// heldForRewind: stopped for a rewind, it starts again once the rewind is done.
	heldForRewind bool
}

func (d *driver) start(sl *slot) {
	w := d.w
	inc := &incarnation{id: len(d.incs) + 1, slot: sl.n, w: w, dead: make(chan struct{}), obs: &counts{}, done: make(chan error, 1), skips: poller.NewSkips()}
	inc.owner = fmt.Sprintf("worker-%d-%d", sl.n, inc.id)
	retries := w.s.Retries
	start := poller.TrimHorizon
	if w.s.Latest {
		start = poller.Latest
	}
	cfg := poller.Config{
		MaximumBatchingWindow: w.s.BatchWindow,
		StartingPosition:      start, BatchSize: w.s.BatchSize, ParallelizationFactor: w.s.PF,
		BisectBatchOnFunctionError: w.s.Bisect, ReportBatchItemFailures: w.s.Partial, MaximumRetryAttempts: &retries,
		OnFailureDestination: "arn:aws:sqs:us-east-1:000000000000:sim-dlq", TumblingWindow: w.s.Window,
		PollInterval: w.s.PollInterval, MinPollSpacing: 200 * time.Millisecond, ShardSyncInterval: w.s.ShardSync,
	}
	if w.s.Filter {
		cfg.FilterPatterns = []string{`{"data":{"tag":["a","poison"]}}`}
	}
	opts := []poller.Option{poller.WithDestination(simDest{inc}), poller.WithObserver(inc.obs),
		poller.WithLogger(w.debugLogger(inc)), poller.WithInvocationBound(w.s.FunctionTimeout),
		poller.WithRand(rand.New(rand.NewPCG(uint64(w.s.Seed), uint64(inc.id)))), // retries' jitter: the seed's
		poller.WithSkips(inc.skips)}
	inc.base = w.base
	var runLeases func(context.Context) error
	if w.db != nil {
		rev, ok := w.rewindRevision()
		if !ok { // a rewind in progress: a worker waits before it joins
			sl.restart = time.Now().Add(500 * time.Millisecond)
			return
		}
		dyn, err := lease.NewDynamo(simDynamo{inc}, leaseTable, inc.owner, lease.WithRewindRevision(rev),
			lease.WithLeaseDuration(w.s.leaseOf(sl.n)), lease.WithFunctionTimeout(w.s.FunctionTimeout), lease.WithLogger(w.debugLogger(inc)))
		if err != nil {
			w.violate("lease.NewDynamo: %v", err)
			return
		}
		inc.base, runLeases, inc.rewindCh = dyn, dyn.Run, dyn.RewindRequested()
		cfg.ClaimInterval = dyn.ClaimInterval()
		opts = append(opts, poller.WithCoordinator(simCoord{inc: inc, c: dyn}))
	}
	src, err := kinesissrc.New(simKinesis{inc}, w.arn, kinesissrc.WithConsumer(w.consumer)) // with EFO
	if err != nil {
		w.violate("kinesis source: %v", err)
		return
	}
	opts = append(opts, poller.WithFunctionARN("arn:aws:lambda:us-east-1:000000000000:function:sim"))
	p, err := poller.New(src, cfg, simStore{inc}, simInvoker{inc}, opts...)
	if err != nil {
		w.violate("poller.New: %v", err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	lctx, stopLeases := context.WithCancel(context.Background())
	leasesDone := make(chan error, 1)
	if runLeases != nil {
		go func() { leasesDone <- runLeases(lctx) }()
	} else {
		leasesDone <- nil
	}
	inc.cancel = func() { cancel() }
	w.mu.Lock()
	w.live[sl.n] = inc
	w.lj.started[inc] = w.now()
	w.mu.Unlock()
	go func() {
		err := p.Run(ctx)
		stopLeases() // after the poller: its last checkpoints need the leases
		<-leasesDone
		inc.done <- err
	}()
	sl.inc = inc
	d.incs = append(d.incs, inc)
	w.logf("worker %d (slot %d) started", inc.id, sl.n)
}

// stop ends a worker: gracefully (its Run must return nil, unless the store is failing), or as
// a crash (memory lost at once; nothing it does afterwards reaches anything).
func (d *driver) stop(sl *slot, graceful bool) {
	inc := sl.inc
	if inc == nil {
		return
	}
	w := d.w
	if !graceful {
		// Memory lost at once; its goroutines end when the calls they wait on do (a function
		// invocation runs to its end).
		close(inc.dead)
		inc.cancel()
		w.mu.Lock()
		delete(w.live, sl.n)
		w.mu.Unlock()
		sl.inc = nil
		d.crashed.Add(1)
		go func() {
			defer d.crashed.Done()
			<-inc.done
			w.mu.Lock()
			d.returned++
			w.mu.Unlock()
		}()
		w.logf("worker %d killed", inc.id)
		return
	}
	inc.cancel()
	err := <-inc.done
	w.mu.Lock()
	d.returned++
	w.mu.Unlock()
	switch {
	case !graceful:
	case err != nil && !persistentFault(err):
		w.violate("graceful stop of worker %d: Run = %v", inc.id, err)
	}
	if graceful {
		close(inc.dead)
	}
	w.mu.Lock()
	delete(w.live, sl.n)
	w.mu.Unlock()
	sl.inc = nil
	w.logf("worker %d stopped (graceful=%t, err=%v)", inc.id, graceful, err)
}

// until advances virtual time to t, restarting workers when they are due and noticing when one
// exits by itself (a failure that persisted: exit 1, and a supervisor starts it again).
func (d *driver) until(t time.Time) {
	for {
		for _, sl := range d.slots {
			if sl.inc == nil && !time.Now().Before(sl.restart) {
				d.start(sl)
			}
		}
		wait := time.Until(t)
		if wait <= 0 {
			return
		}
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv}}
		var which []*slot
		for _, sl := range d.slots {
			if sl.inc != nil {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(sl.inc.done)})
				which = append(which, sl)
			} else if r := time.Until(sl.restart); r < wait {
				wait = r
			}
		}
		rewinds := d.rewindCases(&cases)
		timer := time.NewTimer(wait)
		cases[0].Chan = reflect.ValueOf(timer.C)
		i, v, _ := reflect.Select(cases)
		timer.Stop()
		if i == 0 {
			continue
		}
		if i > len(which) {
			rewinds(i - len(which) - 1)
			continue
		}
		sl := which[i-1]
		err, _ := v.Interface().(error)
		w := d.w
		if err == nil {
			w.violate("worker %d: Run returned nil without a stop", sl.inc.id)
		} else if !persistentFault(err) {
			w.violate("worker %d exited: %v", sl.inc.id, err)
		}
		w.mu.Lock()
		d.returned++
		w.injected["exit-on-persistent-failure"]++
		delete(w.live, sl.n)
		w.mu.Unlock()
		close(sl.inc.dead)
		w.logf("worker %d exited: %v", sl.inc.id, err)
		sl.inc = nil
		sl.restart = time.Now().Add(time.Second)
	}
}

func (d *driver) apply(e Event) {
	w := d.w
	switch e.Kind {
	case EvPut:
		d.put(e.N)
		return
	case EvSplit:
		open := w.fake.OpenShards("sim")
		w.fake.Split("sim", open[d.rng.IntN(len(open))])
	case EvMerge:
		open := w.fake.OpenShards("sim")
		if len(open) < 2 {
			return
		}
		i := d.rng.IntN(len(open) - 1)
		w.fake.Merge("sim", open[i], open[i+1])
	case EvScale:
		n := len(w.fake.OpenShards("sim"))
		target := min(max(e.N, (n+1)/2), 2*n)
		if target == n {
			return
		}
		w.fake.UpdateShardCount("sim", target)
	case EvTrim:
		// Retention trims the oldest data first: a closed shard goes only once its parents have
		// gone (they closed before it did).
		var closed []string
		w.mu.Lock()
		for _, id := range w.fake.ClosedShards("sim") {
			ok := true
			for _, p := range w.parents[id] {
				ok = ok && w.trimmed[p]
			}
			if ok {
				closed = append(closed, id)
			}
		}
		if len(closed) == 0 {
			w.mu.Unlock()
			return
		}
		id := closed[d.rng.IntN(len(closed))]
		w.trimmed[id] = true
		for _, r := range w.byShard[id] {
			if !w.doneLocked(r) {
				w.excused[r.seq] = true
			}
		}
		w.mu.Unlock()
		w.fake.Trim("sim", id)
	case EvFault:
		key := e.Fault
		if e.OneWorker {
			key = oneWorker(e.Fault, e.W%len(d.slots))
		}
		w.mu.Lock()
		w.faults[key] = time.Now().Add(e.D)
		w.mu.Unlock()
	case EvCrash:
		sl := d.slots[e.W%len(d.slots)]
		if sl.inc == nil {
			return
		}
		d.stop(sl, false)
		sl.restart = time.Now().Add(e.D)
	case EvFreeze:
		sl := d.slots[e.W%len(d.slots)]
		if sl.inc == nil {
			return
		}
		w.freeze(sl.inc, e.D)
	case EvRewind:
		d.rewind(e)
	case EvStop:
		sl := d.slots[e.W%len(d.slots)]
		if sl.inc == nil {
			return
		}
		d.stop(sl, true)
		sl.restart = time.Now().Add(e.D)
	case EvSkip:
		d.skipAll(e.N)
	}
	w.mu.Lock()
	w.injected[string(e.Kind)]++
	w.mu.Unlock()
	w.logf("%s", e)
	w.refreshGraph()
}

// put writes n records over the keys; a few are poison, some are filtered out (tag b).
func (d *driver) put(n int) {
	w := d.w
	for range n {
		key := fmt.Sprintf("key-%d", d.rng.IntN(w.s.Keys))
		tag := "a"
		switch {
		case d.rng.Float64()*100 < w.s.PoisonPct:
			tag = "poison"
		case w.s.Filter && d.rng.IntN(4) == 0:
			tag = "b"
		}
		// The record is known to the world before any reader can get it from the fake.
		w.mu.Lock()
		idx := w.keyCount[key]
		w.keyCount[key]++
		data, _ := json.Marshal(map[string]any{"key": key, "n": idx, "tag": tag})
		shard, seq := w.fake.Put("sim", key, data)
		r := &rec{seq: seq, key: key, shard: shard, tag: tag, n: idx, at: time.Now().Truncate(time.Millisecond)}
		w.recs[seq] = r
		w.byShard[shard] = append(w.byShard[shard], r)
		if tag == "poison" {
			w.injected["poison-record"]++
		}
		w.mu.Unlock()
	}
}

// refreshGraph learns the parents of every shard from a listing (trimmed shards stay known).
func (w *world) refreshGraph() {
	in := &kinesis.ListShardsInput{StreamARN: &w.arn}
	for {
		out, err := w.fake.ListShards(context.Background(), in)
		if err != nil {
			w.violate("sim listing: %v", err)
			return
		}
		w.mu.Lock()
		for _, sh := range out.Shards {
			w.parents[*sh.ShardId] = parentsOf(sh)
		}
		w.mu.Unlock()
		if out.NextToken == nil {
			return
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

func parentsOf(sh types.Shard) []string {
	var ps []string
	for _, p := range []*string{sh.ParentShardId, sh.AdjacentParentShardId} {
		if p != nil {
			ps = append(ps, *p)
		}
	}
	return ps
}

// doneCount is how many records were handled, delivered or filtered out.
func (w *world) doneCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.recs {
		if w.doneLocked(r) {
			n++
		}
	}
	return n
}

// settled reports whether every record was handled, delivered, filtered out or trimmed.
func (w *world) settled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.recs {
		if !w.doneLocked(r) && !w.excused[r.seq] {
			return false
		}
	}
	return true
}

func slicesSort(s []string) { slices.Sort(s) }

// persistentFault reports whether a worker's exit came from a fault the schedule kept up longer
// than the poller's retry budget: the store, or the listing at start.
func persistentFault(err error) bool {
	return strings.Contains(err.Error(), "sim: store") || strings.Contains(err.Error(), "sim: kinesis") || strings.Contains(err.Error(), "InternalFailure")
}

var _ = errors.New

// debugLogger is the workers' logger: discarded, or with ESM_SIM_DEBUG into the trace.
func (w *world) debugLogger(inc *incarnation) *slog.Logger {
	if !debug {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(traceWriter{w, inc.id}, &slog.HandlerOptions{Level: slog.LevelInfo,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
}

type traceWriter struct {
	w  *world
	id int
}

func (t traceWriter) Write(p []byte) (int, error) {
	t.w.logf("worker %d log: %s", t.id, strings.TrimSpace(string(p)))
	return len(p), nil
}
