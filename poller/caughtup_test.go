package poller

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

// runUntilCaughtUp runs h's mapping with WithUntilCaughtUp(idle) until Run returns on its own
// (the test fails if it has not within limit of virtual time) and returns how long it ran and
// how often Reached was called.
func runUntilCaughtUp(t *testing.T, h *harness, idle, limit time.Duration) (time.Duration, int64) {
	t.Helper()
	var reached atomic.Int64
	cfg := h.cfg
	handle := h.rec.handle
	if h.slow > 0 { // each invocation takes h.slow (virtual time); the first two with seq h.failSeq fail
		var failed atomic.Int64
		handle = func(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
			time.Sleep(h.slow)
			for _, rec := range e.Records {
				if rec.Kinesis.SequenceNumber == h.failSeq && failed.Add(1) <= 2 {
					return events.KinesisEventResponse{}, errors.New("induced failure")
				}
			}
			return h.rec.handle(ctx, e)
		}
	}
	opts := append(h.opts[:len(h.opts):len(h.opts)], WithUntilCaughtUp(UntilCaughtUp{Idle: idle, Reached: func() { reached.Add(1) }}))
	p, err := New(kinesisSource(h.kin, h.arn, h.srcOpts...), cfg, h.store, inprocess.New(handle, inprocess.WithTimeout(10*time.Second)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	p.retryBase, p.retryMax = 100*time.Millisecond, time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("Run returned only when its context ended (%v): never caught up", took)
	}
	return took, reached.Load()
}

// checkCheckpointsAtTips asserts every shard's checkpoint is the last record put to it (and that
// there was one).
func checkCheckpointsAtTips(t *testing.T, h *harness, last map[string]string) {
	t.Helper()
	if len(last) == 0 {
		t.Fatal("no record was put: the test judges nothing")
	}
	got, _ := h.store.Load(context.Background())
	for shard, seq := range last {
		if got[shard].Checkpoint != seq && !got[shard].Finished {
			t.Errorf("shard %s: checkpoint %q, want the last record %q", shard, got[shard].Checkpoint, seq)
		}
	}
}

// putCounted puts n records over keys and returns the last sequence number of each shard.
func putCounted(h *harness, keys, n int, counters map[string]int) map[string]string {
	last := map[string]string{}
	for i := range n {
		k := "key-" + string(rune('a'+i%keys))
		shard, seq := h.fake.Put("s", k, []byte(k+":"+strconv.Itoa(counters[k])))
		counters[k]++
		last[shard] = seq
	}
	return last
}

// TestUntilCaughtUpEndsAtTheTips: 250 records on two shards (more than a batch each), a batch
// failing twice on the way: Run returns on its own once every record was invoked and every
// checkpoint is the shard's last record, with Reached called once, and sooner than one poll
// interval after the last read (no idle pacing before the end).
func TestUntilCaughtUpEndsAtTheTips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 2)
		h.cfg.PollInterval, h.cfg.PollGrid = 5*time.Second, 0
		h.rec.failFirst = 2
		counters := map[string]int{}
		last := putCounted(h, 7, 250, counters)
		took, reached := runUntilCaughtUp(t, h, 0, time.Hour)
		checkDelivered(t, h.rec.deliveries(), counters)
		checkCheckpointsAtTips(t, h, last)
		if reached != 1 {
			t.Errorf("Reached called %d times, want once", reached)
		}
		// Two failures back off 100 ms and 200 ms; the reads of a behind shard are 1 ms apart.
		if took >= h.cfg.PollInterval {
			t.Errorf("Run took %v: the end waited for an idle poll (PollInterval %v)", took, h.cfg.PollInterval)
		}
	})
}

// TestUntilCaughtUpEmptyStream: a stream without records is caught up at its first reads.
func TestUntilCaughtUpEmptyStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 3)
		h.cfg.PollInterval = 5 * time.Second
		took, reached := runUntilCaughtUp(t, h, 0, time.Hour)
		if reached != 1 || took >= h.cfg.PollInterval || len(h.rec.deliveries()) != 0 {
			t.Fatalf("took %v, reached %d, %d deliveries: want at once, once, none", took, reached, len(h.rec.deliveries()))
		}
	})
}

// TestUntilCaughtUpReadsChildren: a shard split (and a merge) before the start with records in
// parents and children: Run ends once the children were read too, in lineage order.
func TestUntilCaughtUpReadsChildren(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 2)
		counters := map[string]int{}
		putCounted(h, 5, 40, counters)
		open := h.fake.OpenShards("s")
		kids := h.fake.Split("s", open[0])
		putCounted(h, 5, 40, counters)
		merged := h.fake.Merge("s", kids[0], kids[1])
		last := putCounted(h, 5, 40, counters)
		runUntilCaughtUp(t, h, 0, time.Hour)
		checkDelivered(t, h.rec.deliveries(), counters)
		checkLineage(t, h.rec.deliveries(), map[string][]string{kids[0]: {open[0]}, kids[1]: {open[0]}, merged: {kids[0], kids[1]}})
		checkCheckpointsAtTips(t, h, last)
	})
}

// TestUntilCaughtUpParallelSlots: with ParallelizationFactor 4 the end waits for the slots'
// batches (50 ms each; the last record's failing twice and retried), dispatched before the read
// that found the shard caught up: a stop then would give up the retries. The end follows the
// last batch at once, not at the next poll.
func TestUntilCaughtUpParallelSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 1)
		h.cfg.ParallelizationFactor, h.cfg.BatchSize = 4, 10
		h.cfg.PollInterval, h.cfg.PollGrid = 5*time.Second, 0
		counters := map[string]int{}
		last := putCounted(h, 9, 300, counters)
		h.slow, h.failSeq = 50*time.Millisecond, last[h.fake.OpenShards("s")[0]]
		took, _ := runUntilCaughtUp(t, h, 0, time.Hour)
		if took >= h.cfg.PollInterval { // the slot that ends the last batch tells, not the next poll
			t.Errorf("Run took %v: the end waited for an idle poll (PollInterval %v)", took, h.cfg.PollInterval)
		}
		if got := len(h.rec.deliveries()); got != 300 {
			t.Fatalf("%d records invoked before the end, want 300", got)
		}
		checkCheckpointsAtTips(t, h, last)
	})
}

// TestUntilCaughtUpIdle: with Idle 3 s, records put 2 s after the start keep the run going; it
// ends once no read returned records for 3 s, with every record invoked, and not before.
func TestUntilCaughtUpIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 2)
		h.cfg.PollInterval, h.cfg.PollGrid = 500*time.Millisecond, 0
		counters := map[string]int{}
		putCounted(h, 5, 30, counters)
		var last map[string]string
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(2 * time.Second)
			last = putCounted(h, 5, 30, counters)
		}()
		took, reached := runUntilCaughtUp(t, h, 3*time.Second, time.Hour)
		<-done
		checkDelivered(t, h.rec.deliveries(), counters)
		checkCheckpointsAtTips(t, h, last)
		// The second records are read within a poll interval of 2 s; then 3 s idle, then the next polls.
		if took < 5*time.Second || took > 5*time.Second+2*h.cfg.PollInterval || reached != 1 {
			t.Fatalf("took %v (reached %d), want 5 s after the start plus at most two poll intervals", took, reached)
		}
	})
}

// TestUntilCaughtUpSubscribed: read through enhanced fan-out subscriptions, 200 records on two
// shards end the run once invoked, sooner than one (5 s) poll interval: a caught-up subscribed
// reader parks, and the end does not wait for it.
func TestUntilCaughtUpSubscribed(t *testing.T) {
	h, _ := newEFOHarness(t, 2)
	h.cfg.PollInterval, h.cfg.BatchSize = 5*time.Second, 10
	counters := map[string]int{}
	h.put(20, 200, counters)
	took, reached := runUntilCaughtUp(t, h, 0, 30*time.Second)
	checkDelivered(t, h.rec.deliveries(), counters)
	if took >= h.cfg.PollInterval || reached != 1 {
		t.Fatalf("took %v (reached %d): want less than a poll interval (%v), once", took, reached, h.cfg.PollInterval)
	}
	if n := h.fake.Calls(fakekinesis.OpGetRecords); n != 0 {
		t.Fatalf("%d GetRecords calls: the shards were to be read through their subscriptions", n)
	}
}

// assigned is a Coordinator that holds a fixed set of shards: one worker's share of a lease table.
type assigned map[string]bool

func (assigned) Register(context.Context, []ShardInfo) error { return nil }
func (a assigned) Claim(_ context.Context, candidates []string) ([]string, error) {
	var held []string
	for _, id := range candidates {
		if a[id] {
			held = append(held, id)
		}
	}
	return held, nil
}
func (a assigned) Held(id string) bool                 { return a[id] }
func (assigned) Release(context.Context, string) error { return nil }

// TestUntilCaughtUpAcrossWorkers: two workers share a store, each reading one shard; the second
// worker's function takes a second per batch of 10 (6 s for its 60 records). The first worker,
// caught up on its own shard at once, ends only once the other shard's checkpoint reached that
// shard's tip (its probes of the shard it does not read), and both end on their own.
func TestUntilCaughtUpAcrossWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := fakekinesis.New()
		arn := k.CreateStream("s", 2)
		shards := k.OpenShards("s")
		last := map[string]string{}
		for i := range 60 {
			for _, id := range shards {
				last[id] = k.PutToShard("s", id, "k", []byte(strconv.Itoa(i)))
			}
		}
		store := NewMemoryStore()
		var invoked atomic.Int64
		var slowDone atomic.Int64 // when the slow worker's last batch ended (UnixNano)
		run := func(shard string, delay time.Duration, ended *time.Time) error {
			inv := inprocess.New(func(ctx context.Context, e events.KinesisEvent) error {
				time.Sleep(delay)
				invoked.Add(int64(len(e.Records)))
				slowDone.Store(time.Now().UnixNano())
				return nil
			})
			cfg := Config{StartingPosition: TrimHorizon, BatchSize: 10, ClaimInterval: 200 * time.Millisecond, ShardSyncInterval: time.Hour}
			p, err := New(kinesisSource(k, arn), cfg, store, inv, WithCoordinator(assigned{shard: true}), WithUntilCaughtUp(UntilCaughtUp{}))
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			err = p.Run(ctx)
			*ended = time.Now()
			if ctx.Err() != nil {
				t.Errorf("worker of %s: never caught up", shard)
			}
			return err
		}
		var fastEnd, slowEnd time.Time
		errs := make(chan error, 2)
		go func() { errs <- run(shards[0], 0, &fastEnd) }()
		go func() { errs <- run(shards[1], time.Second, &slowEnd) }()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if invoked.Load() != 120 {
			t.Fatalf("%d records invoked, want 120", invoked.Load())
		}
		got, _ := store.Load(context.Background())
		for id, seq := range last {
			if got[id].Checkpoint != seq {
				t.Errorf("shard %s: checkpoint %q, want its tip %q", id, got[id].Checkpoint, seq)
			}
		}
		if slow := time.Unix(0, slowDone.Load()); fastEnd.Before(slow) {
			t.Fatalf("the fast worker ended at %v, before the other shard's last batch ended (%v)", fastEnd, slow)
		}
		if fastEnd.Sub(slowEnd) > time.Second || slowEnd.Sub(fastEnd) > time.Second {
			t.Fatalf("the workers ended %v apart: want within a claim interval or so", fastEnd.Sub(slowEnd))
		}
	})
}
