package poller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// subscriptions is the fake seen through a log of every SubscribeToShard call and its outcome.
type subscriptions struct {
	*fakekinesis.Fake
	mu    sync.Mutex
	calls []*kinesis.SubscribeToShardInput
	inUse int // calls refused with ResourceInUseException
}

func (s *subscriptions) SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
	out, err := s.Fake.SubscribeToShard(ctx, in, optFns...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, in)
	var iu *types.ResourceInUseException
	if errors.As(err, &iu) {
		s.inUse++
	}
	return out, err
}

func (s *subscriptions) count() (calls, inUse int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls), s.inUse
}

// newEFOHarness is newHarness reading through a registered consumer, with fast subscription
// retries; fakeOpts go to the fake.
func newEFOHarness(t *testing.T, shards int, fakeOpts ...fakekinesis.Option) (*harness, *subscriptions) {
	f := fakekinesis.New(fakeOpts...)
	subs := &subscriptions{Fake: f}
	h := &harness{t: t, fake: f, kin: subs, arn: f.CreateStream("s", shards), store: NewMemoryStore(), rec: &recorder{}}
	h.cfg = Config{StartingPosition: TrimHorizon, PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond,
		ShardSyncInterval: time.Hour}
	h.srcOpts = []kinesissrc.Option{kinesissrc.WithConsumer(f.RegisterConsumer("s", "esm"))}
	h.opts = []Option{withEFOTimings(subscriptionRenewal, 5*time.Millisecond)}
	return h, subs
}

// withEFOTimings sets the renewal time and the retry pacing of subscriptions.
func withEFOTimings(renew, retry time.Duration) Option {
	return func(p *Poller) { p.efo = &efo{renew: renew, retry: backoff{base: retry, max: 4 * retry}} }
}

// putPaced writes n records over keys, one every d, as a producer does while the mapping runs.
func (h *harness) putPaced(keys, n int, d time.Duration, counters map[string]int) {
	for range n {
		h.put(keys, 1, counters)
		time.Sleep(d)
	}
}

// TestSubscriptionFollowsSplitAndMerge: every shard is read through its subscription alone — no
// GetRecords — across a split and a merge while the mapping runs; the ChildShards of the last
// event finish each parent and start its children in lineage order.
func TestSubscriptionFollowsSplitAndMerge(t *testing.T) {
	t.Run("initial-response", func(t *testing.T) { testSubscriptionFollowsSplitAndMerge(t) })
	// kinesis-local and LocalStack start the stream with its first event: the same client reads
	// both (before it decided from the stream, every subscription failed here).
	t.Run("no initial-response", func(t *testing.T) { testSubscriptionFollowsSplitAndMerge(t, fakekinesis.WithoutInitialResponse()) })
}

func testSubscriptionFollowsSplitAndMerge(t *testing.T, fakeOpts ...fakekinesis.Option) {
	h, subs := newEFOHarness(t, 2, fakeOpts...)
	h.cfg.BatchSize = 10
	counters := map[string]int{}
	h.put(20, 200, counters)
	h.start()
	testkit.WaitFor(t, "first deliveries", 5*time.Second, func() bool { return len(h.rec.deliveries()) > 0 })
	if n := h.fake.Calls(fakekinesis.OpGetRecords); n != 0 {
		t.Fatalf("%d GetRecords calls before any shard closed: records must arrive through subscriptions", n)
	}
	kids := h.fake.Split("s", "shardId-000000000000")
	h.put(20, 200, counters)
	merged := h.fake.Merge("s", kids[1], "shardId-000000000001")
	h.put(20, 200, counters)
	testkit.WaitFor(t, "all 600 records", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 600 })
	got := h.rec.deliveries()
	checkDelivered(t, got, counters)
	checkLineage(t, got, map[string][]string{
		kids[0]: {"shardId-000000000000"}, kids[1]: {"shardId-000000000000"}, merged: {kids[1], "shardId-000000000001"},
	})
	// A shard that a listing shows closed before its subscription reported the end is drained
	// with GetRecords (a few calls each; three shards close here); polling the 600 records in
	// batches of 10 would take at least 60.
	if n := h.fake.Calls(fakekinesis.OpGetRecords); n > 3*4 {
		t.Fatalf("%d GetRecords calls: records must arrive through subscriptions (only closed shards are drained)", n)
	}
	if calls, _ := subs.count(); calls < 4 {
		t.Fatalf("%d subscriptions; want one for each of the two first shards and the two that stay open (the split's second child may close before its reader subscribes, and is then drained with GetRecords)", calls)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	prog, _ := h.store.Load(context.Background())
	for _, id := range []string{"shardId-000000000000", "shardId-000000000001", kids[1]} {
		if !prog[id].Finished {
			t.Errorf("closed shard %s not recorded finished: %+v", id, prog[id])
		}
	}
}

// TestSubscriptionRenewals: subscriptions that Kinesis ends (the lifetime) and that esm renews
// itself (before the lifetime) are resumed from the last ContinuationSequenceNumber: records put
// all the while arrive exactly once, in order.
func TestSubscriptionRenewals(t *testing.T) {
	for _, tt := range []struct {
		name            string
		lifetime, renew time.Duration
		sdk             bool
	}{
		{name: "lifetime ends", lifetime: 150 * time.Millisecond, renew: subscriptionRenewal},
		{name: "renewed before the lifetime", lifetime: 0, renew: 150 * time.Millisecond},
		// The SDK keeps the stream (an emulator over HTTP/1.1): its event stream is read.
		{name: "renewed before the lifetime, read by the SDK", lifetime: 0, renew: 150 * time.Millisecond, sdk: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, subs := newEFOHarness(t, 2, fakekinesis.WithSubscriptionTiming(tt.lifetime, time.Millisecond))
			ans := &answers{http1: tt.sdk}
			h.opts = []Option{withEFOTimings(tt.renew, 5*time.Millisecond)}
			h.srcOpts = append(h.srcOpts, kinesissrc.WithSubscribeOptions(ans.option))
			h.cfg.BatchSize = 3
			counters := map[string]int{}
			h.start()
			h.putPaced(10, 300, 5*time.Millisecond, counters) // about 1.5 s: several renewals per shard
			testkit.WaitFor(t, "all 300 records", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 300 })
			checkDelivered(t, h.rec.deliveries(), counters)
			calls, _ := subs.count()
			if calls < 2*4 {
				t.Fatalf("%d subscriptions in 1.5 s for 2 shards: they were not renewed", calls)
			}
			subs.mu.Lock()
			defer subs.mu.Unlock()
			resumed := 0
			for _, in := range subs.calls {
				if in.StartingPosition.Type == types.ShardIteratorTypeAtSequenceNumber && in.StartingPosition.SequenceNumber != nil {
					resumed++
				}
			}
			if resumed < calls-2 {
				t.Fatalf("%d of %d subscriptions resumed from a continuation sequence number", resumed, calls)
			}
			if taken, left := ans.taken(); tt.sdk && (taken != 0 || left == 0) || !tt.sdk && (left != 0 || taken == 0) {
				t.Fatalf("%d streams read by the pump, %d by the SDK", taken, left)
			}
		})
	}
}

// TestSubscriptionDropsAndResourceInUse: connections cut mid-stream are resubscribed; a
// resubscription within Kinesis' reuse window is refused with ResourceInUseException and backed
// off; injected call faults are retried. Nothing is lost or repeated.
func TestSubscriptionDropsAndResourceInUse(t *testing.T) {
	h, subs := newEFOHarness(t, 2, fakekinesis.WithSubscriptionTiming(0, 100*time.Millisecond))
	h.cfg.BatchSize = 4
	var events, injected atomic.Int64
	h.fake.Inject(func(op string, in any) error {
		switch op {
		case fakekinesis.OpSubscribeToShardEvent:
			if len(in.(*fakekinesis.SubscriptionEvent).Event.Records) > 0 && events.Add(1)%4 == 0 {
				injected.Add(1)
				return fakekinesis.ErrDropped
			}
		case fakekinesis.OpSubscribeToShard:
			if h.fake.Calls(fakekinesis.OpSubscribeToShard)%5 == 0 {
				injected.Add(1)
				return fakekinesis.ErrInternal()
			}
		}
		return nil
	})
	counters := map[string]int{}
	h.start()
	h.putPaced(10, 300, 3*time.Millisecond, counters)
	testkit.WaitFor(t, "all 300 records", 15*time.Second, func() bool { return len(h.rec.deliveries()) >= 300 })
	checkDelivered(t, h.rec.deliveries(), counters)
	calls, inUse := subs.count()
	if injected.Load() < 4 || inUse == 0 {
		t.Fatalf("%d faults injected and %d ResourceInUse refusals in %d subscriptions: the scenario did not happen", injected.Load(), inUse, calls)
	}
	t.Logf("%d subscriptions, %d faults injected, %d refused as in use", calls, injected.Load(), inUse)
}

// TestSubscriptionResumesAfterCheckpoint: a restarted mapping subscribes after its checkpoint and
// repeats nothing.
func TestSubscriptionResumesAfterCheckpoint(t *testing.T) {
	h, subs := newEFOHarness(t, 1, fakekinesis.WithSubscriptionTiming(0, 50*time.Millisecond))
	counters := map[string]int{}
	h.put(5, 50, counters)
	h.start()
	testkit.WaitFor(t, "50 records", 5*time.Second, func() bool { return len(h.rec.deliveries()) >= 50 })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	prog, _ := h.store.Load(context.Background())
	ck := prog["shardId-000000000000"].Checkpoint
	h.put(5, 50, counters)
	h.start()
	testkit.WaitFor(t, "100 records", 5*time.Second, func() bool { return len(h.rec.deliveries()) >= 100 })
	checkDelivered(t, h.rec.deliveries(), counters)
	subs.mu.Lock()
	defer subs.mu.Unlock()
	var restart *types.StartingPosition
	for _, in := range subs.calls[1:] {
		if in.StartingPosition.Type != types.ShardIteratorTypeAtSequenceNumber {
			restart = in.StartingPosition
			break
		}
	}
	if restart == nil || restart.Type != types.ShardIteratorTypeAfterSequenceNumber || aws.ToString(restart.SequenceNumber) != ck {
		t.Fatalf("restart subscribed at %+v, want AFTER_SEQUENCE_NUMBER %s (the checkpoint)", restart, ck)
	}
}

// TestClosedShardDrainedWithGetRecords: a subscription that never reports the shard's end (as
// kinesis-local's never does) does not hold the shard open: once ListShards shows it closed, the
// rest is read with GetRecords to its end, and the children follow in lineage order.
func TestClosedShardDrainedWithGetRecords(t *testing.T) {
	h, _ := newEFOHarness(t, 1)
	h.cfg.ShardSyncInterval = 100 * time.Millisecond
	h.cfg.BatchSize = 10
	var hidden atomic.Int64
	h.fake.Inject(func(op string, in any) error {
		if se, ok := in.(*fakekinesis.SubscriptionEvent); ok && op == fakekinesis.OpSubscribeToShardEvent && se.Event.ChildShards != nil {
			hidden.Add(1)
			return fakekinesis.ErrDropped // the end never reaches the subscriber
		}
		return nil
	})
	splitWhileReading(t, h, 10, 100)
	if hidden.Load() == 0 || h.fake.Calls(fakekinesis.OpGetRecords) == 0 {
		t.Fatalf("%d shard ends hidden, %d GetRecords calls: the drain did not happen", hidden.Load(), h.fake.Calls(fakekinesis.OpGetRecords))
	}
}

// splitWhileReading puts n records over keys on the harness' one shard, starts the mapping,
// splits the shard once records arrive, puts n more, and checks that all 2n are delivered once, in
// order per key, every parent record before any child's.
func splitWhileReading(t *testing.T, h *harness, keys, n int) {
	t.Helper()
	counters := map[string]int{}
	h.put(keys, n, counters)
	h.start()
	testkit.WaitFor(t, "first deliveries", 5*time.Second, func() bool { return len(h.rec.deliveries()) > 0 })
	if n := h.fake.Calls(fakekinesis.OpGetRecords); n != 0 {
		t.Fatalf("%d GetRecords calls before any shard closed: records must arrive through subscriptions", n)
	}
	kids := h.fake.Split("s", "shardId-000000000000")
	h.put(keys, n, counters)
	testkit.WaitFor(t, "every record", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 2*n })
	got := h.rec.deliveries()
	checkDelivered(t, got, counters)
	checkLineage(t, got, map[string][]string{kids[0]: {"shardId-000000000000"}, kids[1]: {"shardId-000000000000"}})
}

// TestSubscriptionBackPressure: while a batch is being invoked, the subscription stops taking
// events: Kinesis (the fake) cannot push more than a few events ahead of the handler.
func TestSubscriptionBackPressure(t *testing.T) {
	h, _ := newEFOHarness(t, 1)
	h.cfg.BatchSize = 1
	h.rec.block, h.rec.started = make(chan struct{}), make(chan struct{}, 100)
	counters := map[string]int{}
	h.start()
	h.put(1, 1, counters)
	<-h.rec.started // the first batch is in flight and blocked
	before := h.fake.Calls(fakekinesis.OpSubscribeToShardEvent)
	h.putPaced(1, 40, 5*time.Millisecond, counters) // 40 records, each its own event if pushed
	time.Sleep(100 * time.Millisecond)              // give an unbounded buffer time to fill
	ahead := h.fake.Calls(fakekinesis.OpSubscribeToShardEvent) - before
	// One event each in: the pump's channel, the pump's hand, the SDK's two decoding goroutines, and
	// the fake's blocked write. An unbounded buffer would let all 40 through.
	if ahead > 8 {
		t.Fatalf("%d events pushed while the handler was blocked: the subscription buffers without bound", ahead)
	}
	close(h.rec.block)
	testkit.WaitFor(t, "41 records", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 41 })
	checkDelivered(t, h.rec.deliveries(), counters)
	t.Logf("%d events pushed ahead of a blocked handler", ahead)
}

// TestConsumerARNNeedsSubscribeAPI: a client without SubscribeToShard cannot read a consumer.
func TestConsumerARNNeedsSubscribeAPI(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	consumer := f.RegisterConsumer("s", "c")
	var polling struct{ kinesissrc.API }
	polling.API = f
	if _, err := kinesissrc.New(polling, consumer); err == nil {
		t.Fatal("a client without SubscribeToShard was accepted for a consumer ARN")
	}
	p, err := New(kinesisSource(f, consumer), Config{StartingPosition: Latest}, NewMemoryStore(), &countingInvoker{})
	if err != nil || p.id.ARN != arn || p.efo == nil || p.efo.consumer != consumer {
		t.Fatalf("consumer ARN as the source: %v %+v", err, p)
	}
}

// TestSubscriptionWithSlotsAndFilters: the rest of the pipeline is unchanged under enhanced
// fan-out: with ParallelizationFactor 4 per-key order and lineage hold across a split, and
// FilterCriteria drop the records they do not match.
func TestSubscriptionWithSlotsAndFilters(t *testing.T) {
	t.Run("pf=4 across a split", func(t *testing.T) {
		h, _ := newEFOHarness(t, 1)
		h.cfg.BatchSize, h.cfg.ParallelizationFactor = 5, 4
		splitWhileReading(t, h, 20, 200)
		if n := h.fake.Calls(fakekinesis.OpGetRecords); n != 0 {
			t.Fatalf("%d GetRecords calls", n)
		}
	})
	t.Run("filters", func(t *testing.T) {
		h, _ := newEFOHarness(t, 1)
		h.cfg.FilterPatterns = []string{`{"partitionKey":["key-1"]}`}
		all := map[string]int{}
		h.put(4, 100, all)
		h.start()
		testkit.WaitFor(t, "key-1's 25 records", 5*time.Second, func() bool { return len(h.rec.deliveries()) >= 25 })
		_, last := h.fake.Put("s", "key-2", []byte("unmatched tail"))
		testkit.WaitFor(t, "the checkpoint past the filtered tail", 5*time.Second, func() bool {
			p, _ := h.store.Load(context.Background())
			return p["shardId-000000000000"].Checkpoint == last
		})
		checkDelivered(t, h.rec.deliveries(), map[string]int{"key-1": all["key-1"]})
	})
}

// TestSubscriptionsHandedOverBetweenWorkers: leases move shards between workers reading through
// one consumer; the new owner's subscription is refused while the old one is in use, backs off,
// and nothing is lost or repeated.
func TestSubscriptionsHandedOverBetweenWorkers(t *testing.T) {
	f := fakekinesis.New(fakekinesis.WithSubscriptionTiming(0, 300*time.Millisecond))
	arn := f.CreateStream("s", 4)
	consumer := f.RegisterConsumer("s", "esm")
	_ = arn
	workersShare(t, f, consumer) // the consumer's ARN as the source's: read through it
	if n := f.Calls(fakekinesis.OpGetRecords); n != 0 {
		t.Fatalf("%d GetRecords calls", n)
	}
	if n := f.Calls(fakekinesis.OpSubscribeToShard); n < 4+2+2 {
		t.Fatalf("%d subscriptions: the hand-overs did not resubscribe", n)
	}
}

// answers records the fake's SubscribeToShard answers with their bodies, as a client option
// (WithSubscribeOptions: before esm's getrecords.Take, which takes an HTTP/2 answer's body and
// leaves the SDK another). http1 makes the answers say HTTP/1.1, so the SDK keeps the stream.
type answers struct {
	http1  bool
	mu     sync.Mutex
	resps  []*http.Response
	bodies []io.ReadCloser
}

func (a *answers) option(o *kinesis.Options) {
	next := o.HTTPClient
	o.HTTPClient = httpClientFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.Do(req)
		if resp != nil {
			if a.http1 {
				resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
			}
			a.mu.Lock()
			a.resps, a.bodies = append(a.resps, resp), append(a.bodies, resp.Body)
			a.mu.Unlock()
		}
		return resp, err
	})
}

// taken counts the answers whose body the pump took (the SDK got another) and those left to it.
func (a *answers) taken() (taken, left int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, resp := range a.resps {
		if resp.StatusCode != http.StatusOK {
			continue
		}
		if resp.Body != a.bodies[i] {
			taken++
		} else {
			left++
		}
	}
	return taken, left
}

type httpClientFunc func(*http.Request) (*http.Response, error)

func (f httpClientFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

// sdkSubscriber reads with the fake but subscribes through one shared *kinesis.Client.
type sdkSubscriber struct {
	*fakekinesis.Fake
	client *kinesis.Client
}

func (s sdkSubscriber) SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
	return s.client.SubscribeToShard(ctx, in, optFns...)
}

// TestConcurrentSubscriptionsOfOneClient: four shards subscribed at once through one SDK client.
// smithy-go's JSON protocol decodes event streams with state kept in the client's protocol value;
// without a protocol per subscription the race detector flags the shared decode buffer here.
func TestConcurrentSubscriptionsOfOneClient(t *testing.T) {
	h, _ := newEFOHarness(t, 4)
	h.kin = sdkSubscriber{Fake: h.fake, client: h.fake.SubscribeClient()}
	counters := map[string]int{}
	h.start()
	h.putPaced(20, 200, time.Millisecond, counters)
	testkit.WaitFor(t, "all 200 records", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 200 })
	checkDelivered(t, h.rec.deliveries(), counters)
}

// TestSubscriptionFailureRules: Lambda's failure rules hold for records that arrived through a
// subscription: a partial batch response retries the suffix from the failed record (the same
// invocations as polling), and the record that exhausts its retries goes to the destination.
func TestSubscriptionFailureRules(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 1)
	seqs := putN(f, 6, func(i int) string { return strconv.Itoa(i + 1) })
	h := &scripted{decide: func(_ int, e events.KinesisEvent) (json.RawMessage, error) {
		for _, r := range e.Records {
			if string(r.Kinesis.Data) == "6" {
				return json.RawMessage(`{"batchItemFailures":[{"itemIdentifier":"` + r.Kinesis.SequenceNumber + `"}]}`), nil
			}
		}
		return nil, nil
	}}
	cfg := Config{BatchSize: 3, MaximumRetryAttempts: intp(3), ReportBatchItemFailures: true}
	fh := startFailureHarness(t, cfg, f, f.RegisterConsumer("s", "esm"), h) // the consumer's ARN as the source's
	testkit.WaitFor(t, "checkpoint past record 6", 5*time.Second, func() bool {
		p, _ := fh.store.Load(context.Background())
		return p["shardId-000000000000"].Checkpoint == seqs[5]
	})
	if d := fh.dest.records(); len(d) != 1 || d[0].StartSequenceNumber != seqs[5] || d[0].ApproximateInvokeCount != 4 {
		t.Fatalf("destination records %+v", d)
	}
	if got, want := fmt.Sprint(h.invocations()), "[[1 2 3] [4 5 6] [6] [6] [6] [6]]"; got != want {
		t.Fatalf("invocations %s, want %s", got, want)
	}
	if n := f.Calls(fakekinesis.OpGetRecords); n != 0 || f.Calls(fakekinesis.OpSubscribeToShard) == 0 {
		t.Fatalf("%d GetRecords calls, %d subscriptions", n, f.Calls(fakekinesis.OpSubscribeToShard))
	}
}

// TestStaleCaughtUpEventKeepsWindowOpen: an event that says "caught up" but was made before the
// window's last records arrived (a connection that held it: here the fake holds it until after the
// window's end) must not close the window: it is closed once, after all its records.
func TestStaleCaughtUpEventKeepsWindowOpen(t *testing.T) {
	h, _ := newEFOHarness(t, 1)
	const window = 3 * time.Second
	h.cfg.TumblingWindow = window
	sums := &windowSums{totals: map[string]map[string]int{}}
	var mu sync.Mutex
	finals := map[string]int{} // window start → final invocations
	inv := inprocess.New(func(ctx context.Context, e events.KinesisTimeWindowEvent) (events.KinesisTimeWindowEventResponse, error) {
		if e.IsFinalInvokeForWindow {
			mu.Lock()
			finals[e.Window.Start.UTC().Format(time.RFC3339)]++
			mu.Unlock()
		}
		return sums.handle(ctx, e)
	})
	var hold atomic.Bool
	held, release := make(chan struct{}, 1), make(chan struct{})
	h.fake.Inject(func(op string, in any) error {
		if op == fakekinesis.OpSubscribeToShardEvent && hold.CompareAndSwap(true, false) {
			held <- struct{}{}
			<-release
		}
		return nil
	})
	h.startInvoking(inv)

	// Both records in one window: the first early in it, the second a heartbeat (1 s) later.
	testkit.WaitFor(t, "the start of a window", 2*window, func() bool { return time.Since(time.Now().Truncate(window)) < 300*time.Millisecond })
	start := time.Now().Truncate(window)
	_, first := h.fake.Put("s", "k", []byte("1"))
	testkit.WaitFor(t, "the first record's checkpoint", 5*time.Second, func() bool {
		pr, _ := h.store.Load(context.Background())
		return pr["shardId-000000000000"].Checkpoint == first || pr["shardId-000000000000"].Window != nil
	})
	hold.Store(true)
	<-held // the next event (caught up: nothing new) is made, and held back
	h.fake.Put("s", "k", []byte("2"))
	if time.Now().Truncate(window) != start {
		t.Fatal("the second record missed the first one's window: the machine is too slow for this test")
	}
	testkit.WaitFor(t, "the window's end and a poll", 2*window, func() bool { return time.Now().After(start.Add(window + 100*time.Millisecond)) })
	close(release) // the stale event arrives after the window's end, before the record
	testkit.WaitFor(t, "the window closed with both records, or twice", 10*time.Second, func() bool {
		sums.mu.Lock()
		defer sums.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		return sums.totals[start.UTC().Format(time.RFC3339)]["k"] == 3 || finals[start.UTC().Format(time.RFC3339)] > 1
	})
	mu.Lock()
	defer mu.Unlock()
	for w, n := range finals {
		if n != 1 {
			t.Fatalf("window %s closed %d times: it was closed before its records were handled (finals %v)", w, n, finals)
		}
	}
}

// readCounter counts the reads the readers make (RecordsPolled is called once a read).
type readCounter struct {
	NopObserver
	reads atomic.Int64
}

func (c *readCounter) RecordsPolled(string, int) { c.reads.Add(1) }

// TestIdleSubscriptionPacedByPollInterval: a subscribed reader with nothing in hand and a reason
// to keep time (here an open tumbling window, so it does not park) waits for the pump's next event
// or a poll interval, not MinPollSpacing: waking sooner fetches nothing, as the pump hands events
// over as they come. Kinesis sends an idle subscription an event every few seconds, so a reader
// that took MinPollSpacing after each empty hand-over woke several times an event.
func TestIdleSubscriptionPacedByPollInterval(t *testing.T) {
	const heartbeat, window = 400 * time.Millisecond, 2 * time.Second
	h, _ := newEFOHarness(t, 1, fakekinesis.WithSubscriptionHeartbeat(heartbeat))
	h.cfg.PollInterval, h.cfg.MinPollSpacing = 100*time.Millisecond, 5*time.Millisecond
	h.cfg.TumblingWindow = 15 * time.Minute // open for the whole test once the record came
	sums := &windowSums{totals: map[string]map[string]int{}}
	reads := &readCounter{}
	h.startInvoking(inprocess.New(sums.handle), WithObserver(reads))
	h.fake.Put("s", "k", []byte("1"))
	testkit.WaitFor(t, "the record", 5*time.Second, func() bool {
		sums.mu.Lock()
		defer sums.mu.Unlock()
		return sums.invokes > 0
	})
	events0, reads0 := h.fake.Calls(fakekinesis.OpSubscribeToShardEvent), reads.reads.Load()
	time.Sleep(window) // a span of idle time, measured: nothing to await
	events, n := h.fake.Calls(fakekinesis.OpSubscribeToShardEvent)-events0, reads.reads.Load()-reads0
	if events < 3 {
		t.Fatalf("%d events in %s with a heartbeat of %s", events, window, heartbeat)
	}
	// At most one read a poll interval and one an event, with room for timing: MinPollSpacing
	// pacing makes hundreds.
	if limit := int64(window/h.cfg.PollInterval) + int64(events) + 5; n > limit {
		t.Fatalf("%d reads in %s (%d events, poll interval %s): want at most %d", n, window, events, h.cfg.PollInterval, limit)
	}
	if n < int64(events) {
		t.Fatalf("%d reads for %d events: the reader parked, or events were kept from it", n, events)
	}
}

// TestRenewalWhileTheReaderIsBusy: the renewal comes while the pump waits to hand an event to a
// reader that is invoking. The event still reaches the reader (the renewal ends the stream, not
// the hand-over), so the records it carries, which the renewal's position starts after, are not
// lost. Under synctest: the pump's wait and the renewal are put in that order.
func TestRenewalWhileTheReaderIsBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const renew = time.Second
		h, subs := newEFOHarness(t, 1)
		h.opts = []Option{withEFOTimings(renew, 5*time.Millisecond)}
		h.cfg.BatchSize, h.cfg.PollInterval = 1, 100*time.Millisecond
		h.rec.block, h.rec.started = make(chan struct{}), make(chan struct{}, 10)
		counters := map[string]int{}
		h.start()
		h.put(1, 1, counters)
		<-h.rec.started // the first record's invocation runs, and waits
		h.put(1, 1, counters)
		synctest.Wait() // its event is in the reader's channel
		h.put(1, 1, counters)
		synctest.Wait() // the pump waits to hand this one over
		calls, _ := subs.count()
		time.Sleep(2 * renew) // the renewal comes meanwhile (virtual time)
		synctest.Wait()
		if again, _ := subs.count(); again != calls {
			t.Fatalf("%d subscriptions while the pump waited to hand an event over, want %d: the renewal dropped the hand-over", again, calls)
		}
		close(h.rec.block)
		testkit.WaitFor(t, "all 3 records", time.Minute, func() bool { return len(h.rec.deliveries()) >= 3 })
		checkDelivered(t, h.rec.deliveries(), counters)
		h.stop()
	})
}
