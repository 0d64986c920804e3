package poller

import (
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// lineage is the shard graph of a stream and what is known of each shard's progress. It decides
// which shards may be read: a shard is ready when it is not finished, not being read, and every
// parent is finished and neither it nor any of its ancestors is still being read. A parent is
// finished when the store says so, or when a complete ListShards no longer returns it (retention
// trimmed it away). A parent that is merely unknown (a child learnt from ChildShards whose other
// parent was never listed) blocks its child until the next listing settles it. It is owned by the
// coordinator goroutine and needs no locking.
type lineage struct {
	shards   map[string]*shardNode
	finished map[string]bool // finished or trimmed
	running  map[string]bool
}

type shardNode struct {
	id      string
	parents []string
	// listed: returned by the last complete ListShards.
	listed bool
}

func newLineage() *lineage {
	return &lineage{shards: map[string]*shardNode{}, finished: map[string]bool{}, running: map[string]bool{}}
}

func parentsOf(parent, adjacent *string) []string {
	var ps []string
	for _, p := range []*string{parent, adjacent} {
		if p != nil && *p != "" {
			ps = append(ps, *p)
		}
	}
	return ps
}

// sync merges a complete ListShards result. Shards that were listed before but are no longer, and
// parents of listed shards that are not listed themselves, were trimmed by retention: they count as
// finished.
func (g *lineage) sync(listed []types.Shard) {
	seen := make(map[string]bool, len(listed))
	for _, s := range listed {
		id := deref(s.ShardId)
		seen[id] = true
		n := g.shards[id]
		if n == nil {
			n = &shardNode{id: id}
			g.shards[id] = n
		}
		n.parents = parentsOf(s.ParentShardId, s.AdjacentParentShardId)
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
func (g *lineage) addChildren(children []types.ChildShard) (unknownParent bool) {
	for _, c := range children {
		id := deref(c.ShardId)
		if g.shards[id] == nil {
			g.shards[id] = &shardNode{id: id, parents: slices.Clone(c.ParentShards)}
		}
		for _, p := range c.ParentShards {
			if g.shards[p] == nil && !g.finished[p] {
				unknownParent = true
			}
		}
	}
	return unknownParent
}

func (g *lineage) markFinished(id string) { g.finished[id] = true; delete(g.running, id) }

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

// ready returns the shards that may start now, in shard id order.
func (g *lineage) ready() []string {
	var out []string
	var reading map[string]bool // memo of readingAbove, for this call
	for id, n := range g.shards {
		if g.finished[id] || g.running[id] {
			continue
		}
		ok := true
		for _, p := range n.parents {
			if g.blocks(p, &reading) {
				ok = false
				break
			}
		}
		if ok {
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

// blocks reports whether parent p keeps its children waiting: it is not finished, or it is still
// being read, or (a shard trimmed by retention counts as finished without being read) one of its
// ancestors is still being read. A parent trimmed before it ran must not let its children pass
// the records its own parents still have in flight.
func (g *lineage) blocks(p string, reading *map[string]bool) bool {
	return !g.finished[p] || g.running[p] || (len(g.running) > 0 && g.readingAbove(p, reading))
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
		if g.running[p] || g.readingAbove(p, memo) {
			(*memo)[id] = true
			return true
		}
	}
	return false
}
