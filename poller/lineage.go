package poller

import (
	"context"
	"maps"
	"slices"

	"github.com/kinesis-esm/esm/source"
)

// lineage is the shard graph of a stream and the one record of each shard's state here: which
// shards are being read (running) and which are finished. It decides which shards may be read: a
// shard may start when the graph knows it, it is not finished, not being read, and every parent is
// finished and neither that parent nor any of its ancestors is still being read. A parent is
// finished when the store says so, when a shard below it was read, when its reader read it to its
// end, or when a complete ListShards no longer returns it (retention trimmed it away). A parent
// that is merely unknown (a child learnt from ChildShards whose other parent was never listed)
// blocks its child until the next listing settles it.
//
// The coordinator tells it what happened (listings, ChildShards, the store's progress, a reader
// started or ended) and asks it what may start, what runs and what is finished; it keeps no copy
// of its own. It is owned by the coordinator goroutine and needs no locking.
type lineage struct {
	shards map[string]*shardNode
	// finished: finished or trimmed. It may name shards the graph has no node for (parents
	// trimmed before they were listed, shards the store says are finished).
	finished map[string]bool
	// running: the shards being read here, each with what stops its reader. A shard stays
	// running from start until ended, also after it was asked to stop or found trimmed.
	running map[string]context.CancelFunc
	// askedChildren: finished shards whose children were looked for (see childrenUnknown).
	askedChildren map[string]bool
}

type shardNode struct {
	id      string
	parents []string
	// listed: returned by the last complete ListShards.
	listed bool
}

func newLineage() *lineage {
	return &lineage{shards: map[string]*shardNode{}, finished: map[string]bool{},
		running: map[string]context.CancelFunc{}, askedChildren: map[string]bool{}}
}

// sync merges a complete ListShards result. Shards that were listed before but are no longer, and
// parents of listed shards that are not listed themselves, were trimmed by retention: they count as
// finished.
func (g *lineage) sync(listed []source.Shard) {
	seen := make(map[string]bool, len(listed))
	for _, s := range listed {
		id := s.ID
		seen[id] = true
		n := g.shards[id]
		if n == nil {
			n = &shardNode{id: id}
			g.shards[id] = n
		}
		n.parents = slices.Clone(s.Parents)
		n.listed = true
	}
	for id, n := range g.shards {
		if !seen[id] {
			// Only a shard that was listed before and is gone now was trimmed; one learnt from
			// ChildShards that a listing does not show yet is left alone.
			if n.listed {
				g.finished[id] = true
			}
			n.listed = false
			continue
		}
		for _, p := range n.parents {
			if !seen[p] {
				g.finished[p] = true
			}
		}
	}
}

// addChildren records shards announced by ChildShards. It reports whether a child names a parent
// the graph has never seen, in which case a listing is needed before that child may start.
func (g *lineage) addChildren(children []source.Shard) (unknownParent bool) {
	for _, c := range children {
		id := c.ID
		if g.shards[id] == nil {
			g.shards[id] = &shardNode{id: id, parents: slices.Clone(c.Parents)}
		}
		for _, p := range c.Parents {
			if g.shards[p] == nil && !g.finished[p] {
				unknownParent = true
			}
		}
	}
	return unknownParent
}

// syncProgress takes what the store says: the shards it says are finished are, and so is every
// ancestor of a shard it says was read (a checkpoint, or finished). A child is read only once its
// parents are finished, so whatever the store says of a parent, it is never read again (a lease
// created again after its finished one was deleted, or a progress this worker loaded before).
func (g *lineage) syncProgress(progress map[string]ShardProgress) {
	for id, pr := range progress {
		if pr.Finished {
			g.finished[id] = true
		}
		if pr.Finished || pr.Checkpoint != "" {
			g.markAncestorsFinished(id)
		}
	}
}

// markAncestorsFinished marks finished every ancestor of a shard that was read.
func (g *lineage) markAncestorsFinished(id string) {
	seen := map[string]bool{id: true}
	for queue := []string{id}; len(queue) > 0; queue = queue[1:] {
		if n := g.shards[queue[0]]; n != nil {
			for _, p := range n.parents {
				if !seen[p] {
					seen[p] = true
					g.finished[p] = true
					queue = append(queue, p)
				}
			}
		}
	}
}

// childrenUnknown reports whether a shard the store says is finished has no child in the graph,
// once per shard: the worker that finished it knew its children from ChildShards, and may have
// died before anyone listed them. A listing then finds them at once, not at the next shard sync.
func (g *lineage) childrenUnknown(progress map[string]ShardProgress) bool {
	var parents map[string]bool
	unknown := false
	for id, pr := range progress {
		if !pr.Finished || g.shards[id] == nil || g.askedChildren[id] {
			continue
		}
		if parents == nil {
			parents = g.parentsWithChildren()
		}
		if !parents[id] {
			g.askedChildren[id] = true
			unknown = true
		}
	}
	return unknown
}

// parentsWithChildren are the shards some shard of the graph names as a parent.
func (g *lineage) parentsWithChildren() map[string]bool {
	out := map[string]bool{}
	for _, n := range g.shards {
		for _, p := range n.parents {
			out[p] = true
		}
	}
	return out
}

// start records that a reader of id runs, stopped by stop, if id may start now (see canStart);
// it reports whether it did. A shard refused (finished, already running, unknown to the graph,
// or held back by a parent) is not started: whatever a Coordinator hands this worker, the graph
// has the last word on lineage.
func (g *lineage) start(id string, stop context.CancelFunc) bool {
	if !g.canStart(id) {
		return false
	}
	g.running[id] = stop
	return true
}

// canStart reports whether id may start now.
func (g *lineage) canStart(id string) bool {
	var reading map[string]bool
	n := g.shards[id]
	return n != nil && g.startable(n, &reading)
}

// startable is canStart for a node, with the memo of readingAbove of one call.
func (g *lineage) startable(n *shardNode, reading *map[string]bool) bool {
	if _, running := g.running[n.id]; running || g.finished[n.id] {
		return false
	}
	for _, p := range n.parents {
		if g.blocks(p, reading) {
			return false
		}
	}
	return true
}

// ended records that id's reader ended, its shard read to its end when finished is true (its
// children may follow once their other parents are finished too). Stopped for any other reason,
// the shard may start again. It releases the reader's context.
func (g *lineage) ended(id string, finished bool) {
	if stop := g.running[id]; stop != nil {
		stop()
	}
	delete(g.running, id)
	if finished {
		g.finished[id] = true
	}
}

// stop asks id's reader to stop; the shard runs until its reader ended (see ended).
func (g *lineage) stop(id string) {
	if stop := g.running[id]; stop != nil {
		stop()
	}
}

// isRunning reports whether id is being read here.
func (g *lineage) isRunning(id string) bool {
	_, ok := g.running[id]
	return ok
}

// isFinished reports whether id is finished (or trimmed).
func (g *lineage) isFinished(id string) bool { return g.finished[id] }

// runningShards returns the shards being read here, in shard id order.
func (g *lineage) runningShards() []string { return slices.Sorted(maps.Keys(g.running)) }

// readers is how many shards are being read here.
func (g *lineage) readers() int { return len(g.running) }

// ready returns the shards that may start now, in shard id order.
func (g *lineage) ready() []string {
	var out []string
	var reading map[string]bool // memo of readingAbove, for this call
	for id, n := range g.shards {
		if g.startable(n, &reading) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// waitingOn returns the parents a shard waits for: unfinished, or trimmed but still being read
// (or above a shard still being read).
func (g *lineage) waitingOn(id string) []string {
	var out []string
	var reading map[string]bool
	if n := g.shards[id]; n != nil {
		for _, p := range n.parents {
			if g.blocks(p, &reading) {
				out = append(out, p)
			}
		}
	}
	return out
}

// observed is what an observer is told of a shard after a listing: StateFinished, StatePending
// (not being read, and waiting on a parent), or "" (being read, or free to start).
func (g *lineage) observed(id string) string {
	switch {
	case g.finished[id]:
		return StateFinished
	case !g.isRunning(id) && len(g.waitingOn(id)) > 0:
		return StatePending
	}
	return ""
}

// blocks reports whether parent p keeps its children waiting: it is not finished, or it is still
// being read, or (a shard trimmed by retention counts as finished without being read) one of its
// ancestors is still being read. A parent trimmed before it ran must not let its children pass
// the records its own parents still have in flight.
func (g *lineage) blocks(p string, reading *map[string]bool) bool {
	return !g.finished[p] || g.isRunning(p) || (len(g.running) > 0 && g.readingAbove(p, reading))
}

// readingAbove reports whether an ancestor of id is being read. memo, made on first use, holds
// the answers of one ready or waitingOn call.
func (g *lineage) readingAbove(id string, memo *map[string]bool) bool {
	if *memo == nil {
		*memo = map[string]bool{}
	}
	if v, ok := (*memo)[id]; ok {
		return v
	}
	(*memo)[id] = false // a graph from listings has no cycles; this guards against one anyway
	n := g.shards[id]
	if n == nil {
		return false
	}
	for _, p := range n.parents {
		if g.isRunning(p) || g.readingAbove(p, memo) {
			(*memo)[id] = true
			return true
		}
	}
	return false
}
