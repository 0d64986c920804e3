package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/poller"
)

// TestFleetReadsAddressesAndBlockedMarks: each worker's status address comes back from the bound
// item of its epoch (ReadFleet and WorkerReader); a blocked mark written by the lease's owner
// counts, one written by another worker is refused by its condition, a mark left by a previous
// owner does not count once another worker took the lease, and removing a mark removes it.
func TestFleetReadsAddressesAndBlockedMarks(t *testing.T) {
	ctx := context.Background()
	table := newTable(t)
	a, err := NewDynamo(ddb, table, "a", WithStatusAddr("127.0.0.1:9001"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewDynamo(ddb, table, "b", WithStatusAddr("127.0.0.1:9002"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*Dynamo{a, b} {
		if err := d.join(ctx); err != nil {
			t.Fatal(err)
		}
	}
	own := func(d *Dynamo) {
		t.Helper()
		_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
			attrKey: str("shardId-000000000001"), attrOwner: str(d.id), attrOwnerEpoch: num(d.me.epoch), attrCounter: num(1),
			attrCheckpoint: str("TRIM_HORIZON")}})
		if err != nil {
			t.Fatal(err)
		}
	}
	own(a)
	since := time.UnixMilli(time.Now().UnixMilli()).UTC()
	mark := &Blocked{Since: since, Cause: "cannot parse", CauseAt: since.Add(time.Second), Attempts: 3}
	if err := b.markBlocked(ctx, "shardId-000000000001", mark); err != nil { // not b's: refused, quietly
		t.Fatal(err)
	}
	f := readFleet(t, table)
	if len(f.Blocked) != 0 {
		t.Fatalf("a mark by a worker not owning the lease counts: %+v", f.Blocked)
	}
	if got := workerAddrs(f.Workers); got != "a=127.0.0.1:9001 b=127.0.0.1:9002" {
		t.Errorf("ReadFleet's workers: %s", got)
	}
	ws, err := NewWorkerReader(ddb, table).Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := workerAddrs(ws); got != "a=127.0.0.1:9001 b=127.0.0.1:9002" {
		t.Errorf("WorkerReader's workers: %s", got)
	}
	if err := a.markBlocked(ctx, "shardId-000000000001", mark); err != nil {
		t.Fatal(err)
	}
	got := readFleet(t, table).Blocked["shardId-000000000001"]
	if want := (Blocked{Owner: "a", Since: since, Cause: "cannot parse", CauseAt: since.Add(time.Second), Attempts: 3}); got != want {
		t.Errorf("the owner's mark reads %+v, want %+v", got, want)
	}
	own(b) // taken by b: a's mark stays on the item but no longer counts
	if f := readFleet(t, table); len(f.Blocked) != 0 {
		t.Errorf("a previous owner's mark counts: %+v", f.Blocked)
	}
	own(a)
	if err := a.markBlocked(ctx, "shardId-000000000001", nil); err != nil {
		t.Fatal(err)
	}
	if f := readFleet(t, table); len(f.Blocked) != 0 || len(f.Leases) != 1 {
		t.Errorf("after its removal: marks %+v, %d leases", f.Blocked, len(f.Leases))
	}
}

func readFleet(t *testing.T, table string) Fleet {
	t.Helper()
	f, err := ReadFleet(context.Background(), ddb, table)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func workerAddrs(ws []Worker) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, w.ID+"="+w.Addr)
	}
	return strings.Join(parts, " ")
}

// TestBlockedMarksFollowThePoller: the observer marks a shard the poller reports blocked with
// its failing batch's first failure, attempts and last cause, and removes the mark once the
// poller reports it unblocked (the next write, MarkSpacing later).
func TestBlockedMarksFollowThePoller(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	table := newTable(t)
	a, err := NewDynamo(ddb, table, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.join(ctx); err != nil {
		t.Fatal(err)
	}
	const shard = "shardId-000000000001"
	if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		attrKey: str(shard), attrOwner: str("a"), attrOwnerEpoch: num(a.me.epoch), attrCounter: num(1), attrCheckpoint: str("TRIM_HORIZON")}}); err != nil {
		t.Fatal(err)
	}
	m := a.BlockedMarks()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	first := time.Now().Add(-time.Minute)
	m.BatchFailing(shard, poller.BatchFailure{First: "1", Last: "2", Cause: "first cause", Since: first, FailedAt: first, Attempts: 1})
	m.BatchFailing(shard, poller.BatchFailure{First: "1", Last: "2", Cause: "second cause", Since: first, FailedAt: time.Now(), Attempts: 3})
	m.ShardBlocked(shard, true)
	waitFor := func(what string, ok func(Fleet) bool) Fleet {
		t.Helper()
		deadline := time.Now().Add(MarkSpacing + 5*time.Second)
		for {
			f := readFleet(t, table)
			if ok(f) {
				return f
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: never; the table says %+v", what, f.Blocked)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	f := waitFor("the mark", func(f Fleet) bool { return len(f.Blocked) == 1 })
	if b := f.Blocked[shard]; b.Attempts != 3 || b.Cause != "second cause" || !b.Since.Equal(time.UnixMilli(first.UnixMilli()).UTC()) || b.Owner != "a" {
		t.Errorf("the mark: %+v", b)
	}
	m.ShardBlocked(shard, false)
	waitFor("the mark's removal", func(f Fleet) bool { return len(f.Blocked) == 0 })
}
