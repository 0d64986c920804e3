package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
)

// firstLog is the time of the first line of the log with msg and every attribute given.
func firstLog(log *logBuffer, msg string, attrs ...string) (time.Time, bool) {
	for _, line := range strings.Split(log.String(), "\n") {
		a := parseLogLine(line)
		if a["msg"] != msg {
			continue
		}
		ok := true
		for i := 0; i+1 < len(attrs); i += 2 {
			ok = ok && a[attrs[i]] == attrs[i+1]
		}
		if at, err := time.Parse(time.RFC3339Nano, a["time"]); ok && err == nil {
			return at, true
		}
	}
	return time.Time{}, false
}

// startDriven makes worker id of table, registers shards and drives it (drive); stop ends it.
func startDriven(t *testing.T, api DynamoAPI, table, id string, shards []string, opts ...Option) (d *Dynamo, stop func()) {
	t.Helper()
	d, err := NewDynamo(api, table, id, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Register(context.Background(), infos(shards)); err != nil {
		t.Fatal(err)
	}
	return d, drive(t, d, shards)
}

// tombstones reads the roster's tombstones: key → wait.
func tombstones(t *testing.T, table string) map[string]time.Duration {
	t.Helper()
	out, err := ddb.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, Key: key(rosterKey), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	_, tombs, err := decodeRoster(out.Item)
	if err != nil {
		t.Fatal(err)
	}
	return tombs
}

// TestDeadWorkersLeaseWaitsForItsTimeout: a worker cut off from DynamoDB just after it started an
// invocation is declared dead after a lease duration, and its lease is taken only once that
// invocation's deadline (its start plus the function timeout the dead worker published) has
// passed: the horizon of its last heartbeat covered it. (The lease may be taken up to a claim
// interval before; its shard is invoked only once the deadline passed.)
func TestDeadWorkersLeaseWaitsForItsTimeout(t *testing.T) {
	const leaseDuration, timeout = 2 * time.Second, 3 * time.Second
	table := newTable(t)
	ids := shardIDs(1)
	cut := &countingAPI{DynamoAPI: ddb}
	logA, _ := testLogger(t)
	a, stopA := startDriven(t, cut, table, "a", ids, WithLeaseDuration(leaseDuration), WithFunctionTimeout(timeout), WithLogger(logA))
	testkit.WaitFor(t, "a to own the shard", 15*time.Second, func() bool { return leasesOf(t, table)[ids[0]].Owner == "a" && a.Held(ids[0]) })
	logB, bufB := testLogger(t)
	b, stopB := startDriven(t, ddb, table, "b", ids, WithLeaseDuration(leaseDuration), WithFunctionTimeout(time.Second), WithLogger(logB))
	defer stopB()
	testkit.WaitFor(t, "b to see a", 15*time.Second, func() bool { _, ok := firstLog(bufB, "joined the lease table's workers"); return ok })
	started := time.Now()
	if _, ok := a.StartInvocation(context.Background(), ids[0]); !ok {
		t.Fatal("a may not invoke the shard it holds")
	}
	cut.cut.Store(true)
	defer stopA()
	testkit.WaitFor(t, "b to take a's lease", 30*time.Second, func() bool { _, ok := firstLog(bufB, "lease taken", "shard_id", ids[0]); return ok })
	if _, ok := firstLog(bufB, "worker declared dead", "dead_worker", "a"); !ok {
		t.Fatal("b took the lease without declaring a dead")
	}
	admitted := admittedAt(t, b, ids[0])
	t.Logf("a cut off just after an invocation started; its shard invoked by b %s after that start (timeout %s)", admitted.Sub(started).Round(time.Millisecond), timeout)
	if admitted.Sub(started) < timeout {
		t.Fatalf("a's shard invoked by b %s after a started an invocation that may run for %s", admitted.Sub(started), timeout)
	}
	testkit.WaitFor(t, "the tombstone removed once its wait passed", 30*time.Second, func() bool { return len(tombstones(t, table)) == 0 })
}

// TestRestartedWorkerWaitsForItsPreviousIncarnation: a worker killed just after it started an
// invocation and started again under the same id replaces its roster entry with a tombstone;
// the leases of its previous epoch are free only once that invocation's deadline passed (the
// horizon of the previous incarnation's last heartbeat), not at once as before.
func TestRestartedWorkerWaitsForItsPreviousIncarnation(t *testing.T) {
	const leaseDuration, timeout = 2 * time.Second, 2 * time.Second
	table := newTable(t)
	ids := shardIDs(1)
	cut := &countingAPI{DynamoAPI: ddb}
	a1, stop1 := startDriven(t, cut, table, "a", ids, WithLeaseDuration(leaseDuration), WithFunctionTimeout(timeout))
	testkit.WaitFor(t, "a to own the shard", 15*time.Second, func() bool { return leasesOf(t, table)[ids[0]].Owner == "a" && a1.Held(ids[0]) })
	first := leasesOf(t, table)[ids[0]].OwnerEpoch
	started := time.Now()
	if _, ok := a1.StartInvocation(context.Background(), ids[0]); !ok {
		t.Fatal("a may not invoke the shard it holds")
	}
	cut.cut.Store(true) // killed, as the table sees it
	defer stop1()
	log2, buf2 := testLogger(t)
	a2, stop2 := startDriven(t, ddb, table, "a", ids, WithLeaseDuration(leaseDuration), WithFunctionTimeout(timeout), WithLogger(log2))
	defer stop2()
	testkit.WaitFor(t, "the new incarnation to take the lease", 30*time.Second, func() bool { _, ok := firstLog(buf2, "lease taken", "shard_id", ids[0]); return ok })
	if l := leasesOf(t, table)[ids[0]]; l.Owner != "a" || l.OwnerEpoch == first {
		t.Fatalf("lease %+v after the new incarnation's take", l)
	}
	admitted := admittedAt(t, a2, ids[0])
	t.Logf("restarted; the previous incarnation's shard invoked again %s after its last invocation started (timeout %s)", admitted.Sub(started).Round(time.Millisecond), timeout)
	if admitted.Sub(started) < timeout {
		t.Fatalf("the previous incarnation's shard invoked again %s after it started an invocation that may run for %s", admitted.Sub(started), timeout)
	}
}

// TestRosterWithoutTimeoutsCountsTheLongest: a worker that published no invocation bound (an
// earlier version's roster entry) counts as Lambda's longest timeout, 900 s: declared dead, its
// tombstone waits for 900 s and an eighth.
func TestRosterWithoutTimeoutsCountsTheLongest(t *testing.T) {
	const leaseDuration = 2 * time.Second
	table := newTable(t)
	ctx := context.Background()
	// An entry as the previous version wrote it (epoch, heartbeat, shards known), and no bound.
	_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		attrKey: str(rosterKey),
		attrMembers: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"old": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{memberEpoch: num(7), memberBeat: num(1), memberKnown: num(0)}},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, stop := startDriven(t, ddb, table, "new", nil, WithLeaseDuration(leaseDuration))
	defer stop()
	testkit.WaitFor(t, "the old worker declared dead", 30*time.Second, func() bool { return len(tombstones(t, table)) > 0 })
	if got, want := tombstones(t, table)[goneKey("old", 7)], outlast(MaxFunctionTimeout); got != want {
		t.Fatalf("tombstones %v: want %s for the entry without a timeout", tombstones(t, table), want)
	}
}

// TestAbandonedLeaseWaitsForTheTimeout: a worker that stops with an invocation cut off by the
// shutdown grace (the poller calls Abandon, not Release) keeps that lease and leaves a
// tombstone: the next owner takes it only once the cut-off invocation must have ended.
func TestAbandonedLeaseWaitsForTheTimeout(t *testing.T) {
	const leaseDuration, timeout = 2 * time.Second, 2 * time.Second
	table := newTable(t)
	ids := shardIDs(1)
	a, stopA := startDriven(t, ddb, table, "a", ids, WithLeaseDuration(leaseDuration), WithFunctionTimeout(timeout))
	testkit.WaitFor(t, "a to own the shard", 15*time.Second, func() bool { return leasesOf(t, table)[ids[0]].Owner == "a" })
	logB, bufB := testLogger(t)
	b, stopB := startDriven(t, ddb, table, "b", ids, WithLeaseDuration(leaseDuration), WithFunctionTimeout(time.Second), WithLogger(logB))
	defer stopB()
	testkit.WaitFor(t, "b to join", 15*time.Second, func() bool { _, ok := firstLog(bufB, "joined the lease table's workers"); return ok })
	testkit.WaitFor(t, "a to hold the shard", 15*time.Second, func() bool { return a.Held(ids[0]) })
	started := time.Now()
	if _, ok := a.StartInvocation(context.Background(), ids[0]); !ok { // cut off: never ended
		t.Fatal("a may not invoke the shard it holds")
	}
	a.Abandon(ids[0])
	stopA()
	if l := leasesOf(t, table)[ids[0]]; l.Owner != "a" || l.HandedOver {
		t.Fatalf("after the stop: %+v; want the abandoned lease kept by a", l)
	}
	testkit.WaitFor(t, "b to take the lease", 30*time.Second, func() bool { _, ok := firstLog(bufB, "lease taken", "shard_id", ids[0]); return ok })
	admitted := admittedAt(t, b, ids[0])
	t.Logf("abandoned lease's shard invoked by b %s after its cut-off invocation started (timeout %s)", admitted.Sub(started).Round(time.Millisecond), timeout)
	if admitted.Sub(started) < timeout {
		t.Fatalf("abandoned lease's shard invoked by b %s after its cut-off invocation started; it may run for %s", admitted.Sub(started), timeout)
	}
}

// admittedAt waits until d admits an invocation of the shard (it holds the lease, and the
// previous owner's invocations may have ended: a lease may be taken up to a claim interval
// before), and says when.
func admittedAt(t *testing.T, d *Dynamo, shard string) time.Time {
	t.Helper()
	var tk poller.InvocationTicket
	testkit.WaitFor(t, d.WorkerID()+" to admit an invocation of "+shard, 30*time.Second, func() bool {
		var ok bool
		tk, ok = d.StartInvocation(context.Background(), shard)
		return ok
	})
	tk.End(true)
	return time.Now()
}
