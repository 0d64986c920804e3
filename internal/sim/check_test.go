package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// TestCheckerJudges gives the checker one small history that keeps every invariant (a parent
// shard, then its child, one key, one window, one worker whose observer agrees) and the same
// history broken once per invariant: the sound one must pass, having judged every invariant, and
// each broken one must fail with its own kind of violation.
func TestCheckerJudges(t *testing.T) {
	at := func(ms int) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }
	sound := func() (*world, []*incarnation) {
		w := &world{
			s: Schedule{Window: time.Minute},
			recs: map[string]*rec{
				"p1": {seq: "p1", key: "a", shard: "p", n: 0, at: at(0)},
				"p2": {seq: "p2", key: "a", shard: "p", n: 1, at: at(1)},
				"c1": {seq: "c1", key: "a", shard: "c", n: 2, at: at(2)},
			},
			parents: map[string][]string{"c": {"p"}},
			trimmed: map[string]bool{},
			handled: map[string]bool{"p1": true, "p2": true, "c1": true},
			sent:    map[string]bool{},
			saves:   2,
		}
		w.byShard = map[string][]*rec{"p": {w.recs["p1"], w.recs["p2"]}, "c": {w.recs["c1"]}}
		w.calls = []*call{
			{inc: 1, shard: "p", seqs: []string{"p1", "p2"}, start: at(10), end: at(20), responded: true},
			{inc: 1, shard: "p", final: true, window: epoch, state: 2, start: at(21), end: at(22), responded: true},
			{inc: 1, shard: "c", seqs: []string{"c1"}, start: at(30), end: at(40), responded: true},
		}
		inc := &incarnation{id: 1, w: w, obs: &counts{polled: 3, invoked: 3}, polled: 3, invokedRecs: 3}
		return w, []*incarnation{inc}
	}
	judged := func(w *world, incs []*incarnation) Result {
		res := Result{Checked: map[string]int{}}
		w.check(&res, incs, len(incs))
		return res
	}

	res := judged(sound())
	if res.Failed() {
		t.Fatalf("a sound history was judged broken: %v", res.Violations)
	}
	for _, inv := range []string{InvLost, InvOrder, InvLineage, InvOverlap, InvCheckpoint, InvWindow, InvObserver, InvGoroutines} {
		if res.Checked[inv] == 0 {
			t.Errorf("invariant %s judged nothing on the sound history", inv)
		}
	}

	tests := []struct {
		name   string
		kind   string // the violation's prefix
		mutate func(w *world, incs []*incarnation)
	}{
		{"a record neither handled nor delivered", "lost:", func(w *world, _ []*incarnation) { delete(w.handled, "c1") }},
		{"a key's records first seen out of order", "order:", func(w *world, _ []*incarnation) {
			w.calls[0].seqs = []string{"p2", "p1"}
		}},
		{"a child invoked while its parent still ran", "lineage:", func(w *world, _ []*incarnation) {
			w.calls[2].start = at(15)
		}},
		{"a window's final state miscounted", "window", func(w *world, _ []*incarnation) { w.calls[1].state = 1 }},
		{"an observer that missed an invocation", "observer", func(_ *world, incs []*incarnation) { incs[0].obs.invoked = 2 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, incs := sound()
			tt.mutate(w, incs)
			res := judged(w, incs)
			if len(res.Violations) != 1 || !strings.HasPrefix(res.Violations[0], tt.kind) {
				t.Fatalf("violations %q, want one starting %q", res.Violations, tt.kind)
			}
		})
	}
}

// TestOnlineChecksJudge covers the two invariants judged while a run goes on rather than after
// it: a checkpoint may cover only records that were handled, delivered or filtered, and two
// invocations of one shard (PF 1) may not overlap. Each must pass its sound case and fail its
// broken one.
func TestOnlineChecksJudge(t *testing.T) {
	newWorld := func() *world {
		w := &world{
			s:        Schedule{PF: 1},
			now:      func() time.Time { return epoch },
			recs:     map[string]*rec{"1": {seq: "1", key: "a", shard: "s"}, "2": {seq: "2", key: "a", shard: "s", n: 1}},
			handled:  map[string]bool{"1": true},
			sent:     map[string]bool{},
			errKinds: map[string]int{},
		}
		w.byShard = map[string][]*rec{"s": {w.recs["1"], w.recs["2"]}}
		return w
	}
	t.Run("checkpoint", func(t *testing.T) {
		w := newWorld()
		w.checkCheckpointLocked("s", poller.ShardProgress{Checkpoint: "1"})
		if len(w.errs) != 0 {
			t.Fatalf("a checkpoint over a handled record was judged broken: %v", w.errs)
		}
		w.checkCheckpointLocked("s", poller.ShardProgress{Checkpoint: "2"})
		if len(w.errs) != 1 || !strings.HasPrefix(w.errs[0], "checkpoint 2 of s") {
			t.Fatalf("violations %q, want one for the checkpoint passing unhandled record 2", w.errs)
		}
	})
	t.Run("overlap", func(t *testing.T) {
		w := newWorld()
		inv := simInvoker{inc: &incarnation{id: 1, w: w}}
		first := &call{inc: 1, shard: "s", seqs: []string{"1"}}
		inv.begin(first)
		if _, err := inv.end(first, outcome{failedAt: -1}, nil); err != nil {
			t.Fatal(err)
		}
		inv.begin(&call{inc: 1, shard: "s", seqs: []string{"2"}}) // after the first ended
		if len(w.errs) != 0 {
			t.Fatalf("invocations one after the other were judged overlapping: %v", w.errs)
		}
		inv.begin(&call{inc: 1, shard: "s", seqs: []string{"2"}}) // while the second runs
		if len(w.errs) != 1 || !strings.HasPrefix(w.errs[0], "overlapping invocations of shard s") {
			t.Fatalf("violations %q, want one overlap", w.errs)
		}
	})
}
