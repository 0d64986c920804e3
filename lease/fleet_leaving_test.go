package lease_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

type rosterEntry struct {
	epoch   int64
	leaving bool
	waits   []string
}

// roster reads the roster item: each worker's entry, and the tombstones.
func (w *world) roster() (map[string]rosterEntry, []string) {
	out := map[string]rosterEntry{}
	var gone []string
	for _, it := range w.db.Items("leases") {
		if k, ok := it["leaseKey"].(*types.AttributeValueMemberS); !ok || k.Value != "!esm-workers" {
			continue
		}
		if g, ok := it["gone"].(*types.AttributeValueMemberM); ok {
			for k := range g.Value {
				gone = append(gone, k)
			}
		}
		ms, _ := it["workers"].(*types.AttributeValueMemberM)
		if ms == nil {
			continue
		}
		for id, v := range ms.Value {
			e, _ := v.(*types.AttributeValueMemberM)
			var re rosterEntry
			if n, ok := e.Value["e"].(*types.AttributeValueMemberN); ok {
				re.epoch, _ = strconv.ParseInt(n.Value, 10, 64)
			}
			if l, ok := e.Value["l"].(*types.AttributeValueMemberBOOL); ok {
				re.leaving = l.Value
			}
			if ws, ok := e.Value["w"].(*types.AttributeValueMemberSS); ok {
				re.waits = ws.Value
			}
			out[id] = re
		}
	}
	return out, gone
}

// placedOn reads "placed=..." from a worker's DebugState of a shard: where its placement puts it.
func placedOn(state string) string {
	_, after, ok := strings.Cut(state, "placed=")
	if !ok {
		return "?"
	}
	v, _, _ := strings.Cut(after, " ")
	return strings.Trim(v, `"`)
}

// TestStallLeavesWorkerMarkedLeavingForGood guards the audit's defect 7; what follows is that defect as it was
// before its fix, and the test fails if it comes back: worker a's heartbeats (writes to the roster item)
// stall for 0.9 L (the roster is one hot item: the SDK's own retries of a throttled write, a
// network stall; L = 3 s, so 2.7 s: shorter than the lease, and nobody else is there to declare
// it dead). Held turns false after 0.8 L, the readers
// stop and are Released; prepareRelease takes a reader that stopped without a hand-over for a
// shutdown and calls markLeaving, whose heartbeat writes l = true into a's roster entry. Nothing
// ever removes it: the heartbeat only SETs it, and startClaim clears the local flag only. a
// runs on, but every other worker leaves it out of its placement for as long as it lives: b,
// started afterwards, places every shard on itself and waits for good on those a keeps.
func TestStallLeavesWorkerMarkedLeavingForGood(t *testing.T) {
	const L = 3 * time.Second
	w := newWorld(t, 4, L)
	w.produce(t, 30*time.Millisecond)
	a := w.start("a", 5*time.Second, 3*time.Second)
	w.waitFor("a to hold every lease", 30*time.Second, func() bool { return w.owners()["a"] == 4 })

	a.api.rosterOnly.Store(true) // its heartbeats stall; its checkpoints go through
	a.api.stall(9 * L / 10)
	time.Sleep(9*L/10 + 2*L) // the stall, then two lease durations of normal running
	r, _ := w.roster()
	t.Logf("after the stall: a's roster entry %+v, leases owned %v", r["a"], w.owners())
	if r["a"].leaving {
		t.Errorf("a is running and claiming, but its roster entry says leaving (l = true) %s after a %s stall", 2*L, 9*L/10)
	}

	b := w.start("b", 5*time.Second, 3*time.Second)
	time.Sleep(3 * L)
	var views []string
	allOnB := true
	for i := range 4 {
		sh := fmt.Sprintf("shardId-%012d", i)
		pa, pb := placedOn(a.d.DebugState(sh)), placedOn(b.d.DebugState(sh))
		views = append(views, fmt.Sprintf("%s: a places it on %s, b on %s", sh, pa, pb))
		allOnB = allOnB && pb == "b"
	}
	r, _ = w.roster()
	t.Logf("%s after b joined: leases owned %v; b's roster entry %+v\n%s", 3*L, w.owners(), r["b"], strings.Join(views, "\n"))
	if allOnB {
		t.Errorf("b's placement leaves a out (a still marked leaving): b places all 4 shards on itself and waits on %v for good", r["b"].waits)
	}
}

// TestFleetStallShorterThanLeaseDeclaresDeath guards the audit's defect 8; what follows is that defect as it was
// before its fix, and the test fails if it comes back: every worker's DynamoDB calls stall for 0.9 L at
// once (the roster is one item: a throttle burst that the SDK retries, a brownout). The design
// says a worker is declared dead only when its heartbeat stood still for L across two of the
// observer's own successful heartbeats, so that a table-wide stall declares nobody. But the
// observer's heartbeats that were stalled complete together when the stall ends (the Run
// goroutine's, and markLeaving's from the readers' Release, which does not take the heartbeat's
// turn), before the peer's stalled heartbeat is seen: they count as two healthy heartbeats, and
// the peer is declared dead. Its leases then wait 9/8 of its invocation bound (here 5.6 s; with
// Timeout 60 s out of process, 78 s), and it rejoins.
func TestFleetStallShorterThanLeaseDeclaresDeath(t *testing.T) {
	const L = 3 * time.Second
	w := newWorld(t, 4, L)
	w.produce(t, 30*time.Millisecond)
	a := w.start("a", 5*time.Second, 3*time.Second)
	b := w.start("b", 5*time.Second, 3*time.Second)
	w.waitFor("two leases each", 30*time.Second, func() bool { o := w.owners(); return o["a"] == 2 && o["b"] == 2 })
	before, _ := w.roster()

	a.api.stall(9 * L / 10)
	b.api.stall(9 * L / 10)
	time.Sleep(9*L/10 + L)

	after, gone := w.roster()
	var dead []string
	for _, id := range []string{"a", "b"} {
		if after[id].epoch != before[id].epoch {
			dead = append(dead, fmt.Sprintf("%s (epoch %d → %d)", id, before[id].epoch, after[id].epoch))
		}
	}
	t.Logf("tombstones now: %v", gone)
	if len(dead) > 0 || len(gone) > 0 {
		t.Errorf("a %s stall of the whole fleet (shorter than the lease, %s) had a worker declared dead: %v, tombstones %v", 9*L/10, L, dead, gone)
	}
}

// TestHeartbeatClearsALeavingFlag: a roster entry says leaving (l = true) that this worker's
// state does not (an earlier version's stop, a heartbeat's lost answer): the next heartbeats
// remove it, and the others count the worker in their placement again.
func TestHeartbeatClearsALeavingFlag(t *testing.T) {
	const L = 3 * time.Second
	w := newWorld(t, 1, L)
	w.start("a", 5*time.Second, 3*time.Second)
	w.waitFor("a to join", 10*time.Second, func() bool { r, _ := w.roster(); return r["a"].epoch != 0 })
	_, err := w.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String("leases"), Key: map[string]types.AttributeValue{"leaseKey": &types.AttributeValueMemberS{Value: "!esm-workers"}},
		UpdateExpression:          aws.String("SET workers.a.l = :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.waitFor("a's heartbeat to clear the flag", 3*L, func() bool { r, _ := w.roster(); return !r["a"].leaving })
}
