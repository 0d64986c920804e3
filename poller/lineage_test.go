package poller

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// graphRun is one case of TestLineageTransitions: a graph and the contexts of the readers its
// steps started.
type graphRun struct {
	t    *testing.T
	g    *lineage
	ctxs map[string]context.Context
}

// graphStep is one transition of the graph, or a check of what it says after the steps before.
type graphStep func(r *graphRun)

func listed(shards ...types.Shard) graphStep {
	return func(r *graphRun) { r.g.sync(kinesissrc.ShardsOf(shards)) }
}

func stored(progress map[string]ShardProgress) graphStep {
	return func(r *graphRun) { r.g.syncProgress(progress) }
}

// childShards: a reader saw the shard's end with these children of parents.
func childShards(wantUnknown bool, id string, parents ...string) graphStep {
	return func(r *graphRun) {
		r.t.Helper()
		if got := r.g.addChildren(kinesissrc.Children([]types.ChildShard{{ShardId: aws.String(id), ParentShards: parents}})); got != wantUnknown {
			r.t.Fatalf("addChildren(%s of %v) reported an unknown parent %v, want %v", id, parents, got, wantUnknown)
		}
	}
}

// started: a reader of id starts (the graph must let it).
func started(id string) graphStep {
	return func(r *graphRun) {
		r.t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		if !r.g.start(id, cancel) {
			cancel()
			r.t.Fatalf("start(%s) refused; running %v, finished %v", id, r.g.runningShards(), r.g.finished)
		}
		r.ctxs[id] = ctx
	}
}

// refused: the graph does not let a reader of id start, and nothing about id changes.
func refused(id string) graphStep {
	return func(r *graphRun) {
		r.t.Helper()
		wasRunning, wasFinished := r.g.isRunning(id), r.g.isFinished(id)
		called := false
		if r.g.canStart(id) || r.g.start(id, func() { called = true }) {
			r.t.Fatalf("start(%s) allowed; running %v, finished %v", id, r.g.runningShards(), r.g.finished)
		}
		if called || r.g.isRunning(id) != wasRunning || r.g.isFinished(id) != wasFinished {
			r.t.Fatalf("a refused start(%s) changed its state", id)
		}
	}
}

// ended: id's reader ended, read to its end when finished.
func ended(id string, finished bool) graphStep {
	return func(r *graphRun) {
		r.t.Helper()
		r.g.ended(id, finished)
		if ctx := r.ctxs[id]; ctx == nil || ctx.Err() == nil {
			r.t.Fatalf("ended(%s) did not release its reader's context", id)
		}
	}
}

// stopped: id's reader is asked to stop; its context ends, the shard still runs.
func stopped(id string) graphStep {
	return func(r *graphRun) {
		r.t.Helper()
		r.g.stop(id)
		if ctx := r.ctxs[id]; ctx == nil || ctx.Err() == nil {
			r.t.Fatalf("stop(%s) did not cancel its reader", id)
		}
		if !r.g.isRunning(id) {
			r.t.Fatalf("stop(%s): the shard no longer runs before its reader ended", id)
		}
	}
}

func wantReady(ids ...string) graphStep {
	return func(r *graphRun) {
		r.t.Helper()
		if got := r.g.ready(); !slices.Equal(got, ids) {
			r.t.Fatalf("ready = %v, want %v", got, ids)
		}
	}
}

func wantRunning(ids ...string) graphStep {
	return func(r *graphRun) {
		r.t.Helper()
		if got := r.g.runningShards(); !slices.Equal(got, ids) {
			r.t.Fatalf("running = %v, want %v", got, ids)
		}
		if r.g.readers() != len(ids) {
			r.t.Fatalf("readers = %d, want %d", r.g.readers(), len(ids))
		}
	}
}

func wantFinished(ids ...string) graphStep {
	return func(r *graphRun) {
		r.t.Helper()
		if got := slices.Sorted(maps.Keys(r.g.finished)); !slices.Equal(got, ids) {
			r.t.Fatalf("finished = %v, want %v", got, ids)
		}
	}
}

func wantWaiting(id string, parents ...string) graphStep {
	return func(r *graphRun) {
		r.t.Helper()
		if got := r.g.waitingOn(id); !slices.Equal(got, parents) {
			r.t.Fatalf("%s waits on %v, want %v", id, got, parents)
		}
	}
}

func wantObserved(id, state string) graphStep {
	return func(r *graphRun) {
		r.t.Helper()
		if got := r.g.observed(id); got != state {
			r.t.Fatalf("%s observed %q, want %q", id, got, state)
		}
	}
}

func wantChildrenUnknown(progress map[string]ShardProgress, want bool) graphStep {
	return func(r *graphRun) {
		r.t.Helper()
		if got := r.g.childrenUnknown(progress); got != want {
			r.t.Fatalf("childrenUnknown = %v, want %v", got, want)
		}
	}
}

// TestLineageTransitions: the graph's answers (which shards may start, which run, which are
// finished, what each waits on) through the transitions the coordinator tells it of.
func TestLineageTransitions(t *testing.T) {
	finishedElsewhere := map[string]ShardProgress{"0": {Finished: true}}
	tests := []struct {
		name  string
		steps []graphStep
	}{
		{"split: both children wait for the parent's reader to end at the shard's end", []graphStep{
			listed(closed(shard("0")), shard("1", "0"), shard("2", "0")),
			wantReady("0"), wantObserved("1", StatePending),
			started("0"), wantReady(), wantRunning("0"), wantWaiting("1", "0"), wantObserved("0", ""),
			refused("1"), refused("2"),
			ended("0", true), wantRunning(), wantFinished("0"), wantReady("1", "2"), wantWaiting("1"),
			wantObserved("0", StateFinished), wantObserved("1", ""),
			started("1"), started("2"), wantRunning("1", "2"),
		}},
		{"merge: the child waits for both parents", []graphStep{
			listed(closed(shard("0")), closed(shard("1")), shard("2", "0", "1")),
			wantReady("0", "1"), wantWaiting("2", "0", "1"),
			started("0"), started("1"),
			ended("0", true), wantReady(), wantWaiting("2", "1"), refused("2"),
			ended("1", true), wantReady("2"), wantFinished("0", "1"),
			started("2"),
		}},
		{"a reader stopped before the end (hand-over, lost lease) leaves its shard to start again", []graphStep{
			listed(closed(shard("0")), shard("1", "0")),
			started("0"), stopped("0"), refused("0"), refused("1"),
			ended("0", false), wantRunning(), wantFinished(), wantReady("0"), wantWaiting("1", "0"),
			started("0"),
		}},
		{"a parent finished elsewhere frees its children and never starts here", []graphStep{
			listed(closed(shard("0")), shard("1", "0")),
			stored(finishedElsewhere), wantFinished("0"), wantReady("1"), refused("0"),
			started("1"),
		}},
		{"a child read elsewhere (a checkpoint) finishes every ancestor", []graphStep{
			listed(closed(shard("0")), closed(shard("1", "0")), shard("2", "1")),
			stored(map[string]ShardProgress{"2": {Checkpoint: "5"}}),
			wantFinished("0", "1"), wantReady("2"), refused("0"), refused("1"),
		}},
		{"a child claimed before its parent finished is refused", []graphStep{
			listed(closed(shard("0")), closed(shard("1")), shard("2", "0", "1")),
			refused("2"),
			started("0"), refused("2"),
			ended("0", true), refused("2"), // its other parent is not finished
			started("1"), refused("2"),
			ended("1", true), started("2"), wantRunning("2"),
		}},
		{"a shard claimed again while it runs is not started twice", []graphStep{
			listed(shard("0")),
			started("0"), refused("0"), wantRunning("0"), wantReady(),
		}},
		{"a shard unknown to the graph is not started", []graphStep{
			listed(shard("0")), refused("9"),
		}},
		{"a finished shard never starts again, whatever a later listing or the store says", []graphStep{
			listed(closed(shard("0")), shard("1", "0")),
			started("0"), ended("0", true),
			listed(closed(shard("0")), shard("1", "0")),
			stored(map[string]ShardProgress{"0": {Checkpoint: "3"}}),
			refused("0"), wantReady("1"), wantFinished("0"),
		}},
		{"a shard trimmed while being read runs until its reader ended; its children wait", []graphStep{
			listed(closed(shard("0")), shard("1", "0")),
			started("0"),
			listed(shard("1", "0")), wantFinished("0"), wantRunning("0"), wantWaiting("1", "0"), refused("1"),
			stopped("0"), ended("0", false), wantFinished("0"), wantReady("1"),
		}},
		{"an ancestor started in the same pass holds back a descendant below a trimmed parent", []graphStep{
			// 1 is the child of 0, 2 the child of 1; 1 was listed, then trimmed while 0 is still listed.
			listed(closed(shard("0")), closed(shard("1", "0")), shard("2", "1")),
			listed(closed(shard("0")), shard("2", "1")),
			wantFinished("1"), wantReady("0", "2"),
			started("0"), refused("2"), wantWaiting("2", "1"),
			ended("0", true), started("2"),
		}},
		{"a child of ChildShards with a parent never listed waits for the listing", []graphStep{
			listed(closed(shard("0"))),
			started("0"), ended("0", true),
			childShards(true, "7", "0", "6"), wantReady(), wantWaiting("7", "6"),
			listed(closed(shard("0")), shard("6")), wantReady("6"), refused("7"),
			started("6"), ended("6", true), wantReady("7"),
		}},
		{"the children of a shard finished elsewhere are looked for once, and not when known", []graphStep{
			listed(closed(shard("0"))),
			wantChildrenUnknown(finishedElsewhere, true),
			wantChildrenUnknown(finishedElsewhere, false),
			listed(closed(shard("3"))),
			childShards(false, "4", "3"),
			wantChildrenUnknown(map[string]ShardProgress{"3": {Finished: true}}, false),
			wantChildrenUnknown(map[string]ShardProgress{"9": {Finished: true}}, false), // no node: a listing shows it
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &graphRun{t: t, g: newLineage(), ctxs: map[string]context.Context{}}
			for _, s := range tt.steps {
				s(r)
			}
		})
	}
}

func TestLineageReadiness(t *testing.T) {
	r := &graphRun{t: t, g: newLineage(), ctxs: map[string]context.Context{}}
	// 0 split into 2,3; 2 and 1 merged into 4.
	for _, s := range []graphStep{
		listed(closed(shard("0")), closed(shard("1")), closed(shard("2", "0")), shard("3", "0"), shard("4", "1", "2")),
		wantReady("0", "1"), // the roots
		started("0"), started("1"), ended("0", true),
		wantReady("2", "3"), // after 0 finished
		started("2"), started("3"), ended("2", true),
		wantReady(), // the merge child waits for both parents
		wantWaiting("4", "1"),
		ended("1", true),
		wantReady("4"), // after both parents
	} {
		s(r)
	}
}

func TestLineageTrimmedParentCountsAsFinished(t *testing.T) {
	g := newLineage()
	g.sync(kinesissrc.ShardsOf([]types.Shard{shard("5", "1", "2")})) // parents trimmed by retention
	if got := g.ready(); !slices.Equal(got, []string{"5"}) {
		t.Fatalf("ready = %v, want [5]", got)
	}
	// A shard that was listed and disappears was trimmed while unread.
	g2 := newLineage()
	g2.sync(kinesissrc.ShardsOf([]types.Shard{shard("0"), shard("1", "0")}))
	g2.sync(kinesissrc.ShardsOf([]types.Shard{shard("1", "0")}))
	if !g2.isFinished("0") {
		t.Fatal("shard 0 vanished from the listing but is not counted finished")
	}
}

func TestLineageChildWithUnknownParentWaitsForListing(t *testing.T) {
	g := newLineage()
	g.sync(kinesissrc.ShardsOf([]types.Shard{closed(shard("0"))}))
	if !g.start("0", func() {}) {
		t.Fatal("shard 0 did not start")
	}
	g.ended("0", true)
	// 0 ended; its child 7 was merged from 0 and 6, which this worker has never seen.
	unknown := g.addChildren(kinesissrc.Children([]types.ChildShard{{ShardId: aws.String("7"), ParentShards: []string{"0", "6"}}}))
	if !unknown {
		t.Fatal("addChildren did not report the unknown parent")
	}
	if got := g.ready(); len(got) != 0 {
		t.Fatalf("child with an unknown parent started: %v", got)
	}
	// A listing that does not show the just-created child yet must not count it trimmed.
	g.sync(kinesissrc.ShardsOf([]types.Shard{closed(shard("0")), shard("6")}))
	if g.isFinished("7") {
		t.Fatal("an unlisted child learnt from ChildShards was taken as trimmed")
	}
	if got := g.ready(); !slices.Equal(got, []string{"6"}) {
		t.Fatalf("ready = %v, want [6] (7 still waits on 6)", got)
	}
}

// TestLineageTrimmedParentWaitsForItsParents: a merge child trimmed before it was read counts as
// finished, but while one of its own parents is still being read (a batch in flight after its
// shard was trimmed), the merge child's children wait: their records follow that parent's
// (simulation seed 588 started them while the grandparent was still invoking).
func TestLineageTrimmedParentWaitsForItsParents(t *testing.T) {
	g := newLineage()
	// 0 and 1 merged into 2, which split into 3 and 4; 1 is still being read.
	g.sync(kinesissrc.ShardsOf([]types.Shard{closed(shard("0")), closed(shard("1")), closed(shard("2", "0", "1")), shard("3", "2"), shard("4", "2")}))
	if !g.start("0", func() {}) || !g.start("1", func() {}) {
		t.Fatal("the roots did not start")
	}
	g.ended("0", true)
	// Retention trims 0, 1 and 2: the listing shows only 3 and 4.
	g.sync(kinesissrc.ShardsOf([]types.Shard{shard("3", "2"), shard("4", "2")}))
	if !g.isFinished("1") || !g.isFinished("2") {
		t.Fatalf("trimmed shards not counted finished: %v", g.finished)
	}
	if got := g.ready(); len(got) != 0 {
		t.Fatalf("ready = %v while the grandparent 1 is still being read, want none", got)
	}
	if w := g.waitingOn("3"); !slices.Equal(w, []string{"2"}) {
		t.Fatalf("3 waits on %v, want [2]", w)
	}
	g.ended("1", false) // its reader ended
	if got := g.ready(); !slices.Equal(got, []string{"3", "4"}) {
		t.Fatalf("ready = %v after the grandparent's reader ended, want [3 4]", got)
	}
	if w := g.waitingOn("3"); len(w) != 0 {
		t.Fatalf("3 still waits on %v", w)
	}
}
