package lease

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
)

// TestExistingChildItemWaitsForItsParent: a child's item may exist before its parents finished
// (KCL creates a child's lease, at TRIM_HORIZON, when it lists the child). A worker whose poller
// offers the child (the parent trimmed from its listing) reads that item free, and must still
// not take it while the parent is held, unfinished, by another live worker: its last batch may
// be running. Once the parent is finished, the child is taken.
func TestExistingChildItemWaitsForItsParent(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	parent, child := "shardId-000000000000", "shardId-000000000001"
	bID, cID := "b", ""
	for i := 0; cID == ""; i++ {
		id := fmt.Sprintf("c%d", i)
		ms := []string{bID, id}
		if assign([]string{parent}, ms).owner[parent] == bID && assign([]string{child}, ms).owner[child] == id {
			cID = id
		}
	}
	all := []poller.ShardInfo{{ShardID: parent}, {ShardID: child, Parents: []string{parent}}}
	newWorker := func(id string) *Dynamo {
		log, _ := testLogger(t)
		d, err := NewDynamo(ddb, table, id, WithLeaseDuration(2*time.Second), WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Register(ctx, all); err != nil {
			t.Fatal(err)
		}
		return d
	}
	b := newWorker(bID)
	pb, stopB := drivePoller(t, b, []string{parent}, false)
	defer stopB()
	testkit.WaitFor(t, "b reads the parent", 15*time.Second, func() bool { return pb.holds(parent) })
	_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		attrKey: str(child), attrCheckpoint: str(poller.TrimHorizon), attrCounter: num(0), attrSubSequence: num(0),
		attrParents: &types.AttributeValueMemberSS{Value: []string{parent}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := newWorker(cID)
	pc, stopC := drivePoller(t, c, []string{child}, false)
	defer stopC()
	testkit.WaitFor(t, "c ran claim cycles offering the child", 15*time.Second, func() bool { return pc.claimCount() >= 10 })
	if l := leasesOf(t, table)[child]; l.Owner != "" || c.Held(child) {
		t.Fatalf("child taken (%+v) while its parent is read by live worker %s", l, bID)
	}
	if err := b.Save(ctx, map[string]poller.ShardProgress{parent: {Finished: true}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "c takes the child once the parent is finished", 15*time.Second, func() bool { return pc.holds(child) })
}
