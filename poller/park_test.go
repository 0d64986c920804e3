package poller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/source"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// parkRun is a mapping of one shard read through a consumer of f, under synctest: cfg is the
// harness' with PollInterval a second; store and coord may be nil (MemoryStore, none).
type parkRun struct {
	p     *Poller
	rec   *recorder
	reads *readCounter
	done  chan error
}

func startParkRun(t *testing.T, f *fakekinesis.Fake, store Store, coord Coordinator, tune func(*Config)) *parkRun {
	t.Helper()
	cfg := Config{StartingPosition: TrimHorizon, PollInterval: time.Second,
		ShardSyncInterval: time.Hour, ClaimInterval: time.Second}
	if tune != nil {
		tune(&cfg)
	}
	if store == nil {
		store = NewMemoryStore()
	}
	pr := &parkRun{rec: &recorder{}, reads: &readCounter{}, done: make(chan error, 1)}
	opts := []Option{withEFOTimings(subscriptionRenewal, 5*time.Millisecond), WithObserver(pr.reads)}
	if coord != nil {
		opts = append(opts, WithCoordinator(coord))
	}
	p, err := New(kinesisSource(f, f.CreateStream("s", 1), kinesissrc.WithConsumer(f.RegisterConsumer("s", "esm"))), cfg, store, inprocess.New(pr.rec.handle), opts...)
	if err != nil {
		t.Fatal(err)
	}
	p.retryBase, p.retryMax = 10*time.Millisecond, 100*time.Millisecond
	pr.p = p
	ctx, cancel := context.WithCancel(context.Background())
	go func() { pr.done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-pr.done
	})
	return pr
}

// parked is how many readers are parked now.
func (pr *parkRun) parked() int {
	w := pr.p.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.parked)
}

// awaitParked waits (virtual time) until the one reader is subscribed and parked.
func (pr *parkRun) awaitParked(t *testing.T) {
	t.Helper()
	for range 100 {
		synctest.Wait()
		if pr.p.watch != nil && pr.parked() == 1 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the reader never parked")
}

// TestParkedSubscriptionSleepsThroughIdleEvents: an idle subscribed reader is woken by neither its
// poll interval nor its subscription's keep-alive events: parked, it has no window open and
// nothing pending, so an event without records changes nothing it decides, and the pump keeps it.
// A record then wakes it and is delivered. Kinesis sends an idle subscription an event every few
// seconds; a reader that woke for each, and each second besides, made several reads an event.
func TestParkedSubscriptionSleepsThroughIdleEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const heartbeat, span = 5 * time.Second, time.Minute
		f := fakekinesis.New(fakekinesis.WithSubscriptionHeartbeat(heartbeat))
		pr := startParkRun(t, f, nil, nil, nil)
		pr.awaitParked(t)
		events0, reads0, skipped0 := f.Calls(fakekinesis.OpSubscribeToShardEvent), pr.reads.reads.Load(), pr.p.efo.skipped.Load()
		time.Sleep(span)
		synctest.Wait()
		events, reads, skipped := f.Calls(fakekinesis.OpSubscribeToShardEvent)-events0, pr.reads.reads.Load()-reads0, pr.p.efo.skipped.Load()-skipped0
		if min := int(span/heartbeat) - 1; events < min {
			t.Fatalf("%d events in %s with a heartbeat of %s, want at least %d", events, span, heartbeat, min)
		}
		if reads != 0 || skipped != int64(events) {
			t.Fatalf("%d reads and %d events kept from the reader, for %d idle events in %s (poll interval %s): want none and all",
				reads, skipped, events, span, pr.p.cfg.PollInterval)
		}
		if sweeps, every := pr.p.watch.sweeps.Load(), int64(span/pr.p.cfg.PollInterval); sweeps < every-1 || sweeps > every+1 {
			t.Fatalf("%d sweeps of the parked reader in %s, want one a poll interval (%s)", sweeps, span, pr.p.cfg.PollInterval)
		}
		f.Put("s", "k", []byte("k:0"))
		time.Sleep(time.Second)
		synctest.Wait()
		if got := pr.rec.deliveries(); len(got) != 1 || pr.parked() != 1 {
			t.Fatalf("%d deliveries of the record put, %d readers parked after it: want 1 and 1", len(got), pr.parked())
		}
	})
}

// cutOffWorker is a memWorker cut off from its lease table when cut: its claims fail, and Held
// turns false as a real coordinator's does once its leases may have expired.
type cutOffWorker struct {
	*memWorker
	cut atomic.Bool
}

func (w *cutOffWorker) Claim(ctx context.Context, candidates []string) ([]string, error) {
	if w.cut.Load() {
		return nil, errors.New("lease table unreachable")
	}
	return w.memWorker.Claim(ctx, candidates)
}

func (w *cutOffWorker) Held(id string) bool { return !w.cut.Load() && w.memWorker.Held(id) }

// TestParkedSubscriptionStopsOnLostLease: a worker cut off from its lease table stops the reader
// of an idle subscription within a poll interval of Held turning false, though no event comes to
// wake it (and no claim, which fails, stops it): the watch does.
func TestParkedSubscriptionStopsOnLostLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New(fakekinesis.WithSubscriptionHeartbeat(time.Hour))
		w := &cutOffWorker{memWorker: &memWorker{t: newLeaseTable(), id: "A", released: make(chan string, 4)}}
		pr := startParkRun(t, f, w, w, nil)
		pr.awaitParked(t)
		time.Sleep(1500 * time.Millisecond) // off the watch's beat
		w.cut.Store(true)
		cut := time.Now()
		select {
		case id := <-w.released:
			if id != "shardId-000000000000" {
				t.Fatalf("released %s", id)
			}
		case <-time.After(time.Hour):
			t.Fatal("the parked reader of a lost lease never stopped")
		}
		if took, most := time.Since(cut), pr.p.cfg.PollInterval; took > most {
			t.Fatalf("the reader stopped %s after its lease was lost, want within a poll interval (%s)", took, most)
		}
		if pr.p.watch.woken.Load() == 0 {
			t.Fatal("the watch woke no reader: something else stopped it")
		}
	})
}

// TestParkedSubscriptionOfClosedShard: a shard whose subscription never says it ended (an
// emulator's) is read to its end with GetRecords once ListShards shows it closed, though its
// reader is parked on a silent subscription: the watch wakes it. Its children are then read.
func TestParkedSubscriptionOfClosedShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New(fakekinesis.WithSubscriptionHeartbeat(time.Hour))
		f.Inject(func(op string, in any) error {
			if se, ok := in.(*fakekinesis.SubscriptionEvent); ok && op == fakekinesis.OpSubscribeToShardEvent && se.Event.ChildShards != nil {
				return fakekinesis.ErrDropped // the end never reaches the subscriber
			}
			return nil
		})
		pr := startParkRun(t, f, nil, nil, func(c *Config) { c.ShardSyncInterval = 2 * time.Second })
		pr.awaitParked(t)
		f.Split("s", "shardId-000000000000")
		counters := map[string]int{}
		(&harness{fake: f}).put(10, 20, counters)
		deadline := time.Now().Add(time.Hour)
		for len(pr.rec.deliveries()) < 20 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		checkDelivered(t, pr.rec.deliveries(), counters)
		if f.Calls(fakekinesis.OpGetRecords) == 0 || pr.p.watch.woken.Load() == 0 {
			t.Fatalf("%d GetRecords calls, %d readers woken by the watch: the closed shard was not drained by a woken reader",
				f.Calls(fakekinesis.OpGetRecords), pr.p.watch.woken.Load())
		}
	})
}

// failingSaves is a MemoryStore whose saves fail once fail is set.
type failingSaves struct {
	*MemoryStore
	fail atomic.Bool
}

var errSaveDown = errors.New("store down")

func (s *failingSaves) Save(ctx context.Context, updates map[string]ShardProgress) error {
	if s.fail.Load() {
		return errSaveDown
	}
	return s.MemoryStore.Save(ctx, updates)
}

// TestParkedReaderOfFailedSlot: with ParallelizationFactor above 1, a batch whose checkpoint
// keeps failing fails its slot after the reader handed the batch over and parked; the watch wakes
// the reader, and the mapping stops with the store's error.
func TestParkedReaderOfFailedSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New(fakekinesis.WithSubscriptionHeartbeat(time.Hour))
		store := &failingSaves{MemoryStore: NewMemoryStore()}
		pr := startParkRun(t, f, store, nil, func(c *Config) { c.ParallelizationFactor = 2 })
		pr.awaitParked(t)
		store.fail.Store(true)
		f.Put("s", "k", []byte("k:0"))
		put := time.Now()
		select {
		case err := <-pr.done:
			pr.done <- err // for the cleanup
			if !errors.Is(err, errSaveDown) {
				t.Fatalf("Run returned %v, want the store's error", err)
			}
		case <-time.After(time.Hour):
			t.Fatal("the mapping did not stop on its failed slot")
		}
		// The saves' retries take under a second here, and the watch's wake a poll interval at
		// most; the renewal's event (minutes) must not be what stops it.
		if took := time.Since(put); took > 5*time.Second {
			t.Fatalf("the mapping stopped %s after the record came, want within seconds", took)
		}
		if len(pr.rec.deliveries()) != 1 || pr.p.watch.woken.Load() == 0 {
			t.Fatalf("%d deliveries, %d readers woken by the watch", len(pr.rec.deliveries()), pr.p.watch.woken.Load())
		}
	})
}

// TestPumpHandsOverWhileTheParkedReaderHasAnEvent: the pump keeps an idle event from a parked
// reader only when the reader has taken every event sent. One with records still in the channel
// (the reader parked just before it came, or took it and has not yet left park) means the reader
// is about to run: the empty event after it, which may be the only one to say it is caught up, is
// handed over too.
func TestPumpHandsOverWhileTheParkedReaderHasAnEvent(t *testing.T) {
	e := &efo{}
	// Room for two events, so that the pump's choice for the second is made while the first is
	// still in the channel, without a goroutine (the reader's channel holds one).
	s := &subscription{events: make(chan subEvent, 2)}
	m := &pump{e: e, shardID: "shardId-000000000000", events: s.events, obs: nopSubscriptionObserver{}, now: time.Now, parked: &s.parked,
		behindBy: func(time.Duration) {}}
	seq := func(n int) string { return fmt.Sprintf("%021d", n) }
	idle := func(n int) source.Page { return source.Page{Next: seq(n)} }
	ctx := context.Background()

	s.parked.Store(s.received + 1) // parked, nothing sent yet: an idle event is kept
	if handed, _ := m.handOver(ctx, idle(1)); !handed || len(s.events) != 0 || e.skipped.Load() != 1 {
		t.Fatalf("idle event to a parked reader: handed %v, %d in the channel, %d kept; want it kept", handed, len(s.events), e.skipped.Load())
	}
	rec := source.Record{SequenceNumber: seq(2), Data: []byte("x"), PartitionKey: "k"}
	m.handOver(ctx, source.Page{Next: seq(2), MillisBehind: 5000, Records: []source.Record{rec}})
	// The reader is still parked, the record's event not taken: the caught-up event that follows
	// must reach it.
	m.handOver(ctx, idle(3))
	if len(s.events) != 2 || e.skipped.Load() != 1 {
		t.Fatalf("%d events in the channel, %d kept: the caught-up event after the record's was kept from a reader that had not taken the record's", len(s.events), e.skipped.Load())
	}
	s.took(<-s.events)
	s.took(<-s.events)
	s.parked.Store(0)
	if s.cur.behind != 0 || len(s.cur.records) != 0 {
		t.Fatalf("the last event taken: %d records, %d ms behind; want the caught-up one", len(s.cur.records), s.cur.behind)
	}
	s.parked.Store(s.received + 1) // parked again, every event taken: idle events are kept again
	m.handOver(ctx, idle(4))
	if e.skipped.Load() != 2 || len(s.events) != 0 {
		t.Fatalf("%d events kept, %d in the channel, want 2 and 0", e.skipped.Load(), len(s.events))
	}
}

// TestKeptEventMovesTheAge: an idle event the pump keeps from its parked reader still tells the
// shard's iterator age what it says (issue 40: the age of a caught-up shard goes to 0 without
// waking the reader).
func TestKeptEventMovesTheAge(t *testing.T) {
	e := &efo{}
	s := &subscription{events: make(chan subEvent, 1)}
	var told []time.Duration
	m := &pump{e: e, shardID: "shardId-000000000000", events: s.events, obs: nopSubscriptionObserver{}, now: time.Now, parked: &s.parked,
		behindBy: func(d time.Duration) { told = append(told, d) }}
	s.parked.Store(s.received + 1)
	for i, behind := range []int64{700, 0} {
		ev := source.Page{Next: fmt.Sprintf("%021d", i+1), MillisBehind: behind}
		if handed, _ := m.handOver(context.Background(), ev); !handed || len(s.events) != 0 {
			t.Fatalf("idle event %d: handed %v, %d in the channel; want it kept", i, handed, len(s.events))
		}
	}
	if want := []time.Duration{700 * time.Millisecond, 0}; !slices.Equal(told, want) {
		t.Fatalf("the age was told %v by the kept events, want %v", told, want)
	}
}
