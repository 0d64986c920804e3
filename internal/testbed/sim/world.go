package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/poller"
)

// rec is one record put by a producer.
type rec struct {
	seq, key, shard, tag string
	n                    int // its index among the key's records
	at                   time.Time
}

// call is one invocation as the function saw it.
type call struct {
	inc        int
	shard      string
	seqs       []string
	final      bool // the final invocation of a tumbling window
	window     time.Time
	state      int      // window state returned (final: the window's total)
	handled    []string // the records the function reported handled (all, or a partial response's prefix)
	start, end time.Time
	responded  bool // returned a response (BatchInvoked), not throttled nor killed
	failed     bool // function error, timeout or partial failure
	killed     bool // the worker died while it ran
	keys       []string
}

// discard is a failure record as the destination received it.
type discard struct {
	inc       int
	condition string
	invokes   int // its ApproximateInvokeCount
	seqs      []string
	at        time.Time
}

// world is one run's shared state. Everything the poller touches goes through one incarnation's
// wrappers (Kinesis, store, destination, invoker, observer), which consult the world's faults.
type world struct {
	s    Schedule
	fake *fakekinesis.Fake
	arn  string
	base poller.Store // durable: survives crashes

	mu       sync.Mutex
	now      func() time.Time
	recs     map[string]*rec // by sequence number
	byShard  map[string][]*rec
	keyCount map[string]int
	parents  map[string][]string
	trimmed  map[string]bool
	handled  map[string]bool // the function succeeded for it (or reported it handled)
	sent     map[string]bool // delivered to the on-failure destination
	calls    []*call
	discards []discard // failure records delivered
	// skips: the operator's skips that succeeded; skipsNotDone: by worker, those that were taken
	// but ended before their checkpoint (skip.go).
	skips        []skipped
	skipsNotDone map[int]int
	faults       map[string]time.Time // fault kind (or kind@slot for one worker's) → until when
	injected     map[string]int       // fault kind → times it took effect
	attempt      map[string]int       // batch (first seq) → invocations so far, for deterministic choices
	errs         []string
	errKinds     map[string]int
	trace        []string
	saves        int
	rewinds      []*rewound // rewind.go
	// cpJudged counts the judgments of the checkpoint invariant: records a written checkpoint
	// covered, and checkpoints judged against the lease holder at DynamoDB.
	cpJudged int
	// excused are the records retention trimmed before they were handled, delivered or
	// filtered: the only records not judged for loss.
	excused map[string]bool
	// filteredSeen counts the filtered-out records (tag b) the readers saw, by sequence number.
	filteredSeen map[string]bool
	// dbMu orders the lease-table writes that pass the workers' wrappers, so that the state of
	// a lease before and after each write is known (the fencing check).
	dbMu sync.Mutex
	// tenure is the lease counter each worker last left on a lease it owns ("owner|shard"), as
	// DynamoDB saw it: the counter its checkpoints must find.
	tenure map[string]int64
	// beats: when each worker's last heartbeat landed; declared counts the declarations of a
	// dead worker judged against them.
	beats    map[string]time.Time
	declared int
	// late are the lease-table writes still in the network (FLateWrite).
	late sync.WaitGroup
	live map[int]*incarnation // worker slot → its running incarnation
	db   *fakedynamo.DB       // the lease table, with several workers
	// consumer is the consumer the mapping reads through, with EFO.
	consumer string
	lj       *leaseJudge // the lease protocol's checks (leasefaults.go)
}

func (w *world) violate(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violateLocked(format, args...)
}

func (w *world) violateLocked(format string, args ...any) {
	kind, _, _ := strings.Cut(format, " ")
	if w.errKinds[kind]++; w.errKinds[kind] <= 5 {
		w.errs = append(w.errs, fmt.Sprintf(format, args...))
	}
}

func (w *world) logf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trace = append(w.trace, fmt.Sprintf("%8s ", w.now().Sub(epoch).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) // synctest's start of time

// active reports whether a fault is on now, and counts it when it is.
func (w *world) active(kind string) bool { return w.hit(nil, kind) }

// hit reports whether one of the fault kinds is on now for the worker: for every worker, or
// for its slot alone (inc may be nil: faults of every worker only). It counts the first found.
func (w *world) hit(inc *incarnation, kinds ...string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, kind := range kinds {
		keys := []string{kind}
		if inc != nil {
			keys = append(keys, oneWorker(kind, inc.slot))
		}
		for _, k := range keys {
			if until, ok := w.faults[k]; ok && w.now().Before(until) {
				w.injected[kind]++
				return true
			}
		}
	}
	return false
}

// oneWorker is the key of a fault window that hits one worker slot.
func oneWorker(kind string, slot int) string { return fmt.Sprintf("%s@%d", kind, slot) }

// chance is a deterministic coin for a decision about a batch: the same seed, batch and attempt
// give the same answer whatever the goroutine order.
func (w *world) chance(p float64, parts ...string) bool {
	if p <= 0 {
		return false
	}
	h := fnv.New64a()
	fmt.Fprint(h, w.s.Seed)
	for _, s := range parts {
		h.Write([]byte{0})
		h.Write([]byte(s))
	}
	return float64(h.Sum64()%1_000_000)/1_000_000 < p
}

// incarnation is one run of the worker process: its memory dies with it, the store stays.
type incarnation struct {
	id     int
	slot   int
	owner  string       // its worker id in the lease table
	base   poller.Store // the file or memory store, or the worker's lease.Dynamo
	w      *world
	dead   chan struct{}
	frozen time.Time // guarded by w.mu
	cancel context.CancelFunc
	done   chan error
	obs    *counts
	skips  *poller.Skips // where the operator's skips reach it
	// what the wrappers saw, for the observer check
	polled, invokedRecs, failedInvokes, delivered, filtered, throttles int
	// pushed: records its subscriptions were sent (with EFO).
	pushed int
	// rewindCh: closed once its lease.Dynamo saw a rewind requested (rewind.go).
	rewindCh <-chan struct{}
}

var errDead = errors.New("sim: worker is dead")

// gate is what every call of the worker passes: a dead worker does nothing, a frozen one waits.
func (inc *incarnation) gate(ctx context.Context) error {
	for {
		inc.w.mu.Lock()
		wait := inc.frozen.Sub(inc.w.now())
		inc.w.mu.Unlock()
		select {
		case <-inc.dead:
			return errDead
		default:
		}
		if wait <= 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-inc.dead:
			t.Stop()
			return errDead
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

func (inc *incarnation) isDead() bool {
	select {
	case <-inc.dead:
		return true
	default:
		return false
	}
}

// kinesis wraps the fake with the schedule's faults.
type simKinesis struct{ inc *incarnation }

func (k simKinesis) ListShards(ctx context.Context, in *kinesis.ListShardsInput, o ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if err := k.inc.gate(ctx); err != nil {
		return nil, err
	}
	if k.inc.w.hit(k.inc, FCutKinesis, FCutBoth) {
		return nil, errKinesisCut
	}
	if k.inc.w.active(FKinList5xx) {
		return nil, fakekinesis.ErrInternal()
	}
	return k.inc.w.fake.ListShards(ctx, in, o...)
}

// before gates a reading call on its worker (dead or frozen) and injects the faults every one
// can get: a throttle, then a 5xx.
func (k simKinesis) before(ctx context.Context) error {
	if err := k.inc.gate(ctx); err != nil {
		return err
	}
	switch w := k.inc.w; {
	case w.hit(k.inc, FCutKinesis, FCutBoth):
		return errKinesisCut
	case w.active(FKinThrottle):
		return fakekinesis.ErrThrottled()
	case w.active(FKin5xx):
		return fakekinesis.ErrInternal()
	}
	return nil
}

func (k simKinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, o ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if err := k.before(ctx); err != nil {
		return nil, err
	}
	w := k.inc.w
	out, err := w.fake.GetShardIterator(ctx, in, o...)
	if err == nil && w.active(FKinDropped) {
		return nil, context.DeadlineExceeded // the response was lost on the way
	}
	return out, err
}

func (k simKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, o ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if err := k.before(ctx); err != nil {
		return nil, err
	}
	w := k.inc.w
	if w.active(FKinExpired) {
		return nil, fakekinesis.ErrExpired()
	}
	out, err := w.fake.GetRecords(ctx, in, o...)
	if err == nil && w.active(FKinDropped) {
		return nil, context.DeadlineExceeded
	}
	if err == nil {
		w.mu.Lock()
		k.inc.polled += len(out.Records)
		if w.s.Filter {
			for _, r := range out.Records {
				if w.recs[*r.SequenceNumber].tag == "b" {
					k.inc.filtered++
					w.filteredSeen[*r.SequenceNumber] = true
				}
			}
		}
		w.mu.Unlock()
	}
	return out, err
}

// DescribeStreamSummary passes the stream's retention through (the poller reads it at start and at
// every shard sync).
func (k simKinesis) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, o ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	if err := k.inc.gate(ctx); err != nil {
		return nil, err
	}
	if k.inc.w.hit(k.inc, FCutKinesis, FCutBoth) {
		return nil, errKinesisCut
	}
	return k.inc.w.fake.DescribeStreamSummary(ctx, in, o...)
}

// simStore is the worker's view of the durable store, with faults. Every write that reaches the
// store is checked: its checkpoint may cover only records that were handled, delivered, filtered
// out or trimmed, and only the live worker may write.
type simStore struct{ inc *incarnation }

func (s simStore) Load(ctx context.Context) (map[string]poller.ShardProgress, error) {
	if err := s.inc.gate(ctx); err != nil {
		return nil, err
	}
	if s.inc.w.db == nil && s.inc.w.hit(s.inc, FStoreDown, FCutDynamo, FCutBoth) { // the lease table's faults are simDynamo's
		return nil, errors.New("sim: store unreachable")
	}
	return s.inc.base.Load(ctx)
}

func (s simStore) Save(ctx context.Context, u map[string]poller.ShardProgress) error {
	if err := s.inc.gate(ctx); err != nil {
		return err
	}
	w := s.inc.w
	if w.db == nil && w.hit(s.inc, FStoreDown, FCutDynamo, FCutBoth) {
		return errors.New("sim: store unreachable")
	}
	w.mu.Lock()
	if w.db == nil && w.live[s.inc.slot] != s.inc { // with leases, judged at DynamoDB (fencing)
		w.violateLocked("checkpoint written by worker %d, which is not the live one", s.inc.id)
	}
	for id, pr := range u {
		w.checkCheckpointLocked(id, pr)
	}
	w.saves++
	w.mu.Unlock()
	if err := s.inc.base.Save(ctx, u); err != nil {
		if debug {
			w.logf("worker %d: save %v: %v", s.inc.id, slices.Collect(maps.Keys(u)), err)
		}
		return err
	}
	if w.db == nil && w.active(FStoreLostAck) {
		return errors.New("sim: store write applied, response lost")
	}
	return nil
}

// checkCheckpointLocked is invariant 1 at the instant of the write.
func (w *world) checkCheckpointLocked(shard string, pr poller.ShardProgress) {
	for _, r := range w.byShard[shard] {
		covered := pr.Finished || (pr.Checkpoint != "" && fakekinesis.CompareSeq(r.seq, pr.Checkpoint) <= 0)
		if !covered {
			break
		}
		w.cpJudged++
		if !w.doneLocked(r) {
			w.violateLocked("checkpoint %s of %s (finished=%t) passes record %s (%s:%d), which was neither handled, delivered nor filtered",
				pr.Checkpoint, shard, pr.Finished, r.seq, r.key, r.n)
			return
		}
	}
}

func (w *world) doneLocked(r *rec) bool {
	return w.handled[r.seq] || w.sent[r.seq] || (w.s.Filter && r.tag == "b")
}

// simDest is the on-failure destination.
type simDest struct{ inc *incarnation }

func (d simDest) Deliver(ctx context.Context, f poller.FailureRecord) error {
	if err := d.inc.gate(ctx); err != nil {
		return err
	}
	w := d.inc.w
	if w.active(FDestDown) {
		return errors.New("sim: destination unreachable")
	}
	// The records are those of the event the failure record carries (with PF > 1 a batch holds
	// some keys only, so its sequence number range also spans other slots' records).
	var e events.KinesisEvent
	if err := json.Unmarshal(f.Payload, &e); err != nil {
		w.violate("failure record payload: %v", err)
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range e.Records {
		seq := r.Kinesis.SequenceNumber
		if fakekinesis.CompareSeq(seq, f.StartSequenceNumber) < 0 || fakekinesis.CompareSeq(seq, f.EndSequenceNumber) > 0 || w.recs[seq] == nil || w.recs[seq].shard != f.ShardID {
			w.violateLocked("failure record for %s %s..%s carries record %s outside it", f.ShardID, f.StartSequenceNumber, f.EndSequenceNumber, seq)
		}
		w.sent[seq] = true
	}
	fr := discard{inc: d.inc.id, condition: f.Condition, invokes: f.ApproximateInvokeCount, at: w.now()}
	for _, r := range e.Records {
		fr.seqs = append(fr.seqs, r.Kinesis.SequenceNumber)
	}
	w.discards = append(w.discards, fr)
	if len(e.Records) != f.BatchSize {
		w.violateLocked("failure record for %s says %d records, its event holds %d", f.ShardID, f.BatchSize, len(e.Records))
	}
	d.inc.delivered += f.BatchSize
	return nil
}

// PartialResponses counts the partial batch responses the function returned.
const PartialResponses = "partial-batch-response"

// simInvoker is the function: it records every invocation and fails as the schedule says.
type simInvoker struct{ inc *incarnation }

func (v simInvoker) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	inc, w := v.inc, v.inc.w
	// A request made while its worker is paused goes out when it resumes (a SIGSTOP between the
	// poller's last check and the send), unless its context ended meanwhile.
	if err := inc.gate(ctx); err != nil {
		return invoke.Response{}, fmt.Errorf("%w: %w", invoke.ErrUnavailable, err)
	}
	if err := ctx.Err(); err != nil {
		return invoke.Response{}, err
	}
	if err := invoke.CheckStart(ctx); err != nil { // asked just before the send, as the invokers do
		return invoke.Response{}, err
	}
	if w.hit(inc, FCutFunction) {
		return invoke.Response{}, fmt.Errorf("%w: sim: function unreachable (partition)", invoke.ErrUnavailable)
	}
	var e events.KinesisTimeWindowEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		w.violate("event does not decode: %v", err)
		return invoke.Response{}, err
	}
	c := &call{inc: inc.id, shard: e.ShardID, final: e.IsFinalInvokeForWindow, window: e.Window.Start.Time}
	for _, r := range e.Records {
		c.shard, _, _ = strings.Cut(r.EventID, ":")
		c.seqs = append(c.seqs, r.Kinesis.SequenceNumber)
	}
	if c.shard == "" {
		w.violate("invocation without a shard: %s", payload)
		return invoke.Response{}, errors.New("no shard")
	}
	batchID := c.shard + "/" + e.Window.Start.String()
	if len(c.seqs) > 0 {
		batchID = c.seqs[0] + "/" + c.seqs[len(c.seqs)-1]
	}
	w.mu.Lock()
	w.attempt[batchID]++
	attempt := fmt.Sprint(w.attempt[batchID])
	w.mu.Unlock()
	if w.active(FInvThrottle) {
		w.mu.Lock()
		inc.throttles++
		w.mu.Unlock()
		return invoke.Response{}, fmt.Errorf("%w: sim", invoke.ErrThrottled)
	}

	o := v.decide(c, batchID, attempt)
	if w.hit(inc, FInvReset) {
		return v.reset(c)
	}
	v.begin(c)
	v.run(c, o.runFor)
	_ = inc.gate(context.Background()) // a paused worker reads the response when it resumes
	return v.end(c, o, e.State)
}

// reset is an invocation whose connection is reset after its request reached the function: the
// function runs for its whole timeout, and the worker sees, well before, an error that says the
// invocation may still run (a NAT or a proxy dropping a long call).
func (v simInvoker) reset(c *call) (invoke.Response, error) {
	runFor := v.inc.w.s.FunctionTimeout
	v.begin(c)
	go v.run(c, runFor) // at the function, whatever the worker does but die alone
	time.Sleep(min(runFor/2, 200*time.Millisecond))
	return invoke.Response{}, fmt.Errorf("%w: sim: connection reset after the request was sent", invoke.ErrAmbiguous)
}

// run is the function running c for d, then finished. It runs for its time wherever the worker
// is: a paused worker's invocation goes on at the function, and so does a killed one's with
// leases (several workers: the function is remote). A single worker's function dies with it,
// whether the worker waits for its response or lost its connection (reset).
func (v simInvoker) run(c *call, d time.Duration) {
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-v.inc.dead:
		if v.inc.w.s.Workers > 1 {
			<-t.C
		} else {
			t.Stop()
		}
	}
	v.finish(c)
}

// outcome is what an invocation will do, decided before it runs.
type outcome struct {
	failedAt int // the record that fails (-1: none; 0 for a final window invocation)
	timeout  bool
	partial  bool // the failure is reported as a partial batch response
	runFor   time.Duration
}

// decide draws the outcome: poison records fail every time they are invoked; other failures,
// timeouts and partial responses as the schedule's faults and the seed's coins say.
func (v simInvoker) decide(c *call, batchID, attempt string) outcome {
	w := v.inc.w
	o := outcome{failedAt: -1, runFor: w.s.InvokeTime}
	w.mu.Lock()
	for i, seq := range c.seqs {
		if w.recs[seq].tag == "poison" {
			o.failedAt = i
			break
		}
	}
	w.mu.Unlock()
	if o.failedAt < 0 && len(c.seqs) > 0 && (w.active(FInvError) || w.chance(w.s.FailRate, "fail", batchID, attempt)) {
		o.failedAt = int(fnv32(batchID+attempt) % uint32(len(c.seqs)))
	}
	if o.failedAt < 0 && c.final && w.chance(w.s.FailRate, "final", batchID, attempt) {
		o.failedAt = 0
	}
	if w.active(FInvTimeout) {
		o.timeout, o.runFor = true, w.s.FunctionTimeout
	}
	o.partial = o.failedAt >= 0 && !o.timeout && w.s.Partial && len(c.seqs) > 0 && (w.active(FInvPartial) || w.chance(0.7, "partial", batchID, attempt))
	if o.partial {
		w.mu.Lock()
		w.injected[PartialResponses]++
		w.mu.Unlock()
	}
	return o
}

// begin records the call: its start, and the keys it may not share with another invocation
// running at the same time (judged after the run).
func (v simInvoker) begin(c *call) {
	w := v.inc.w
	keys := c.exclusive(w)
	w.mu.Lock()
	defer w.mu.Unlock()
	c.start = w.now()
	c.keys = keys
	w.calls = append(w.calls, c)
}

// finish records when the function stopped running.
func (v simInvoker) finish(c *call) {
	w := v.inc.w
	w.mu.Lock()
	defer w.mu.Unlock()
	c.end = w.now()
}

// end closes the call and answers as its outcome says: an unavailable function if its worker
// died meanwhile, a function error, or a success (a partial response, and the window's state
// carried on, where they apply).
func (v simInvoker) end(c *call, o outcome, state map[string]string) (invoke.Response, error) {
	inc, w := v.inc, v.inc.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if inc.isDead() {
		c.killed = true
		return invoke.Response{}, fmt.Errorf("%w: %w", invoke.ErrUnavailable, errDead)
	}
	c.responded = true
	resp := invoke.Response{StatusCode: 200, ExecutedVersion: "$LATEST", RequestID: fmt.Sprintf("req-%d-%d", inc.id, len(w.calls))}
	fail := func(msg string) (invoke.Response, error) {
		c.failed = true
		resp.FunctionError = invoke.FunctionErrorUnhandled
		resp.Payload = fmt.Appendf(nil, `{"errorMessage":%q,"errorType":"errorString"}`, msg)
		inc.failedInvokes++ // final window invocations (no records) count too
		inc.invokedRecs += len(c.seqs)
		return resp, nil
	}
	switch {
	case o.timeout:
		return fail("Task timed out")
	case o.failedAt >= 0 && !o.partial:
		return fail("induced failure")
	}
	handled := c.seqs
	var body struct {
		State    map[string]string                `json:"state,omitempty"`
		Failures []events.KinesisBatchItemFailure `json:"batchItemFailures,omitempty"`
	}
	if o.partial {
		handled = c.seqs[:o.failedAt]
		body.Failures = []events.KinesisBatchItemFailure{{ItemIdentifier: c.seqs[o.failedAt]}}
		c.failed = true
	}
	c.handled = handled
	for _, seq := range handled {
		w.handled[seq] = true
	}
	if w.s.Window > 0 {
		n := 0
		fmt.Sscan(state["n"], &n)
		c.state = n + len(handled)
		body.State = map[string]string{"n": fmt.Sprint(c.state)}
		if c.final {
			w.trace = append(w.trace, fmt.Sprintf("%8s worker %d: final invocation of window %s of %s: %d records",
				w.now().Sub(epoch).Round(time.Millisecond), inc.id, c.window.Sub(epoch), c.shard, c.state))
		}
	}
	resp.Payload, _ = json.Marshal(body)
	inc.invokedRecs += len(c.seqs)
	if c.failed {
		inc.failedInvokes++
	}
	return resp, nil
}

// keys are what may not be invoked twice at once: the shard with PF 1, each partition key with
// PF > 1.
func (c *call) exclusive(w *world) []string {
	if w.s.PF == 1 {
		return []string{"shard " + c.shard}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for _, seq := range c.seqs {
		seen["key "+w.recs[seq].key] = true
	}
	return sortedKeys(seen)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range maps.Keys(m) {
		out = append(out, k)
	}
	slicesSort(out)
	return out
}

func fnv32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// counts is the observer of one incarnation.
type counts struct {
	poller.NopObserver
	mu                                                               sync.Mutex
	polled, filtered, invoked, failed, dropped, delivered, throttled int
	skipped                                                          int
	failing                                                          map[string]poller.BatchFailure // by shard: the last told
}

func (c *counts) BatchSkipped(string, poller.Skipped)      { c.mu.Lock(); c.skipped++; c.mu.Unlock() }
func (c *counts) SkipPending(string, string, string, bool) {}

// The DetailObserver's part the operator reads (skip.go): the batch each shard fails on.
func (c *counts) ShardLineage(string, []string) {}
func (c *counts) Checkpointed(string, string)   {}
func (c *counts) BatchFailing(id string, f poller.BatchFailure) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing == nil {
		c.failing = map[string]poller.BatchFailure{}
	}
	c.failing[id] = f
}

func (c *counts) failingOf(id string) poller.BatchFailure {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failing[id]
}

func (c *counts) Throttled(string) { c.mu.Lock(); c.throttled++; c.mu.Unlock() }

func (c *counts) RecordsPolled(_ string, n int)      { c.mu.Lock(); c.polled += n; c.mu.Unlock() }
func (c *counts) RecordsFilteredOut(_ string, n int) { c.mu.Lock(); c.filtered += n; c.mu.Unlock() }
func (c *counts) RecordsDropped(_ string, n int)     { c.mu.Lock(); c.dropped += n; c.mu.Unlock() }
func (c *counts) RecordsDelivered(_ string, n int)   { c.mu.Lock(); c.delivered += n; c.mu.Unlock() }
func (c *counts) BatchInvoked(_ string, n int, _ time.Duration, failed bool) {
	c.mu.Lock()
	c.invoked += n
	if failed {
		c.failed++
	}
	c.mu.Unlock()
}

// freeze stops a worker for d (SIGSTOP): every call it makes waits, and so does its reading
// of a response. Its invocations in flight go on at the function and are judged as every other.
func (w *world) freeze(inc *incarnation, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	inc.frozen = w.now().Add(d)
}

// simCoord is the worker's lease coordinator: a dead worker holds nothing and does nothing.
type simCoord struct {
	inc *incarnation
	c   poller.Coordinator
}

func (s simCoord) Register(ctx context.Context, shards []poller.ShardInfo) error {
	if err := s.inc.gate(ctx); err != nil {
		return err
	}
	return s.c.Register(ctx, shards)
}

func (s simCoord) Claim(ctx context.Context, candidates []string) ([]string, error) {
	if err := s.inc.gate(ctx); err != nil {
		return nil, err
	}
	return s.c.Claim(ctx, candidates)
}

func (s simCoord) Held(id string) bool { return !s.inc.isDead() && s.c.Held(id) }

// Stopping forwards the poller's word that the mapping stops (poller.Stopper).
func (s simCoord) Stopping(ctx context.Context) {
	if st, ok := s.c.(poller.Stopper); ok && s.inc.gate(ctx) == nil {
		st.Stopping(ctx)
	}
}

// GateInvocations and StartInvocation pass the poller's admissions on to the lease coordinator
// (poller.InvocationGate), which publishes what they may still run.
func (s simCoord) GateInvocations() {
	if g, ok := s.c.(poller.InvocationGate); ok {
		g.GateInvocations()
	}
}

func (s simCoord) StartInvocation(ctx context.Context, id string) (poller.InvocationTicket, bool) {
	if s.inc.isDead() {
		return nil, false
	}
	if g, ok := s.c.(poller.InvocationGate); ok {
		if t, ok := g.StartInvocation(ctx, id); ok {
			return simTicket{inc: s.inc, t: t}, true
		}
	}
	return nil, false
}

// simTicket is an admitted invocation of an incarnation: a dead one sends nothing more.
type simTicket struct {
	inc *incarnation
	t   poller.InvocationTicket
}

func (t simTicket) Recheck() bool  { return !t.inc.isDead() && t.t.Recheck() }
func (t simTicket) End(ended bool) { t.t.End(ended) }

func (s simCoord) Release(ctx context.Context, id string) error {
	if err := s.inc.gate(ctx); err != nil {
		return err
	}
	return s.c.Release(ctx, id)
}

// simDynamo is the worker's connection to the lease table, with the store's faults and the
// worker's partitions. Every write to a lease item is judged at DynamoDB: a checkpoint may land
// only on a lease its writer owns with the counter it left there (fencing by owner and counter).
type simDynamo struct{ inc *incarnation }

var (
	errDynamoCut  = errors.New("sim: store unreachable (lease table, partition)")
	errKinesisCut = errors.New("sim: kinesis unreachable (partition)")
	errLate       = errors.New("sim: store unreachable (lease table write timed out; it may land later)")
)

func (d simDynamo) before(ctx context.Context) error {
	if err := d.inc.gate(ctx); err != nil {
		return err
	}
	if d.inc.w.active(FStoreDown) {
		return errors.New("sim: store unreachable (lease table)")
	}
	if d.inc.w.hit(d.inc, FCutDynamo, FCutBoth) {
		return errDynamoCut
	}
	return nil
}

func (d simDynamo) after(err error) error {
	if err == nil && d.inc.w.active(FStoreLostAck) {
		return errors.New("sim: store write applied, response lost (lease table)")
	}
	return err
}

// write sends one write: refused, applied now, or (FLateWrite) held in the network and applied
// once the window is over, while the worker sees a timeout.
// A create (PutItem) is never late: one conditional on absence that lands long after it was sent
// would bring back a lease finished and deleted meanwhile, which no condition can tell.
func (d simDynamo) write(ctx context.Context, key map[string]dtypes.AttributeValue, canBeLate, checkpoint bool, apply func() error, landed func()) error {
	inc, w := d.inc, d.inc.w
	if err := inc.gate(ctx); err != nil {
		return err
	}
	shard := leaseShard(key)
	w.mu.Lock()
	sent, known := w.tenure[inc.owner+"|"+shard]
	until, late := w.faults[oneWorker(FLateWrite, inc.slot)]
	late = late && canBeLate && w.now().Before(until)
	if late {
		w.injected[FLateWrite]++
	}
	w.mu.Unlock()
	if late {
		// It lands once the window is over, within about the time a worker takes to rejoin
		// and take its leases again (the lease, and the wait for its own tombstone).
		spread := 3*w.s.LeaseDuration + 2*w.s.FunctionTimeout
		lands := until.Sub(w.now()) + time.Duration(fnv32(fmt.Sprint(w.s.Seed, shard, w.now().UnixNano()))%uint32(max(1, spread/time.Millisecond)))*time.Millisecond
		w.late.Add(1)
		go func() {
			defer w.late.Done()
			time.Sleep(lands)
			if err := w.fenced(inc.owner, shard, checkpoint, sent, known, apply, landed); err == nil {
				w.logf("worker %d: a late write to %q landed", inc.id, shard)
			}
		}()
		return errLate
	}
	if err := d.before(ctx); err != nil {
		return err
	}
	return d.after(w.fenced(inc.owner, shard, checkpoint, sent, known, apply, landed))
}

// fenced applies a write of owner's to shard's lease (shard "" for the roster and the mapping
// item) and judges it: a checkpoint must find the lease owned by its writer, with the counter
// the writer last left (sent, when known). After any write that leaves the lease the writer's,
// its counter is the writer's tenure.
func (w *world) fenced(owner, shard string, checkpoint bool, sent int64, known bool, apply func() error, landed func()) error {
	w.dbMu.Lock()
	defer w.dbMu.Unlock()
	if shard == "" {
		err := apply()
		if err == nil && landed != nil {
			landed()
		}
		return err
	}
	was, wasCounter := w.leaseHolder(shard)
	err := apply()
	if err != nil {
		return err
	}
	now, counter := w.leaseHolder(shard)
	w.mu.Lock()
	defer w.mu.Unlock()
	if checkpoint {
		w.cpJudged++
		switch {
		case was != owner:
			w.violateLocked("fencing: checkpoint of %s by %s landed on a lease held by %q", shard, owner, was)
		case !known || wasCounter != sent:
			w.violateLocked("fencing: checkpoint of %s by %s, sent at its counter %d (known %t), landed at counter %d", shard, owner, sent, known, wasCounter)
		}
	}
	if now == owner {
		w.tenure[owner+"|"+shard] = counter
	}
	return nil
}

// rosterWrite judges a write to the roster once it landed: a heartbeat of the writer's is noted,
// and a declaration that a worker is dead must come a whole lease duration after that worker's
// last heartbeat landed (its leases are judged expired no sooner).
func (w *world) rosterWrite(owner string, in *dynamodb.UpdateItemInput) func() {
	expr := aws.ToString(in.UpdateExpression)
	names := in.ExpressionAttributeNames
	switch {
	case names["#me"] == owner && (strings.Contains(expr, "#m.#me.#h = :h") || strings.HasPrefix(expr, "SET #m.#me = :entry")): // a heartbeat, or a join
		joined := w.noteJoin(in)
		return func() {
			if joined != nil {
				joined()
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			w.beats[owner] = w.now()
		}
	case strings.HasPrefix(expr, "REMOVE #m.#w") && names["#w"] != "":
		dead := names["#w"]
		return func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			last, ok := w.beats[dead]
			if !ok {
				return
			}
			w.judgeDeclarationLocked(owner, dead, last)
		}
	}
	return nil
}

// leaseHolder reads a lease's owner and counter as DynamoDB holds them.
func (w *world) leaseHolder(shard string) (string, int64) {
	out, err := w.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(leaseTable), ConsistentRead: aws.Bool(true),
		Key: map[string]dtypes.AttributeValue{"leaseKey": &dtypes.AttributeValueMemberS{Value: shard}}})
	if err != nil || out.Item == nil {
		return "", 0
	}
	owner, _ := out.Item["leaseOwner"].(*dtypes.AttributeValueMemberS)
	counter, _ := out.Item["leaseCounter"].(*dtypes.AttributeValueMemberN)
	var o string
	var n int64
	if owner != nil {
		o = owner.Value
	}
	if counter != nil {
		n, _ = strconv.ParseInt(counter.Value, 10, 64)
	}
	return o, n
}

// leaseShard is the shard of a lease item's key, "" for the table's other items.
func leaseShard(key map[string]dtypes.AttributeValue) string {
	v, ok := key["leaseKey"].(*dtypes.AttributeValueMemberS)
	if !ok || strings.HasPrefix(v.Value, "!") {
		return ""
	}
	return v.Value
}

// isCheckpoint: an update that writes a lease's checkpoint and leaves its owner alone.
func isCheckpoint(in *dynamodb.UpdateItemInput) bool {
	expr := aws.ToString(in.UpdateExpression)
	return slices.Contains(slices.Collect(maps.Values(in.ExpressionAttributeNames)), "checkpoint") &&
		strings.Contains(expr, "= :cp") && !strings.Contains(expr, "#o =")
}

func (d simDynamo) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := d.leaseFaults(ctx, leaseOp(d.inc.owner, "PutItem", in.Item, nil)); err != nil {
		return nil, err
	}
	var out *dynamodb.PutItemOutput
	err := d.write(ctx, in.Item, false, false, func() (err error) { out, err = d.inc.w.db.PutItem(context.Background(), in, o...); return err }, nil)
	return out, err
}

func (d simDynamo) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := d.leaseFaults(ctx, leaseOp(d.inc.owner, "UpdateItem", in.Key, in)); err != nil {
		return nil, err
	}
	var out *dynamodb.UpdateItemOutput
	err := d.write(ctx, in.Key, true, isCheckpoint(in), func() (err error) { out, err = d.inc.w.db.UpdateItem(context.Background(), in, o...); return err },
		d.inc.w.rosterWrite(d.inc.owner, in))
	return out, err
}

func (d simDynamo) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := d.leaseFaults(ctx, leaseOp(d.inc.owner, "DeleteItem", in.Key, nil)); err != nil {
		return nil, err
	}
	var out *dynamodb.DeleteItemOutput
	err := d.write(ctx, in.Key, true, false, func() (err error) { out, err = d.inc.w.db.DeleteItem(context.Background(), in, o...); return err }, nil)
	return out, err
}

func (d simDynamo) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if err := d.leaseFaults(ctx, "scan"); err != nil {
		return nil, err
	}
	if err := d.before(ctx); err != nil {
		return nil, err
	}
	return d.inc.w.db.Scan(ctx, in, o...)
}

var debug = os.Getenv("ESM_SIM_DEBUG") != ""

func (d simDynamo) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := d.leaseFaults(ctx, leaseOp(d.inc.owner, "GetItem", in.Key, nil)); err != nil {
		return nil, err
	}
	if err := d.before(ctx); err != nil {
		return nil, err
	}
	return d.inc.w.db.GetItem(ctx, in, o...)
}

func (d simDynamo) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if err := d.leaseFaults(ctx, "batch-read"); err != nil {
		return nil, err
	}
	if err := d.before(ctx); err != nil {
		return nil, err
	}
	return d.inc.w.db.BatchGetItem(ctx, in, o...)
}
