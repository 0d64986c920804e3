package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/internal/testkit"
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

// TestDeadWorkersLeaseWaitsForItsTimeout: a worker cut off from DynamoDB is declared dead after a
// lease duration, and its lease is taken only once the taker has seen its tombstone for the
// function timeout the dead worker published, and an eighth more: an invocation it started
// before its Held ended has ended by then.
func TestDeadWorkersLeaseWaitsForItsTimeout(t *testing.T) {
	const leaseDuration, timeout = 2 * time.Second, 3 * time.Second
	table := newTable(t)
	ids := shardIDs(1)
	cut := &countingAPI{DynamoAPI: ddb}
	logA, _ := testLogger(t)
	_, stopA := startDriven(t, cut, table, "a", ids, WithLeaseDuration(leaseDuration), WithFunctionTimeout(timeout), WithLogger(logA))
	testkit.WaitFor(t, "a to own the shard", 15*time.Second, func() bool { return leasesOf(t, table)[ids[0]].Owner == "a" })
	logB, bufB := testLogger(t)
	_, stopB := startDriven(t, ddb, table, "b", ids, WithLeaseDuration(leaseDuration), WithFunctionTimeout(time.Second), WithLogger(logB))
	defer stopB()
	testkit.WaitFor(t, "b to see a", 15*time.Second, func() bool { _, ok := firstLog(bufB, "joined the lease table's workers"); return ok })
	cut.cut.Store(true)
	defer stopA()
	testkit.WaitFor(t, "b to take a's lease", 30*time.Second, func() bool { _, ok := firstLog(bufB, "lease taken", "shard_id", ids[0]); return ok })
	declared, ok := firstLog(bufB, "worker declared dead", "dead_worker", "a")
	if !ok {
		t.Fatal("b took the lease without declaring a dead")
	}
	taken, _ := firstLog(bufB, "lease taken", "shard_id", ids[0])
	wait := outlast(timeout)
	t.Logf("a declared dead; its lease taken %s later (wait %s)", taken.Sub(declared).Round(time.Millisecond), wait)
	if taken.Sub(declared) < wait {
		t.Fatalf("a's lease taken %s after a was declared dead: an invocation a started may still run for %s", taken.Sub(declared), wait)
	}
	testkit.WaitFor(t, "the tombstone removed once its wait passed", 30*time.Second, func() bool { return len(tombstones(t, table)) == 0 })
}

// TestRestartedWorkerWaitsForItsPreviousIncarnation: a worker killed and started again under the
// same id replaces its roster entry with a tombstone; the leases of its previous epoch are free
// only once that incarnation can have neither read nor invoked (Held's window and its timeout,
// and an eighth more), not at once as before.
func TestRestartedWorkerWaitsForItsPreviousIncarnation(t *testing.T) {
	const leaseDuration, timeout = 2 * time.Second, 2 * time.Second
	table := newTable(t)
	ids := shardIDs(1)
	cut := &countingAPI{DynamoAPI: ddb}
	_, stop1 := startDriven(t, cut, table, "a", ids, WithLeaseDuration(leaseDuration), WithFunctionTimeout(timeout))
	testkit.WaitFor(t, "a to own the shard", 15*time.Second, func() bool { return leasesOf(t, table)[ids[0]].Owner == "a" })
	first := leasesOf(t, table)[ids[0]].OwnerEpoch
	cut.cut.Store(true) // killed, as the table sees it
	defer stop1()
	log2, buf2 := testLogger(t)
	a2, stop2 := startDriven(t, ddb, table, "a", ids, WithLeaseDuration(leaseDuration), WithFunctionTimeout(timeout), WithLogger(log2))
	defer stop2()
	testkit.WaitFor(t, "the new incarnation to take the lease", 30*time.Second, func() bool { _, ok := firstLog(buf2, "lease taken", "shard_id", ids[0]); return ok })
	if l := leasesOf(t, table)[ids[0]]; l.Owner != "a" || l.OwnerEpoch == first {
		t.Fatalf("lease %+v after the new incarnation's take", l)
	}
	joined, _ := firstLog(buf2, "joined the lease table's workers")
	taken, _ := firstLog(buf2, "lease taken", "shard_id", ids[0])
	wait := outlast(a2.safe + timeout)
	t.Logf("restarted; the previous incarnation's lease taken %s after the join (wait %s)", taken.Sub(joined).Round(time.Millisecond), wait)
	if taken.Sub(joined) < wait {
		t.Fatalf("the previous incarnation's lease taken %s after the join; it may have been invoking for %s", taken.Sub(joined), wait)
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
	_, stopB := startDriven(t, ddb, table, "b", ids, WithLeaseDuration(leaseDuration), WithFunctionTimeout(time.Second), WithLogger(logB))
	defer stopB()
	testkit.WaitFor(t, "b to join", 15*time.Second, func() bool { _, ok := firstLog(bufB, "joined the lease table's workers"); return ok })
	a.Abandon(ids[0])
	stopping := time.Now()
	stopA()
	if l := leasesOf(t, table)[ids[0]]; l.Owner != "a" || l.HandedOver {
		t.Fatalf("after the stop: %+v; want the abandoned lease kept by a", l)
	}
	testkit.WaitFor(t, "b to take the lease", 30*time.Second, func() bool { _, ok := firstLog(bufB, "lease taken", "shard_id", ids[0]); return ok })
	taken, _ := firstLog(bufB, "lease taken", "shard_id", ids[0])
	wait := outlast(timeout)
	t.Logf("abandoned lease taken %s after the stop began (wait %s)", taken.Sub(stopping).Round(time.Millisecond), wait)
	if taken.Sub(stopping) < wait {
		t.Fatalf("abandoned lease taken %s after the stop began; the invocation cut off may run for %s", taken.Sub(stopping), wait)
	}
}
