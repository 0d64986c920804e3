package lease

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
)

// The horizon's tests run two workers on the in-memory DynamoDB in virtual time, with the
// issue's settings: L = 10 s, a function timeout of 60 s out of process (B = 70 s).
const (
	hzLease = 10 * time.Second
	hzBound = 70 * time.Second
	hzCycle = time.Second // the claim interval at L = 10 s
)

// hzTable is a lease table of the in-memory DynamoDB.
func hzTable(t *testing.T) *fakedynamo.DB {
	t.Helper()
	db := fakedynamo.New()
	if err := EnsureTable(context.Background(), db, "leases", true); err != nil {
		t.Fatal(err)
	}
	return db
}

// hzWorker starts worker id on the table through api (which the test may cut), driven as the
// poller would drive it.
func hzWorker(t *testing.T, api DynamoAPI, id string, ids []string) (*Dynamo, func()) {
	t.Helper()
	d, err := NewDynamo(api, "leases", id, WithLeaseDuration(hzLease), WithFunctionTimeout(hzBound))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Register(context.Background(), infos(ids)); err != nil {
		t.Fatal(err)
	}
	d.GateInvocations() // as the poller does
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = d.Run(ctx) })
	wg.Go(func() { pollerLoop(ctx, d, ids) })
	once := sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(once)
	return d, once
}

// pollerLoop drives d as the poller does: a claim cycle every claim interval, and the release
// of every shard a cycle leaves out (a hand-over).
func pollerLoop(ctx context.Context, d *Dynamo, ids []string) {
	tk := time.NewTicker(d.ClaimInterval())
	defer tk.Stop()
	var held []string
	for {
		if _, err := d.Load(ctx); err == nil {
			if now, err := d.Claim(ctx, ids); err == nil {
				for _, id := range held {
					if !slices.Contains(now, id) {
						_ = d.Release(ctx, id)
					}
				}
				held = now
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// holding are the shards d holds now.
func holding(d *Dynamo) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return sortedKeys(d.heldShardsLocked())
}

// lastBeat is when d's last successful heartbeat was sent.
func lastBeat(d *Dynamo) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.me.lastBeat
}

// awaitVirtual waits (in virtual time, a claim interval at a time) until cond holds, for at
// most limit.
func awaitVirtual(t *testing.T, what string, limit time.Duration, cond func() bool) time.Time {
	t.Helper()
	for end := time.Now().Add(limit); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Now()
}

// rosterEntry is worker id's entry as the table holds it now.
func rosterEntry(t *testing.T, db DynamoAPI, id string) (member, bool) {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("leases"), Key: key(rosterKey), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	ms, _, err := decodeRoster(out.Item)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := ms[id]
	return m, ok
}

// twoWorkers starts a (through a cuttable API) and b on four shards and waits until they
// share them.
func twoWorkers(t *testing.T, db *fakedynamo.DB) (a, b *Dynamo, cutA *countingAPI, stopA, stopB func()) {
	t.Helper()
	ids := shardIDs(4)
	cutA = &countingAPI{DynamoAPI: db}
	a, stopA = hzWorker(t, cutA, "a", ids)
	awaitVirtual(t, "a to hold every shard", time.Minute, func() bool { return len(holding(a)) == len(ids) })
	b, stopB = hzWorker(t, db, "b", ids)
	awaitVirtual(t, "a and b to share the shards", time.Minute, func() bool {
		return len(holding(a)) > 0 && len(holding(b)) > 0 && len(holding(a))+len(holding(b)) == len(ids)
	})
	return a, b, cutA, stopA, stopB
}

// TestKilledIdleWorkersShardsTakenAfterItsLease: a worker killed with nothing in flight published
// no horizon, and its shards are taken within L + c of its last heartbeat (its stillness counted
// from the read before the one that showed it, the declaration at the next claim cycle, the takes
// in that cycle; DESIGN.md, "The takeover bound"), not L + 2c as when the count started at the
// read that showed it, nor L + 4c + 9/8·B (92.75 s here) as when every death waited for the
// worker's bound.
func TestKilledIdleWorkersShardsTakenAfterItsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, cutA, stopA, stopB := twoWorkers(t, hzTable(t))
		defer stopB()
		time.Sleep(hzLease) // idle for a while
		theirs := holding(a)
		cutA.cut.Store(true) // killed: the table hears nothing more from it
		stopA()
		last := lastBeat(a)
		taken := awaitVirtual(t, "b to take a's shards", 3*time.Minute, func() bool { return len(holding(b)) == 4 })
		bound := hzLease + hzCycle
		t.Logf("a killed idle; its shards %v taken %s after its last heartbeat (bound L + c = %s)", theirs, taken.Sub(last), bound)
		if taken.Sub(last) > bound {
			t.Fatalf("a's shards taken %s after its last heartbeat, want at most %s: nothing of it could still run", taken.Sub(last), bound)
		}
	})
}

// TestKilledBusyWorkerWaitedForUntilItsInvocationsDeadline: a worker killed 2.5 s into an
// invocation is waited for until that invocation's deadline (its start plus B, on its clock,
// and the clock-rate margin), and not much longer: its shards are taken within its last
// horizon (the invocation's deadline, plus at most a heartbeat period and a claim interval of
// future starts it covered) plus three claim intervals after its last heartbeat.
func TestKilledBusyWorkerWaitedForUntilItsInvocationsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, cutA, stopA, stopB := twoWorkers(t, hzTable(t))
		defer stopB()
		time.Sleep(hzLease)
		shard := holding(a)[0]
		started := time.Now()
		tk, ok := a.StartInvocation(context.Background(), shard)
		if !ok {
			t.Fatal("a may not invoke a shard it holds")
		}
		_ = tk // the invocation runs on: a is killed in the middle of it
		time.Sleep(2500 * time.Millisecond)
		cutA.cut.Store(true)
		stopA()
		last := lastBeat(a)
		m, _ := rosterEntry(t, cutA.DynamoAPI, "a")
		taken := awaitVirtual(t, "b to take a's shards", 3*time.Minute, func() bool { return len(holding(b)) == 4 })
		deadline := started.Add(hzBound)
		bound := last.Add(outlastRate(m.horizon) + 3*hzCycle)
		t.Logf("a killed 2.5 s into an invocation (deadline +%s); its last horizon %s; its shards taken at +%s (bound +%s)",
			deadline.Sub(started), m.horizon, taken.Sub(started), bound.Sub(started))
		if taken.Before(deadline) {
			t.Fatalf("a's shards taken %s before the deadline of the invocation it may still run", deadline.Sub(taken))
		}
		if taken.After(bound) {
			t.Fatalf("a's shards taken %s after the bound its horizon gives", taken.Sub(bound))
		}
	})
}

// invSpan is an invocation of one shard, as a test runs it: from its admission to its end.
type invSpan struct {
	worker     string
	start, end time.Time
}

// invokeLoop starts an invocation of shard on d every half second while ctx lasts (a
// ParallelizationFactor's concurrent batches), each running for its whole bound (the worst
// case), and records each.
func invokeLoop(ctx context.Context, d *Dynamo, shard string, mu *sync.Mutex, spans *[]invSpan) {
	var wg sync.WaitGroup
	defer wg.Wait()
	tk := time.NewTicker(500 * time.Millisecond)
	defer tk.Stop()
	for ctx.Err() == nil {
		if t, ok := d.StartInvocation(ctx, shard); ok {
			start := time.Now()
			wg.Go(func() {
				time.Sleep(hzBound)
				t.End(true)
				mu.Lock()
				*spans = append(*spans, invSpan{d.id, start, time.Now()})
				mu.Unlock()
			})
		}
		select {
		case <-ctx.Done():
		case <-tk.C:
		}
	}
}

// TestCutOffWorkerNeverOverlapped: a worker cut off from DynamoDB alone in the middle of an
// invocation runs on; it starts nothing its last horizon does not cover, and the taker's first
// invocation of its shard comes after the last of its invocations ended, each running up to its
// bound. A worker that ignored its horizon (or a taker that did not wait for it) overlapped.
func TestCutOffWorkerNeverOverlapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, cutA, stopA, stopB := twoWorkers(t, hzTable(t))
		defer stopB()
		defer stopA()
		shard := holding(a)[0]
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var spans []invSpan
		var wg sync.WaitGroup
		for _, d := range []*Dynamo{a, b} {
			wg.Go(func() { invokeLoop(ctx, d, shard, &mu, &spans) })
		}
		time.Sleep(hzBound + 3*time.Second) // a's first invocations ended, the others run
		cutA.cut.Store(true)
		awaitVirtual(t, "b to invoke a's shard", 5*time.Minute, func() bool { return slices.Contains(holding(b), shard) })
		time.Sleep(5 * time.Second)
		cancel()
		wg.Wait()
		var aEnd, bStart time.Time
		for _, s := range spans {
			if s.worker == "a" {
				aEnd = later(aEnd, s.end)
			} else if bStart.IsZero() || s.start.Before(bStart) {
				bStart = s.start
			}
		}
		t.Logf("%d invocations, a's last ended at %s; b's first started at %s", len(spans)-1, aEnd.Format("15:04:05.000"), bStart.Format("15:04:05.000"))
		if aEnd.IsZero() || !bStart.After(aEnd) {
			t.Fatalf("b invoked a's shard at %s, while a's invocation ran until %s", bStart.Format("15:04:05.000"), aEnd.Format("15:04:05.000"))
		}
	})
}

// TestIdleToBusyPublishesBeforeSending: an idle worker publishes no horizon; its first
// invocation is admitted only once one heartbeat (one write) published a horizon covering its
// deadline, the next invocations in that heartbeat's window cost no write, and one after the
// window one write.
func TestIdleToBusyPublishesBeforeSending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := hzTable(t)
		api := &countingAPI{DynamoAPI: db}
		ids := shardIDs(2)
		a, stop := hzWorker(t, api, "a", ids)
		defer stop()
		awaitVirtual(t, "a to hold every shard", time.Minute, func() bool { return len(holding(a)) == len(ids) })
		time.Sleep(hzLease)
		if m, _ := rosterEntry(t, db, "a"); m.horizon != 0 {
			t.Fatalf("an idle worker publishes a horizon of %s, want none", m.horizon)
		}
		before := api.calls.Load()
		now := time.Now()
		if _, ok := a.StartInvocation(context.Background(), ids[0]); !ok {
			t.Fatal("a may not invoke a shard it holds")
		}
		m, _ := rosterEntry(t, db, "a")
		if got := lastBeat(a).Add(m.horizon); got.Before(now.Add(hzBound)) {
			t.Fatalf("admitted with a horizon of %s from its last heartbeat: it ends %s before the invocation's deadline", m.horizon, now.Add(hzBound).Sub(got))
		}
		if n := api.calls.Load() - before; n != 1 {
			t.Fatalf("the idle-to-busy start cost %d calls, want one heartbeat", n)
		}
		time.Sleep(a.window() / 2)
		before = api.calls.Load()
		if _, ok := a.StartInvocation(context.Background(), ids[1]); !ok {
			t.Fatal("a may not invoke a shard it holds")
		}
		if n := api.calls.Load() - before; n != 0 {
			t.Fatalf("a start within the published horizon cost %d calls, want none", n)
		}
		time.Sleep(a.window())
		before = api.calls.Load()
		if _, ok := a.StartInvocation(context.Background(), ids[1]); !ok {
			t.Fatal("a may not invoke a shard it holds")
		}
		if n := api.calls.Load() - before; n != 1 {
			t.Fatalf("a start after the window cost %d calls, want one heartbeat", n)
		}
	})
}

// TestUngatedWorkerPublishesItsWholeBound: a worker whose invocations are not all admitted
// through StartInvocation (nobody called GateInvocations: a coordinator wrapper that does not
// pass the poller's gate on) publishes Held's window and its whole bound with every heartbeat,
// so that its takers wait as long as before the horizon, never less.
func TestUngatedWorkerPublishesItsWholeBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := hzTable(t)
		d, stop := startDriven(t, db, "leases", "a", shardIDs(1), WithLeaseDuration(hzLease), WithFunctionTimeout(hzBound))
		defer stop()
		awaitVirtual(t, "a to join", time.Minute, func() bool { _, ok := rosterEntry(t, db, "a"); return ok })
		if m, _ := rosterEntry(t, db, "a"); m.horizon != d.safe+hzBound {
			t.Fatalf("an ungated worker joins with a horizon of %s, want %s (Held's window and B)", m.horizon, d.safe+hzBound)
		}
		time.Sleep(hzLease)
		m, _ := rosterEntry(t, db, "a")
		if want := d.safe + hzBound; m.horizon != want {
			t.Fatalf("an ungated idle worker publishes a horizon of %s, want %s (Held's window and B)", m.horizon, want)
		}
	})
}

// TestBusyWorkerDeclaresTheDeadOnTime: a worker admitting invocations all along writes its entry
// about every half claim interval to publish its horizon, and those writes postpone its regular
// heartbeats; they count as its healthy heartbeats, so it still declares an idle peer dead, and
// takes its shards, within L + c of the peer's last heartbeat. When only the regular heartbeats
// counted, a busy worker never had the two the death rule wants, and a dead peer's shards waited
// until it was idle again.
func TestBusyWorkerDeclaresTheDeadOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, cutA, stopA, stopB := twoWorkers(t, hzTable(t))
		defer stopB()
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var spans []invSpan
		var wg sync.WaitGroup
		wg.Go(func() { invokeLoop(ctx, b, holding(b)[0], &mu, &spans) })
		defer wg.Wait()
		defer cancel()
		time.Sleep(hzLease) // b busy for a while
		b.mu.Lock()
		beatsBefore := b.me.beats
		b.mu.Unlock()
		theirs := holding(a)
		cutA.cut.Store(true) // a killed idle
		stopA()
		last := lastBeat(a)
		taken := awaitVirtual(t, "busy b to take a's shards", 3*time.Minute, func() bool { return len(holding(b)) == 4 })
		b.mu.Lock()
		counted := b.me.beats - beatsBefore
		b.mu.Unlock()
		bound := hzLease + hzCycle
		t.Logf("a killed idle while b invoked all along; its shards %v taken %s after its last heartbeat (bound L + c = %s); b counted %d healthy heartbeats meanwhile",
			theirs, taken.Sub(last), bound, counted)
		if taken.Sub(last) > bound {
			t.Fatalf("a's shards taken %s after its last heartbeat by a busy worker, want at most %s", taken.Sub(last), bound)
		}
	})
}

// TestStoppingBusyWaitingWorkerAnnouncesItsLeave: a worker that stops while an invocation may
// still run (a horizon to set) and a lease placed on it is still held by another (waits to set)
// has nothing to remove from its entry; its heartbeat's update expression must then have no
// REMOVE clause, which DynamoDB refuses empty. It did have one, so a busy worker's leave was
// never announced (every retry wrote the same refused expression) and its peers placed shards
// on it until it was gone.
func TestStoppingBusyWaitingWorkerAnnouncesItsLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := hzTable(t)
		ids := shardIDs(2)
		a, stopA := hzWorker(t, db, "a", ids)
		defer stopA()
		awaitVirtual(t, "a to hold every shard", time.Minute, func() bool { return len(holding(a)) == len(ids) })
		if _, ok := a.StartInvocation(context.Background(), ids[0]); !ok {
			t.Fatal("a may not invoke a shard it holds")
		}
		a.mu.Lock()
		a.shardLocked(ids[1]).waiting = true // as when another live worker holds it
		a.mu.Unlock()
		a.Stopping(context.Background())
		m, ok := rosterEntry(t, db, "a")
		if !ok || !m.leaving || m.horizon == 0 || len(m.waits) == 0 {
			t.Fatalf("a's entry after its leave was announced: %+v (present %t), want leaving with a horizon and waits", m, ok)
		}
	})
}
