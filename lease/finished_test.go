package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
)

// freezable stands for a worker's process under SIGSTOP: while frozen, each of its calls to
// DynamoDB waits (before it is sent) until the worker thaws. freezeAt freezes it when it sends
// a PutItem of the given shard: a pause between the checks before a create and its write.
type freezable struct {
	DynamoAPI
	mu       sync.Mutex
	frozen   bool
	thawed   chan struct{}
	freezeAt string
	caught   bool // freezeAt's PutItem was held back
}

func newFreezable(api DynamoAPI) *freezable {
	return &freezable{DynamoAPI: api, thawed: make(chan struct{})}
}

func (f *freezable) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
}

func (f *freezable) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		f.frozen = false
		close(f.thawed)
		f.thawed = make(chan struct{})
	}
}

func (f *freezable) isFrozen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen
}

func (f *freezable) caughtPut() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.caught
}

// wait holds a call while the worker is frozen, and returns the context to send it with. A
// frozen process notices none of its own deadlines: a call's deadline that passes during the
// freeze does not stop it, and it is sent once the worker thaws (as a write already on its way
// lands).
func (f *freezable) wait(ctx context.Context, put string) (context.Context, error) {
	f.mu.Lock()
	if put != "" && put == f.freezeAt {
		f.frozen, f.caught, f.freezeAt = true, true, ""
	}
	frozen, thawed := f.frozen, f.thawed
	f.mu.Unlock()
	if !frozen {
		return ctx, nil
	}
	select {
	case <-thawed:
		return ctx, nil
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return ctx, ctx.Err()
		}
	}
	<-thawed
	return context.WithoutCancel(ctx), nil
}

func (f *freezable) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	ctx, err := f.wait(ctx, "")
	if err != nil {
		return nil, err
	}
	return f.DynamoAPI.GetItem(ctx, in, o...)
}

func (f *freezable) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	ctx, err := f.wait(ctx, "")
	if err != nil {
		return nil, err
	}
	return f.DynamoAPI.BatchGetItem(ctx, in, o...)
}

func (f *freezable) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	var id string
	if l, err := decodeLease(in.Item); err == nil {
		id = l.ShardID
	}
	ctx, err := f.wait(ctx, id)
	if err != nil {
		return nil, err
	}
	return f.DynamoAPI.PutItem(ctx, in, o...)
}

func (f *freezable) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	ctx, err := f.wait(ctx, "")
	if err != nil {
		return nil, err
	}
	return f.DynamoAPI.UpdateItem(ctx, in, o...)
}

func (f *freezable) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	ctx, err := f.wait(ctx, "")
	if err != nil {
		return nil, err
	}
	return f.DynamoAPI.DeleteItem(ctx, in, o...)
}

func (f *freezable) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	ctx, err := f.wait(ctx, "")
	if err != nil {
		return nil, err
	}
	return f.DynamoAPI.Scan(ctx, in, o...)
}

// finishedCase is a parent split into two children, the worker to be frozen ("c", placed the
// parent by both workers' placements) and the one that finishes the parent meanwhile.
type finishedCase struct {
	table          string
	parent, k1, k2 string
	cID, wID       string
	cAPI           *freezable
	c, w           *Dynamo
	cLogs, wLogs   *logBuffer
	pc, pw         *pollerDriver
	stopC, stopW   func()
	children       []poller.ShardInfo
}

func newFinishedCase(t *testing.T) *finishedCase {
	t.Helper()
	fc := &finishedCase{table: newTable(t), parent: "shardId-000000000000", k1: "shardId-000000000001", k2: "shardId-000000000002"}
	fc.children = []poller.ShardInfo{{ShardID: fc.k1, Parents: []string{fc.parent}}, {ShardID: fc.k2, Parents: []string{fc.parent}}}
	// c is given the parent by the placement over both members, as an open shard (c's listing
	// without the children) and as a closed one (with them).
	fc.wID = "w"
	for i := 0; fc.cID == ""; i++ {
		id := fmt.Sprintf("c%d", i)
		if assign([]string{fc.parent}, []string{id, fc.wID}).owner[fc.parent] == id {
			fc.cID = id
		}
	}
	fc.cAPI = newFreezable(ddb)
	var err error
	logC, cLogs := testLogger(t)
	if fc.c, err = NewDynamo(fc.cAPI, fc.table, fc.cID, WithLeaseDuration(2*time.Second), WithLogger(logC)); err != nil {
		t.Fatal(err)
	}
	logW, wLogs := testLogger(t)
	if fc.w, err = NewDynamo(ddb, fc.table, fc.wID, WithLeaseDuration(2*time.Second), WithLogger(logW)); err != nil {
		t.Fatal(err)
	}
	fc.cLogs, fc.wLogs = cLogs, wLogs
	return fc
}

// finishAndDelete has w, once c is declared dead, take or create the parent, finish it, create
// and start both children and delete the parent's lease, all while c is frozen.
func (fc *finishedCase) finishAndDelete(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	testkit.WaitFor(t, "c declared dead", 15*time.Second, func() bool { return strings.Contains(fc.wLogs.String(), `msg="worker declared dead"`) })
	testkit.WaitFor(t, "w holds the parent", 15*time.Second, func() bool { return fc.pw.holds(fc.parent) })
	if err := fc.w.Register(ctx, fc.children); err != nil {
		t.Fatal(err)
	}
	if err := fc.w.Save(ctx, map[string]poller.ShardProgress{fc.parent: {Finished: true}}); err != nil {
		t.Fatal(err)
	}
	fc.pw.setCandidates([]string{fc.k1, fc.k2})
	testkit.WaitFor(t, "w holds both children", 15*time.Second, func() bool { return fc.pw.holds(fc.k1) && fc.pw.holds(fc.k2) })
	for _, k := range []string{fc.k1, fc.k2} {
		if err := fc.w.Save(ctx, map[string]poller.ShardProgress{k: {Checkpoint: "49000000000000000000000000000000000000000000000000000001"}}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "the parent's finished lease deleted", 15*time.Second, func() bool {
		_, ok := leasesOf(t, fc.table)[fc.parent]
		return !ok
	})
	if !fc.cAPI.isFrozen() {
		t.Fatal("c thawed before the parent's lease was deleted: the path under test did not run")
	}
	ls := leasesOf(t, fc.table)
	for _, k := range []string{fc.k1, fc.k2} {
		if !started(ls[k]) {
			t.Fatalf("child %s not started before the parent's deletion: %+v", k, ls[k])
		}
	}
}

// thawAndWatch thaws c and lets it run many claim cycles after it joined again, offering the
// parent (c's poller still sees it as a shard to read); the parent must never be leased again.
// c must know it finished unless knows is false (its listing cannot tell it yet).
func (fc *finishedCase) thawAndWatch(t *testing.T, knows bool) {
	t.Helper()
	thawedAt := strings.Count(fc.cLogs.String(), "\n")
	fc.cAPI.thaw()
	fc.pc.resume()
	testkit.WaitFor(t, "c joins again", 15*time.Second, func() bool {
		return strings.Count(fc.cLogs.String(), `msg="joined the lease table's workers"`) >= 2
	})
	from := fc.pc.claimCount()
	// Long enough for a create (the fleet gate: L/3 + a claim interval after the last join).
	testkit.WaitFor(t, "c ran claim cycles since it joined again", 20*time.Second, func() bool { return fc.pc.claimCount() >= from+20 })
	for i, line := range strings.Split(fc.cLogs.String(), "\n") {
		if i >= thawedAt && strings.Contains(line, `msg="lease taken"`) && strings.Contains(line, "shard_id="+fc.parent) {
			t.Errorf("the finished parent's lease was taken again after the thaw: %s", line)
		}
	}
	if l, ok := leasesOf(t, fc.table)[fc.parent]; ok && !l.Finished() {
		t.Errorf("the finished parent has an unfinished lease again: %+v", l)
	}
	if fc.pc.holds(fc.parent) || fc.pw.holds(fc.parent) || fc.c.Held(fc.parent) || fc.w.Held(fc.parent) {
		t.Error("a worker holds the finished parent's lease again")
	}
	if !knows {
		return
	}
	// c knows the parent is finished: its poller will not offer it again.
	pr, err := fc.c.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !pr[fc.parent].Finished {
		t.Errorf("c's Load reports the parent as %+v, want finished", pr[fc.parent])
	}
}

// TestFinishedLeaseNotCreatedAgainByStaleWorker is issue 22's second problem: a worker holding a
// shard is frozen past its lease; meanwhile another finishes the shard, starts both its children
// and deletes its finished lease. The frozen worker resumes, loses its leases, joins again and
// finds the lease absent; its listing is older than the split, so it knows no child. It must
// not create the lease again (it did: "lease taken … reason=created", the parent read again from
// TRIM_HORIZON, 144 records invoked twice).
func TestFinishedLeaseNotCreatedAgainByStaleWorker(t *testing.T) {
	fc := newFinishedCase(t)
	ctx := context.Background()
	// c lists the parent alone (before the split) and reads it.
	if err := fc.c.Register(ctx, infos([]string{fc.parent})); err != nil {
		t.Fatal(err)
	}
	var stop func()
	fc.pc, stop = drivePoller(t, fc.c, []string{fc.parent}, false)
	defer stop()
	testkit.WaitFor(t, "c holds the parent", 15*time.Second, func() bool { return fc.pc.holds(fc.parent) })
	// w joins with the same listing: the parent stays c's.
	if err := fc.w.Register(ctx, infos([]string{fc.parent})); err != nil {
		t.Fatal(err)
	}
	fc.pw, stop = drivePoller(t, fc.w, []string{fc.parent}, false)
	defer stop()
	from := fc.pw.claimCount()
	testkit.WaitFor(t, "w ran claim cycles", 15*time.Second, func() bool { return fc.pw.claimCount() >= from+5 })
	if !fc.pc.holds(fc.parent) {
		t.Fatal("c no longer holds the parent before the freeze")
	}

	fc.cAPI.freeze()
	fc.pc.mu.Lock()
	fc.pc.paused = true
	fc.pc.mu.Unlock()
	fc.finishAndDelete(t)
	fc.thawAndWatch(t, true)
}

// TestFinishedLeaseNotCreatedAgainAfterPausedCreate: a worker whose listing knows the children
// checks them (no item yet) and is frozen just before it writes the parent's new lease.
// Meanwhile another worker creates the parent's lease, finishes it, starts both children and
// deletes it. The frozen worker's write then finds no item and succeeds: the lease exists
// again, and whoever took it would read the parent again from its start. The descendants
// read after the write find the children and record the lease finished.
func TestFinishedLeaseNotCreatedAgainAfterPausedCreate(t *testing.T) {
	fc := newFinishedCase(t)
	ctx := context.Background()
	all := append(infos([]string{fc.parent}), fc.children...)
	for _, d := range []*Dynamo{fc.c, fc.w} {
		if err := d.Register(ctx, all); err != nil {
			t.Fatal(err)
		}
	}
	// c joins first (heartbeats only), so that w never sees the parent placed on itself.
	fc.cAPI.mu.Lock()
	fc.cAPI.freezeAt = fc.parent
	fc.cAPI.mu.Unlock()
	var stop func()
	fc.pc, stop = drivePoller(t, fc.c, []string{fc.parent}, true)
	defer stop()
	testkit.WaitFor(t, "c joins", 10*time.Second, func() bool {
		return strings.Contains(fc.cLogs.String(), `msg="joined the lease table's workers"`)
	})
	fc.pw, stop = drivePoller(t, fc.w, []string{fc.parent}, false)
	defer stop()
	testkit.WaitFor(t, "w ran claim cycles", 15*time.Second, func() bool { return fc.pw.claimCount() >= 3 })
	fc.pc.resume()
	testkit.WaitFor(t, "c frozen as it writes the parent's new lease", 20*time.Second, fc.cAPI.caughtPut)
	if _, ok := leasesOf(t, fc.table)[fc.parent]; ok {
		t.Fatal("the parent has a lease before c's create: the path under test did not run")
	}
	fc.finishAndDelete(t)
	fc.thawAndWatch(t, true)
	if !strings.Contains(fc.cLogs.String(), `msg="lease of a finished shard found again; recorded finished"`) {
		t.Error("c's create went through, and c did not record the lease finished")
	}
}

// TestLeaseCreatedElsewhereIsNotTakenForFinished: an item seen counts as deleted (its shard
// finished) only when a read finds it absent. A worker that read a lease absent, then saw the
// item another worker created through another read (a parent's lineage read), still has the
// lease marked absent and creates it (placed on it, or a child of a shard it held); that
// attempt must find the item, not count the shard finished (sim LEASES=1 seeds 39 and 68: a parent being read counted finished, and its
// children invoked before its last batch).
func TestLeaseCreatedElsewhereIsNotTakenForFinished(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	shard := "shardId-000000000000"
	cID := ""
	for i := 0; cID == ""; i++ {
		if id := fmt.Sprintf("c%d", i); assign([]string{shard}, []string{id, "w"}).owner[shard] == id {
			cID = id
		}
	}
	newWorker := func(id string) *Dynamo {
		log, _ := testLogger(t)
		d, err := NewDynamo(ddb, table, id, WithLeaseDuration(2*time.Second), WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Register(ctx, infos([]string{shard})); err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- d.Run(runCtx) }()
		t.Cleanup(func() { stop(); <-done })
		return d
	}
	c, w := newWorker(cID), newWorker("w")
	missing := func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.peekLocked(shard).missing }
	testkit.WaitFor(t, "c reads the lease absent", 10*time.Second, func() bool {
		if _, err := c.Load(ctx); err != nil {
			t.Fatal(err)
		}
		return missing()
	})
	w.create(ctx, shard)
	if l, ok := leasesOf(t, table)[shard]; !ok || l.Owner != "w" {
		t.Fatalf("w did not create the lease: %+v", l)
	}
	c.batchGet(ctx, []string{shard}) // another read of c's sees the item
	if !missing() {
		t.Fatal("the lease is no longer marked absent: the path under test does not run")
	}
	// c's next Claim creates it (placed on c, marked absent) once the fleet gate opens; the
	// cycle's read of the lease may clear the mark first, so the create is called directly.
	c.create(ctx, shard)
	c.mu.Lock()
	finished := c.peekLocked(shard).last.Finished() // what a child's parentsDone goes by
	c.mu.Unlock()
	if finished {
		t.Fatal("c counts the shard finished after its create found w's item")
	}
	if missing() {
		t.Fatal("c's create did not find the item")
	}
	pr, err := c.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pr[shard].Finished {
		t.Fatalf("c counts the shard finished while w holds its lease: %+v", pr[shard])
	}
	if l := leasesOf(t, table)[shard]; l.Owner != "w" || l.Finished() {
		t.Fatalf("lease %+v, want w's, unfinished", l)
	}
}

// TestFinishedLeaseNotCreatedAgainTwoGenerationsLater: the worker frozen never saw the parent's
// lease, and while it is frozen the parent and both its children are finished and deleted
// (their own children started). When it comes back, its listing (older than the split) and the
// table (the grandchildren's items name the children, not the parent) cannot tell it the
// parent is finished: it creates nothing until its next listing links the grandchildren, and
// then counts the parent finished.
func TestFinishedLeaseNotCreatedAgainTwoGenerationsLater(t *testing.T) {
	fc := newFinishedCase(t)
	ctx := context.Background()
	// c joins (heartbeats only: it never reads the parent) and is frozen; w, alone, does the rest.
	if err := fc.c.Register(ctx, infos([]string{fc.parent})); err != nil {
		t.Fatal(err)
	}
	var stop func()
	fc.pc, stop = drivePoller(t, fc.c, []string{fc.parent}, true)
	defer stop()
	testkit.WaitFor(t, "c joins", 10*time.Second, func() bool {
		return strings.Contains(fc.cLogs.String(), `msg="joined the lease table's workers"`)
	})
	if err := fc.w.Register(ctx, infos([]string{fc.parent})); err != nil {
		t.Fatal(err)
	}
	fc.pw, stop = drivePoller(t, fc.w, []string{fc.parent}, false)
	defer stop()
	from := fc.pw.claimCount()
	testkit.WaitFor(t, "w ran claim cycles", 15*time.Second, func() bool { return fc.pw.claimCount() >= from+3 })
	fc.cAPI.freeze()
	fc.finishAndDelete(t)

	g1, g2 := "shardId-000000000003", "shardId-000000000004"
	if err := fc.w.Register(ctx, []poller.ShardInfo{{ShardID: g1, Parents: []string{fc.k1}}, {ShardID: g2, Parents: []string{fc.k2}}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{fc.k1, fc.k2} {
		if err := fc.w.Save(ctx, map[string]poller.ShardProgress{k: {Finished: true}}); err != nil {
			t.Fatal(err)
		}
	}
	fc.pw.setCandidates([]string{g1, g2})
	testkit.WaitFor(t, "w holds both grandchildren", 15*time.Second, func() bool { return fc.pw.holds(g1) && fc.pw.holds(g2) })
	for _, g := range []string{g1, g2} {
		if err := fc.w.Save(ctx, map[string]poller.ShardProgress{g: {Checkpoint: "49000000000000000000000000000000000000000000000000000002"}}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "both children's finished leases deleted", 15*time.Second, func() bool {
		ls := leasesOf(t, fc.table)
		_, a := ls[fc.k1]
		_, b := ls[fc.k2]
		return !a && !b
	})
	if !fc.cAPI.isFrozen() {
		t.Fatal("c thawed before the children's leases were deleted: the path under test did not run")
	}

	fc.thawAndWatch(t, false)
	fc.c.mu.Lock()
	unlisted := fc.c.countLocked(func(s *shard) bool { return s.unlisted })
	fc.c.mu.Unlock()
	if unlisted != 2 {
		t.Fatalf("c holds back creations for %d unlisted shards, want the 2 grandchildren", unlisted)
	}
	// Its next listing shows the whole lineage: the parent is finished.
	if err := fc.c.Register(ctx, append(fc.children, poller.ShardInfo{ShardID: g1, Parents: []string{fc.k1}}, poller.ShardInfo{ShardID: g2, Parents: []string{fc.k2}})); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "c counts the parent finished", 15*time.Second, func() bool {
		pr, err := fc.c.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return pr[fc.parent].Finished
	})
	if l, ok := leasesOf(t, fc.table)[fc.parent]; ok {
		t.Fatalf("the finished parent has a lease again: %+v", l)
	}
}
