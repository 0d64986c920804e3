package lease

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/poller"
)

// TestChildWaitsForGrandparentBeyondTrimmedParent: a shard trimmed by retention before anyone
// read it counts finished, but nothing says its own parent's last batch ended: that parent's
// children never waited for it. Worker a holds the grandparent (its last batch in flight);
// worker b is offered the child of the trimmed middle shard, whose lease was never created (or
// the child's lease exists unstarted, KCL-style, which makes b count the absent middle shard
// finished; or the middle shard's own lease exists and nobody started it). b takes
// the child only once the grandparent is finished. Without the walk past the middle shard b
// took it at once (sim LEASES=1 seed 207: a child invoked 17.7 s before its grandparent's last
// invocation, in flight on a frozen worker, ended).
func TestChildWaitsForGrandparentBeyondTrimmedParent(t *testing.T) {
	for _, items := range []string{"none", "child", "middle"} {
		t.Run("unstarted item of "+items, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { childWaitsForGrandparent(t, items) })
		})
	}
}

func childWaitsForGrandparent(t *testing.T, items string) {
	ctx := context.Background()
	db := hzTable(t)
	g, m, c := "shardId-000000000000", "shardId-000000000001", "shardId-000000000002"
	all := []poller.ShardInfo{{ShardID: g}, {ShardID: m, Parents: []string{g}}, {ShardID: c, Parents: []string{m}}}
	bID := "b"
	for i := 0; assign([]string{c}, []string{"a", bID}).owner[c] != bID || assign([]string{g, m}, []string{"a", bID}).owner[g] != "a"; i++ {
		bID = fmt.Sprintf("b%d", i)
	}
	a := lineageWorker(t, db, "a", all, []string{g})
	awaitVirtual(t, "a to hold the grandparent", time.Minute, func() bool { return a.Held(g) })
	if items != "none" {
		id, parent := c, m
		if items == "middle" {
			id, parent = m, g
		}
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("leases"), Item: map[string]types.AttributeValue{
			attrKey: str(id), attrCheckpoint: str(poller.TrimHorizon), attrCounter: num(0), attrSubSequence: num(0),
			attrParents: &types.AttributeValueMemberSS{Value: []string{parent}},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// b's listing showed the middle shard before retention trimmed it: the poller counts it
	// finished and offers its child.
	b := lineageWorker(t, db, bID, all, []string{c})
	placed := func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.plan.owner[c] == bID && b.cycles >= 20 }
	awaitVirtual(t, "b to run claim cycles with the child placed on it", 5*time.Minute, placed)
	if b.Held(c) {
		t.Fatal("b holds the child while its trimmed parent's parent is held by live worker a")
	}
	for _, l := range leasesOfDB(t, db) {
		if l.ShardID == c && l.Owner != "" {
			t.Fatalf("child's lease owned (%+v) while its trimmed parent's parent is held by live worker a", l)
		}
	}
	if err := a.Save(ctx, map[string]poller.ShardProgress{g: {Finished: true}}); err != nil {
		t.Fatal(err)
	}
	awaitVirtual(t, "b to take the child once the grandparent is finished", time.Minute, func() bool { return b.Held(c) })
}

// lineageWorker starts worker id (L = 10 s) on the in-memory table with the shards registered,
// driven as the poller would drive it with the candidates offered.
func lineageWorker(t *testing.T, db DynamoAPI, id string, shards []poller.ShardInfo, candidates []string) *Dynamo {
	t.Helper()
	d, err := NewDynamo(db, "leases", id, WithLeaseDuration(hzLease))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Register(context.Background(), shards); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = d.Run(ctx) })
	wg.Go(func() { pollerLoop(ctx, d, candidates) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return d
}
