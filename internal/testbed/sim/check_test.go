package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
)

// TestCheckerJudges gives the checker one small history that keeps every invariant (a parent
// shard, its child, a grandchild under a child that had only filtered records, a batch
// discarded after its retries, one window, one worker whose observer agrees) and the same
// history broken several ways per invariant, each a plausible bug of the mapping or of a
// weakened checker: the sound one must pass, having judged every invariant, and each broken
// one must fail with its own kind of violation only.
func TestCheckerJudges(t *testing.T) {
	at := func(ms int) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }
	sound := func() (*world, []*incarnation) {
		w := &world{
			s: Schedule{Window: time.Minute, PF: 1, Workers: 1, Retries: 1, Filter: true},
			recs: map[string]*rec{
				"d1": {seq: "d1", key: "z", shard: "p", tag: "poison", n: 0, at: at(0)},
				"p1": {seq: "p1", key: "a", shard: "p", tag: "a", n: 0, at: at(0)},
				"pb": {seq: "pb", key: "b", shard: "p", tag: "b", n: 0, at: at(1)},
				"p2": {seq: "p2", key: "a", shard: "p", tag: "a", n: 1, at: at(1)},
				"c1": {seq: "c1", key: "a", shard: "c", tag: "a", n: 2, at: at(2)},
				"e1": {seq: "e1", key: "b", shard: "e", tag: "b", n: 1, at: at(2)},
				"g1": {seq: "g1", key: "g", shard: "g", tag: "a", n: 0, at: at(3)},
				"d2": {seq: "d2", key: "y", shard: "g", tag: "poison", n: 0, at: at(4)},
			},
			parents:  map[string][]string{"c": {"p"}, "e": {"p"}, "g": {"e"}},
			trimmed:  map[string]bool{},
			excused:  map[string]bool{},
			handled:  map[string]bool{"p1": true, "p2": true, "c1": true, "g1": true},
			sent:     map[string]bool{"d1": true, "d2": true},
			cpJudged: 2,
			declared: 1,
		}
		w.byShard = map[string][]*rec{"p": {w.recs["d1"], w.recs["p1"], w.recs["pb"], w.recs["p2"]}, "c": {w.recs["c1"]},
			"e": {w.recs["e1"]}, "g": {w.recs["g1"], w.recs["d2"]}}
		w.calls = []*call{
			{inc: 1, shard: "p", seqs: []string{"d1"}, keys: []string{"shard p"}, start: at(1), end: at(3), responded: true, failed: true},
			{inc: 1, shard: "p", seqs: []string{"d1"}, keys: []string{"shard p"}, start: at(3), end: at(5), responded: true, failed: true},
			{inc: 1, shard: "p", seqs: []string{"p1", "p2"}, handled: []string{"p1", "p2"}, keys: []string{"shard p"}, start: at(10), end: at(20), responded: true},
			{inc: 1, shard: "p", final: true, window: epoch, state: 2, keys: []string{"shard p"}, start: at(21), end: at(22), responded: true},
			{inc: 1, shard: "c", seqs: []string{"c1"}, handled: []string{"c1"}, keys: []string{"shard c"}, start: at(30), end: at(40), responded: true},
			{inc: 1, shard: "g", seqs: []string{"g1"}, handled: []string{"g1"}, keys: []string{"shard g"}, start: at(50), end: at(60), responded: true},
		}
		w.discards = []discard{{inc: 1, condition: "RetryAttemptsExhausted", invokes: 2, seqs: []string{"d1"}, at: at(6)},
			{inc: 1, condition: poller.ConditionOperatorSkipped, invokes: 1, seqs: []string{"d2"}, at: at(63)}}
		// An operator skipped d2 after its first failure (esm skip).
		w.skips = []skipped{{inc: 1, k: poller.Skipped{ShardID: "g", First: "d2", Last: "d2", Records: 1, Attempts: 1, At: at(63)}}}
		// A rewind of the window [0, 2 ms) applied at 80 ms: the window's records of p replayed;
		// c (after the window) had been handled whole and is not invoked again.
		w.rewinds = []*rewound{{requested: at(70), applied: at(80), until: at(2),
			skip: map[string]poller.Rewind{"p": {SkipAll: true}, "c": {SkipAll: true}, "e": {SkipAll: true}, "g": {SkipAll: true}}}}
		// The replay aggregates window 0 of p afresh: its final counts the replay's 3 records
		// (d1, sent to the destination before the rewind, handled in the replay).
		w.calls = append(w.calls, &call{inc: 1, shard: "p", seqs: []string{"d1", "p1", "p2"}, handled: []string{"d1", "p1", "p2"}, keys: []string{"shard p"}, start: at(80), end: at(90), responded: true},
			&call{inc: 1, shard: "p", final: true, window: epoch, state: 3, keys: []string{"shard p"}, start: at(91), end: at(92), responded: true})
		w.calls = append(w.calls, &call{inc: 1, shard: "g", seqs: []string{"d2"}, keys: []string{"shard g"}, start: at(61), end: at(62), responded: true, failed: true})
		inc := &incarnation{id: 1, w: w, obs: &counts{polled: 8, invoked: 7, failed: 3, delivered: 2, filtered: 2, skipped: 1},
			polled: 8, invokedRecs: 7, failedInvokes: 3, delivered: 2, filtered: 2}
		return w, []*incarnation{inc}
	}
	judged := func(w *world, incs []*incarnation, returned int) Result {
		res := Result{Checked: map[string]int{}}
		w.check(&res, incs, returned)
		return res
	}

	w, incs := sound()
	res := judged(w, incs, 1)
	if res.Failed() {
		t.Fatalf("a sound history was judged broken: %v", res.Violations)
	}
	for _, inv := range Invariants {
		if res.Checked[inv] == 0 {
			t.Errorf("invariant %s judged nothing on the sound history", inv)
		}
	}

	tests := []struct {
		name     string
		kind     string // the violation's prefix
		mutate   func(w *world, inc *incarnation)
		returned int // workers whose Run returned (default: all)
	}{
		{"a record neither handled nor delivered", "lost:", func(w *world, _ *incarnation) { delete(w.handled, "c1") }, 0},
		{"a discarded record never delivered", "lost:", func(w *world, _ *incarnation) { delete(w.sent, "d1") }, 0},
		{"a record lost before its shard was trimmed", "lost:", func(w *world, _ *incarnation) {
			delete(w.handled, "g1")
			w.trimmed["g"] = true // trimmed, but the record was not pending at the trim: not excused
		}, 0},
		{"a key's records first seen out of order", "order:", func(w *world, _ *incarnation) {
			w.calls[2].seqs = []string{"p2", "p1"}
		}, 0},
		{"a key's record first seen in a later batch", "order:", func(w *world, _ *incarnation) {
			w.calls[2].seqs = []string{"p2"}
			w.calls[4].seqs = []string{"p1", "c1"}
		}, 0},
		{"a rewind's window record not invoked again", "rewind:", func(w *world, _ *incarnation) {
			w.calls[6].seqs = []string{"d1", "p2"}
		}, 0},
		{"a rewind's window replayed out of order", "rewind:", func(w *world, _ *incarnation) {
			w.calls[6].seqs = []string{"d1", "p2", "p1"}
		}, 0},
		{"a record after a rewind's window handled before it invoked again", "rewind:", func(w *world, _ *incarnation) {
			w.calls = append(w.calls, &call{inc: 1, shard: "c", seqs: []string{"c1"}, keys: []string{"shard c"}, start: at(95), end: at(99), responded: true})
		}, 0},
		{"a skipped batch sent to the destination twice", "skip:", func(w *world, _ *incarnation) {
			w.discards = append(w.discards, discard{inc: 1, condition: poller.ConditionOperatorSkipped, invokes: 1, seqs: []string{"d2"}, at: at(64)})
		}, 0},
		{"a skip the observer did not count", "skip:", func(_ *world, inc *incarnation) { inc.obs.skipped = 0 }, 0},
		{"a skip whose batch never reached the destination", "skip:", func(w *world, _ *incarnation) {
			w.discards = w.discards[:1]
		}, 0},
		{"a child invoked while its parent still ran", "lineage:", func(w *world, _ *incarnation) {
			w.calls[4].start = at(15)
		}, 0},
		{"a grandchild invoked while its grandparent ran (its parent had no invocation)", "lineage:", func(w *world, _ *incarnation) {
			w.calls[5].start, w.calls[5].end = at(15), at(16)
		}, 0},
		{"a finished parent invoked again after its child started", "lineage:", func(w *world, _ *incarnation) {
			w.calls = append(w.calls, &call{inc: 2, shard: "p", final: true, window: epoch.Add(time.Hour), keys: []string{"shard p"}, start: at(45), end: at(46)})
		}, 0},
		{"two invocations of a shard at once (PF 1)", "overlap:", func(w *world, _ *incarnation) {
			w.calls[3].start = at(15)
		}, 0},
		{"two invocations of a key at once (PF > 1), other keys overlapping freely", "overlap:", func(w *world, _ *incarnation) {
			w.s.PF = 2
			w.calls[0].keys, w.calls[1].keys = []string{"key z"}, []string{"key z"}
			w.calls[1].start = at(2)
			w.calls[2].keys, w.calls[3].keys = []string{"key a"}, []string{"key b"}
			w.calls[3].start = at(15)
		}, 0},
		{"a killed worker's invocation still running when the shard was invoked again", "overlap:", func(w *world, _ *incarnation) {
			w.calls = append(w.calls, &call{inc: 2, shard: "p", seqs: []string{"p1"}, keys: []string{"shard p"}, start: at(12), end: at(25), killed: true})
		}, 0},
		{"a window's final state miscounted", "window", func(w *world, _ *incarnation) { w.calls[3].state = 1 }, 0},
		{"a window's final state counting a filtered-out record", "window", func(w *world, _ *incarnation) { w.calls[3].state = 3 }, 0},
		{"a replayed window's final state carrying the state of before the rewind", "window", func(w *world, _ *incarnation) { w.calls[7].state = 5 }, 0},
		{"a replayed window's final state missing a record the replay handled", "window", func(w *world, _ *incarnation) { w.calls[7].state = 2 }, 0},
		{"an observer that missed an invocation", "observer", func(_ *world, inc *incarnation) { inc.obs.invoked = 5 }, 0},
		{"an observer that missed a delivery", "observer", func(_ *world, inc *incarnation) { inc.obs.delivered = 0 }, 0},
		{"an observer that counted a throttle that did not happen", "observer", func(_ *world, inc *incarnation) { inc.obs.throttled = 1 }, 0},
		{"a filtered-out record invoked", "filter:", func(w *world, inc *incarnation) {
			w.calls[2].seqs = []string{"p1", "pb", "p2"}
			inc.obs.invoked, inc.invokedRecs = 7, 7
		}, 0},
		{"filtered-out records not counted", "filter:", func(_ *world, inc *incarnation) { inc.obs.filtered = 0 }, 0},
		{"one retry too few", "retries:", func(w *world, _ *incarnation) { w.s.Retries = 2 }, 0},
		{"one retry too many", "retries:", func(w *world, _ *incarnation) { w.s.Retries = 0 }, 0},
		{"a failure record miscounting its invocations", "retries:", func(w *world, _ *incarnation) { w.discards[0].invokes = 3 }, 0},
		{"a worker whose Run never returned", "goroutines:", func(*world, *incarnation) {}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, incs := sound()
			tt.mutate(w, incs[0])
			returned := len(incs)
			if tt.returned < 0 {
				returned += tt.returned
			}
			res := judged(w, incs, returned)
			if len(res.Violations) == 0 {
				t.Fatalf("no violation, want one starting %q", tt.kind)
			}
			for _, v := range res.Violations {
				if !strings.HasPrefix(v, tt.kind) {
					t.Fatalf("violations %q, want only ones starting %q", res.Violations, tt.kind)
				}
			}
		})
	}
}

// TestOnlineChecksJudge covers the invariants judged while a run goes on rather than after it:
// a checkpoint may cover only records that were handled, delivered or filtered, and it may land
// at DynamoDB only on a lease its writer owns with the counter the writer left there. Each must
// pass its sound cases and fail every broken one.
func TestOnlineChecksJudge(t *testing.T) {
	newWorld := func() *world {
		w := &world{
			s:        Schedule{PF: 1},
			now:      func() time.Time { return epoch },
			recs:     map[string]*rec{"1": {seq: "1", key: "a", shard: "s"}, "2": {seq: "2", key: "a", shard: "s", n: 1}, "3": {seq: "3", key: "a", shard: "s", n: 2, tag: "b"}},
			handled:  map[string]bool{"1": true},
			sent:     map[string]bool{},
			errKinds: map[string]int{},
			tenure:   map[string]int64{},
		}
		w.byShard = map[string][]*rec{"s": {w.recs["1"], w.recs["2"], w.recs["3"]}}
		return w
	}
	t.Run("checkpoint", func(t *testing.T) {
		sound := []poller.ShardProgress{{Checkpoint: "1"}}
		broken := []struct {
			name string
			pr   poller.ShardProgress
			prep func(w *world)
		}{
			{"past an unhandled record", poller.ShardProgress{Checkpoint: "2"}, nil},
			{"finished with a record unhandled", poller.ShardProgress{Finished: true}, nil},
			{"past a tag-b record without a filter", poller.ShardProgress{Checkpoint: "3"}, func(w *world) { w.handled["2"] = true }},
		}
		w := newWorld()
		for _, pr := range sound {
			w.checkCheckpointLocked("s", pr)
		}
		w.s.Filter = true
		w.handled["2"] = true
		w.checkCheckpointLocked("s", poller.ShardProgress{Finished: true}) // tag b filtered out
		if len(w.errs) != 0 || w.cpJudged == 0 {
			t.Fatalf("sound checkpoints judged broken (%v) or not judged (%d)", w.errs, w.cpJudged)
		}
		for _, b := range broken {
			w := newWorld()
			if b.prep != nil {
				b.prep(w)
			}
			w.checkCheckpointLocked("s", b.pr)
			if len(w.errs) != 1 || !strings.HasPrefix(w.errs[0], "checkpoint ") {
				t.Errorf("%s: violations %q, want one for the checkpoint", b.name, w.errs)
			}
		}
	})
	t.Run("fencing", func(t *testing.T) {
		ctx := context.Background()
		fencingWorld := func() *world {
			w := newWorld()
			w.db = fakedynamo.New()
			if err := lease.EnsureTable(ctx, w.db, leaseTable, true); err != nil {
				t.Fatal(err)
			}
			return w
		}
		setLease := func(w *world, owner string, counter int) func() error {
			return func() error {
				_, err := w.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(leaseTable), Item: map[string]dtypes.AttributeValue{
					"leaseKey": &dtypes.AttributeValueMemberS{Value: "s"}, "leaseOwner": &dtypes.AttributeValueMemberS{Value: owner},
					"leaseCounter": &dtypes.AttributeValueMemberN{Value: fmt.Sprint(counter)}}})
				return err
			}
		}
		// Sound: a takes the lease at counter 1, checkpoints at 1; b takes it at 2; a's
		// checkpoint sent at 1 fails its condition (nothing applied).
		w := fencingWorld()
		_ = w.fenced("a", "s", false, 0, false, setLease(w, "a", 1), nil)
		_ = w.fenced("a", "s", true, 1, true, setLease(w, "a", 1), nil)
		_ = w.fenced("b", "s", false, 0, false, setLease(w, "b", 2), nil)
		_ = w.fenced("a", "s", true, 1, true, func() error { return errors.New("condition failed") }, nil)
		if len(w.errs) != 0 || w.cpJudged != 1 || w.tenure["a|s"] != 1 || w.tenure["b|s"] != 2 {
			t.Fatalf("sound writes: violations %q, %d judged, tenure %v", w.errs, w.cpJudged, w.tenure)
		}
		broken := []struct {
			name string
			run  func(w *world)
			want string
		}{
			{"no fencing: a stale checkpoint lands on another's lease", func(w *world) {
				_ = w.fenced("a", "s", false, 0, false, setLease(w, "a", 1), nil)
				_ = w.fenced("b", "s", false, 0, false, setLease(w, "b", 2), nil)
				_ = w.fenced("a", "s", true, 1, true, setLease(w, "b", 2), nil)
			}, "held by"},
			{"fencing on the owner alone: a checkpoint of an earlier tenure lands", func(w *world) {
				_ = w.fenced("a", "s", false, 0, false, setLease(w, "a", 1), nil)
				_ = w.fenced("b", "s", false, 0, false, setLease(w, "b", 2), nil)
				_ = w.fenced("a", "s", false, 0, false, setLease(w, "a", 3), nil)
				_ = w.fenced("a", "s", true, 1, true, setLease(w, "a", 3), nil) // sent during the first tenure
			}, "sent at its counter 1"},
			{"a checkpoint by a worker that never took the lease", func(w *world) {
				_ = w.fenced("b", "s", false, 0, false, setLease(w, "", 1), nil)
				_ = w.fenced("a", "s", true, 0, false, setLease(w, "", 1), nil)
			}, "held by"},
		}
		for _, b := range broken {
			w := fencingWorld()
			b.run(w)
			if len(w.errs) != 1 || !strings.HasPrefix(w.errs[0], "fencing: ") || !strings.Contains(w.errs[0], b.want) {
				t.Errorf("%s: violations %q, want one fencing violation containing %q", b.name, w.errs, b.want)
			}
		}
	})
	t.Run("expiry", func(t *testing.T) {
		now := epoch
		w := newWorld()
		w.now = func() time.Time { return now }
		w.s.LeaseDuration = 10 * time.Second
		w.beats = map[string]time.Time{}
		beat := func(owner string) {
			w.rosterWrite(owner, &dynamodb.UpdateItemInput{UpdateExpression: aws.String("SET #m.#me.#h = :h, #m.#me.#u = :u"),
				ExpressionAttributeNames: map[string]string{"#me": owner}})()
		}
		declare := func(by, dead string) {
			w.rosterWrite(by, &dynamodb.UpdateItemInput{UpdateExpression: aws.String("REMOVE #m.#w SET #g.#k = :tomb"),
				ExpressionAttributeNames: map[string]string{"#w": dead}})()
		}
		beat("a")
		beat("b")
		now = now.Add(10 * time.Second)
		declare("b", "a") // a whole lease after a's last heartbeat
		if len(w.errs) != 0 || w.declared != 1 {
			t.Fatalf("a declaration a lease after the last heartbeat: violations %q, %d judged", w.errs, w.declared)
		}
		for _, after := range []time.Duration{5 * time.Second, 8900 * time.Millisecond, 0} {
			w.errs = nil
			beat("c")
			now = now.Add(after)
			declare("b", "c") // judged expired too soon
			if len(w.errs) != 1 || !strings.HasPrefix(w.errs[0], "expiry: ") {
				t.Errorf("declared dead %s after its heartbeat: violations %q, want one expiry violation", after, w.errs)
			}
		}
		// Workers of different lease durations: judged by the dead worker's own.
		w.s.Leases = []time.Duration{10 * time.Second, 30 * time.Second}
		w.errs = nil
		beat("worker-1-2")
		now = now.Add(20 * time.Second)
		declare("worker-0-1", "worker-1-2")
		if len(w.errs) != 1 || !strings.HasPrefix(w.errs[0], "expiry: ") {
			t.Errorf("a worker whose lease is 30 s declared dead 20 s after its heartbeat by one whose lease is 10 s: violations %q, want one expiry violation", w.errs)
		}
	})
}
