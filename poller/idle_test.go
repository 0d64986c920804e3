package poller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

// startingKinesis is a fake with StartGetRecords, as the lean path's client has: each call is
// answered on a goroutine of the fake's (the connection's read loop of the lean path), or, with
// hold set, kept until release.
type startingKinesis struct {
	*fakekinesis.Fake
	arn    string
	hold   atomic.Bool
	starts atomic.Int64
	wg     sync.WaitGroup

	mu   sync.Mutex
	held []func()
}

func newStartingKinesis(shards int) *startingKinesis {
	f := fakekinesis.New()
	return &startingKinesis{Fake: f, arn: f.CreateStream("s", shards)}
}

func (k *startingKinesis) StartGetRecords(ctx context.Context, in *kinesis.GetRecordsInput, done func(*kinesis.GetRecordsOutput, func() (*kinesis.GetRecordsOutput, error))) bool {
	k.starts.Add(1)
	answer := func() {
		defer k.wg.Done()
		out, err := k.Fake.GetRecords(context.WithoutCancel(ctx), in)
		if err != nil {
			done(nil, func() (*kinesis.GetRecordsOutput, error) { return nil, err })
			return
		}
		done(out, nil)
	}
	k.wg.Add(1)
	if k.hold.Load() {
		k.mu.Lock()
		k.held = append(k.held, answer)
		k.mu.Unlock()
		return true
	}
	go answer()
	return true
}

// release answers the calls held so far.
func (k *startingKinesis) release() int {
	k.mu.Lock()
	held := k.held
	k.held = nil
	k.mu.Unlock()
	for _, a := range held {
		go a()
	}
	return len(held)
}

// TestIdlePollsWakeNoReader: the polls of idle shards go through the client's StartGetRecords and
// their answers are taken where they arrive: in 10 s of three idle shards, about 30 polls and no
// reader woken. A record put then wakes its reader, which invokes the function with it.
func TestIdlePollsWakeNoReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newStartingKinesis(3)
		var invoked atomic.Int64
		p, err := New(kinesisSource(k, k.arn), Config{StartingPosition: TrimHorizon, ShardSyncInterval: time.Hour}, NewMemoryStore(),
			inprocess.New(func() error { invoked.Add(1); return nil }))
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		starts, taken, wakes := k.starts.Load(), p.idle.taken.Load(), p.idle.wakes.Load()
		if starts < 27 || taken != starts || wakes != 0 {
			t.Fatalf("in 10 s of 3 idle shards: %d calls started, %d answers taken where they arrived, %d readers woken; want about 30, all, none",
				starts, taken, wakes)
		}
		k.Put("s", "key", []byte("r"))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if invoked.Load() != 1 || p.idle.wakes.Load() == 0 {
			t.Fatalf("after a record was put: %d invocations, %d readers woken; want 1 and some", invoked.Load(), p.idle.wakes.Load())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		k.wg.Wait()
	})
}

// TestIdlePollStoppedInFlight: a stop while every shard's idle poll is in flight (its answer held)
// ends Run at once; the answers that come afterwards are dropped, and no call starts after Run
// returned.
func TestIdlePollStoppedInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newStartingKinesis(2)
		k.hold.Store(true)
		p, err := New(kinesisSource(k, k.arn), Config{StartingPosition: TrimHorizon, ShardSyncInterval: time.Hour}, NewMemoryStore(),
			inprocess.New(func() error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		k.mu.Lock()
		inFlight := len(k.held)
		k.mu.Unlock()
		if inFlight != 2 {
			t.Fatalf("%d idle polls in flight, want one for each of the 2 shards", inFlight)
		}
		cancel()
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("Run waits for the idle polls in flight")
		}
		starts, taken := k.starts.Load(), p.idle.taken.Load()
		if n := k.release(); n != 2 {
			t.Fatalf("%d answers released, want 2", n)
		}
		k.wg.Wait()
		if k.starts.Load() != starts || p.idle.taken.Load() != taken || p.idle.wakes.Load() != 0 {
			t.Fatalf("after the stop: %d calls started, %d answers taken, %d readers woken; want none",
				k.starts.Load()-starts, p.idle.taken.Load()-taken, p.idle.wakes.Load())
		}
	})
}

// TestIdlePollStoppedInFlightCountsWhatItRead: records an idle poll in flight read after its
// reader stopped are dropped, but they were read from the stream: the observer counts them as
// polled (PolledEventCount), as the stream's own count of records served does. They were not
// counted (make sim LEASES=1 SEED=400: about one run in ten short by one read).
func TestIdlePollStoppedInFlightCountsWhatItRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newStartingKinesis(2)
		k.hold.Store(true)
		obs := &counting{states: map[string]string{}}
		p, err := New(kinesisSource(k, k.arn), Config{StartingPosition: TrimHorizon, ShardSyncInterval: time.Hour}, NewMemoryStore(),
			inprocess.New(func() error { return nil }), WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		for i := range 5 {
			k.Put("s", fmt.Sprint("key-", i), []byte("x")) // read by the polls in flight
		}
		cancel()
		synctest.Wait()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := k.release(); n != 2 {
			t.Fatalf("%d answers released, want 2", n)
		}
		k.wg.Wait()
		if got := obs.snapshot().polled; got != 5 {
			t.Fatalf("observer counted %d records polled, want the 5 the polls in flight read", got)
		}
	})
}

// heldUntil is a Coordinator that holds every shard until lost is set.
type heldUntil struct{ lost atomic.Bool }

func (*heldUntil) Register(context.Context, []ShardInfo) error           { return nil }
func (*heldUntil) Claim(_ context.Context, c []string) ([]string, error) { return c, nil }
func (h *heldUntil) Held(string) bool                                    { return !h.lost.Load() }
func (*heldUntil) Release(context.Context, string) error                 { return nil }

// TestIdlePollLeaseLost: once the lease is no longer held, the idle poller starts no call for the
// shard: the lease is asked before each poll, as read asks it.
func TestIdlePollLeaseLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newStartingKinesis(1)
		coord := &heldUntil{}
		p, err := New(kinesisSource(k, k.arn), Config{StartingPosition: TrimHorizon, ShardSyncInterval: time.Hour}, NewMemoryStore(),
			inprocess.New(func() error { return nil }), WithCoordinator(coord))
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		before := k.starts.Load()
		if before < 3 {
			t.Fatalf("%d idle polls in 5 s, want about 4", before)
		}
		coord.lost.Store(true)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := k.starts.Load() - before; n > 0 {
			t.Fatalf("%d calls started after the lease was lost", n)
		}
		if p.idle.wakes.Load() == 0 {
			t.Fatal("no reader was woken with the lease lost")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		k.wg.Wait()
	})
}

// batchingKinesis is a startingKinesis whose calls can be batched (callBatcher), recording the
// batches' sizes and the calls started outside a batch.
type batchingKinesis struct {
	*startingKinesis

	mu      sync.Mutex
	open    int   // batches open
	size    int   // calls started in the batch open
	sizes   []int // of the batches sent
	outside int   // calls started with no batch open
}

func (k *batchingKinesis) Batch() func() {
	k.mu.Lock()
	k.open++
	k.size = 0
	k.mu.Unlock()
	return func() {
		k.mu.Lock()
		k.open--
		k.sizes = append(k.sizes, k.size)
		k.mu.Unlock()
	}
}

func (k *batchingKinesis) StartGetRecords(ctx context.Context, in *kinesis.GetRecordsInput, done func(*kinesis.GetRecordsOutput, func() (*kinesis.GetRecordsOutput, error))) bool {
	k.mu.Lock()
	if k.open == 0 {
		k.outside++
	}
	k.size++
	k.mu.Unlock()
	return k.startingKinesis.StartGetRecords(ctx, in, done)
}

// TestIdlePollsBatched: the idle poller starts the calls that fall due together in batches of the
// client's (callBatcher) of at most idleBatch calls: 130 idle shards polled on the same grid points
// make batches of 64, 64 and 2, and no call starts outside a batch.
func TestIdlePollsBatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 2*idleBatch + 2
		k := &batchingKinesis{startingKinesis: newStartingKinesis(shards)}
		p, err := New(kinesisSource(k, k.arn), Config{StartingPosition: TrimHorizon, ShardSyncInterval: time.Hour}, NewMemoryStore(),
			inprocess.New(func() error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		k.wg.Wait()
		k.mu.Lock()
		defer k.mu.Unlock()
		full, total := 0, 0
		for _, n := range k.sizes {
			if n > idleBatch {
				t.Fatalf("a batch of %d calls, want at most %d", n, idleBatch)
			}
			if n == idleBatch {
				full++
			}
			total += n
		}
		if starts := int(k.starts.Load()); starts < 3*shards || total != starts || k.outside != 0 || full < 6 {
			t.Fatalf("%d calls started, %d of them in %d batches (%d full), %d outside a batch; want at least %d, all in batches, 2 full ones a poll",
				starts, total, len(k.sizes), full, k.outside, 3*shards)
		}
	})
}

// TestIdlePollCallers: the idle polls of a client that starts no call itself (here the fake,
// without StartGetRecords) are made on callers kept from one poll to the next: 3 idle shards
// polled about 30 times in 10 s need no more callers than calls at once (3). A caller left
// without calls for callerIdle ends, and Run's stop ends the others.
func TestIdlePollCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 3)
		var polls atomic.Int64
		kin := &countingKinesis{Fake: f, polls: &polls}
		p, err := New(kinesisSource(kin, arn), Config{StartingPosition: TrimHorizon, ShardSyncInterval: time.Hour}, NewMemoryStore(),
			inprocess.New(func() error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		calls, callers, taken := polls.Load(), p.idle.callers.Load(), p.idle.taken.Load()
		if taken < 27 || callers > 3 || callers == 0 {
			t.Fatalf("in 10 s of 3 idle shards: %d calls, %d idle answers taken, on %d callers; want about 30, on at most 3", calls, taken, callers)
		}
		// A caller without calls for callerIdle ends (one of an idle poller of the test's own).
		d := newIdlePolls(kinesisSource(kin, arn))
		ran := make(chan struct{})
		d.call(func() { close(ran) })
		<-ran
		synctest.Wait()
		if d.live.Load() != 1 {
			t.Fatalf("%d callers after a call, want 1 waiting for the next", d.live.Load())
		}
		time.Sleep(callerIdle + time.Second)
		synctest.Wait()
		if d.live.Load() != 0 {
			t.Fatalf("%d callers after %s without calls, want none", d.live.Load(), callerIdle)
		}
		d.stop()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := p.idle.live.Load(); n != 0 {
			t.Fatalf("%d callers left after Run returned", n)
		}
	})
}

// countingKinesis is the fake, counting its GetRecords calls.
type countingKinesis struct {
	*fakekinesis.Fake
	polls *atomic.Int64
}

func (k *countingKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	k.polls.Add(1)
	return k.Fake.GetRecords(ctx, in, optFns...)
}
