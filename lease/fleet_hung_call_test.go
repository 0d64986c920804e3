package lease_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/lease"
)

// hangOne is a worker's DynamoDB client on which one UpdateItem of the item whose key match
// accepts never gets an answer, as on a connection that a middlebox black-holes: the call
// returns only when its context ends (the SDK's default HTTP client has no response timeout,
// and esm sets none). Every other call, before and after, gets its answer.
type hangOne struct {
	*gatedAPI
	match       func(key string) bool
	armed, hung atomic.Bool
	after       atomic.Int64 // calls answered since the hang
}

func (h *hangOne) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if k, ok := in.Key["leaseKey"].(*types.AttributeValueMemberS); ok && h.match(k.Value) && h.armed.Load() && h.hung.CompareAndSwap(false, true) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if h.hung.Load() {
		h.after.Add(1)
	}
	return h.gatedAPI.UpdateItem(ctx, in, o...)
}

// invokedSince counts the invocations that started after t.
func (w *world) invokedSince(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.spans {
		if s.start.After(t) {
			n++
		}
	}
	return n
}

// TestOneHungHeartbeatWedgesTheWorker guards the audit's defect 3; what follows is that defect as it was
// before its fix, and the test fails if it comes back: one worker (esm run --lease-table, L = 3 s) on a
// stream with records flowing. One heartbeat call hangs; DynamoDB answers every other call.
// The heartbeat goroutine holds the heartbeat's turn (beatTurn) across the call, the claim
// cycle waits for that turn under cycleMu (Load → cycle → beatOnce → lockBeats), and nothing
// gives up on the call: no heartbeat is sent again, Held turns false after 0.8 L, the readers
// stop, and the coordinator never claims again. The mapping makes no progress for as long as the
// call hangs (minutes for a dead peer, for good behind a proxy that keeps the connection open),
// though DynamoDB answers every other call; a failed call would have been retried 250 ms later.
func TestOneHungHeartbeatWedgesTheWorker(t *testing.T) {
	const L = 3 * time.Second
	w := newWorld(t, 1, L)
	w.produce(t, 50*time.Millisecond)
	var h *hangOne
	w.startWith("a", 5*time.Second, 3*time.Second, func(g *gatedAPI) lease.DynamoAPI {
		h = &hangOne{gatedAPI: g, match: func(k string) bool { return k == "!esm-workers" }}
		return h
	})
	w.waitFor("invocations", 30*time.Second, func() bool { return w.invokedSince(time.Time{}) > 5 })
	h.armed.Store(true)
	w.waitFor("the hung heartbeat", 10*time.Second, h.hung.Load)
	hungAt := time.Now()
	time.Sleep(5 * L)
	n := w.invokedSince(hungAt.Add(L))
	t.Logf("invocations from L to 5 L after one heartbeat hung: %d; other UpdateItem calls answered meanwhile: %d", n, h.after.Load())
	if n == 0 {
		t.Errorf("no invocation for %s after one heartbeat call hung (DynamoDB answers every other call): the worker is wedged until that call returns", 4*L)
	}
}

// TestOneHungCheckpointStallsTheShardForGood guards the audit's defect 3; what follows is that defect as it was
// before its fix, and the test fails if it comes back: two workers, two shards, one each. One of a's
// checkpoint writes hangs (the reader calls Store.Save with workCtx, which has no deadline, and
// holds heldLease.mu across it). a's heartbeats go on, so a is alive to everyone and keeps the
// lease; its reader never checks Held again; b never takes the shard. The shard (and its
// children, once it is a parent) is not read for as long as the call hangs.
func TestOneHungCheckpointStallsTheShardForGood(t *testing.T) {
	const L = 3 * time.Second
	w := newWorld(t, 2, L)
	w.produce(t, 50*time.Millisecond)
	var h *hangOne
	var hungShard atomic.Value
	w.startWith("a", 5*time.Second, 3*time.Second, func(g *gatedAPI) lease.DynamoAPI {
		h = &hangOne{gatedAPI: g, match: func(k string) bool {
			if strings.HasPrefix(k, "shardId-") {
				hungShard.Store(k)
				return true
			}
			return false
		}}
		return h
	})
	w.start("b", 5*time.Second, 3*time.Second)
	w.waitFor("one lease each", 30*time.Second, func() bool { o := w.owners(); return o["a"] == 1 && o["b"] == 1 })
	time.Sleep(L)
	h.armed.Store(true)
	w.waitFor("the hung checkpoint", 10*time.Second, h.hung.Load)
	shard := hungShard.Load().(string)
	hungAt := time.Now()
	time.Sleep(6 * L)
	w.mu.Lock()
	n, other := 0, 0
	for _, s := range w.spans {
		if s.start.After(hungAt.Add(L)) {
			if s.shard == shard {
				n++
			} else {
				other++
			}
		}
	}
	w.mu.Unlock()
	t.Logf("from L to 6 L after a's checkpoint of %s hung: invocations of it by anyone %d, of the other shard %d; a's other writes answered meanwhile: %d; owners %v",
		shard, n, other, h.after.Load(), w.owners())
	if n == 0 {
		t.Errorf("%s was not invoked by anyone for %s after one checkpoint call hung: a stays alive and keeps the lease, its reader is stuck in the call", shard, 5*L)
	}
}
