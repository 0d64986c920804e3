package live

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Geometry of the lineage graph, in SVG user units.
const (
	nodeW, nodeH = 180, 46
	gapX, gapY   = 24, 56
	margin       = 12
	sparkW       = 160
	sparkH       = 28
)

// MappingView is one mapping as the page and state.json show it.
type MappingView struct {
	Function         string      `json:"function"`
	Stream           string      `json:"stream"`
	UUID             string      `json:"uuid,omitempty"`
	Shards           []ShardView `json:"shards"`
	Delivered        int         `json:"delivered"`
	Dropped          int         `json:"dropped"`
	DeliveryFailures int         `json:"deliveryFailures"`
	LastDelivery     *time.Time  `json:"lastDelivery,omitempty"`
	// IteratorAgeMillis is the mapping's: the largest latest age of its shards read here.
	IteratorAgeMillis *float64 `json:"iteratorAgeMillis,omitempty"`

	Graph Graph `json:"-"`
}

// ShardView is one shard.
type ShardView struct {
	ShardID    string   `json:"shardId"`
	Parents    []string `json:"parents,omitempty"`
	State      string   `json:"state"`
	Owner      string   `json:"owner,omitempty"`
	Checkpoint string   `json:"checkpoint,omitempty"`
	// IteratorAgeMillis is the latest iterator age, while the shard is read here.
	IteratorAgeMillis *float64 `json:"iteratorAgeMillis,omitempty"`
	// RetryingFirst and RetryingLast bound the batch being retried; empty when none is.
	RetryingFirst string `json:"retryingFirst,omitempty"`
	RetryingLast  string `json:"retryingLast,omitempty"`
	LastError     string `json:"lastError,omitempty"`
	Delivered     int    `json:"delivered,omitempty"`
	Dropped       int    `json:"dropped,omitempty"`

	Spark string `json:"-"` // the age history as SVG polyline points
}

// Graph is a mapping's lineage laid out: parents above children.
type Graph struct {
	Width, Height int
	Nodes         []Node
	Edges         []Edge
}

// Node is a shard's box.
type Node struct {
	ShardID, State, Parents string
	X, Y, Depth             int
}

// Edge joins a parent's bottom to a child's top.
type Edge struct{ X1, Y1, X2, Y2 int }

// Snapshot returns the board's mappings as the page shows them.
func (b *Board) Snapshot() []MappingView {
	b.mu.Lock()
	ms := slices.Clone(b.mappings)
	b.mu.Unlock()
	now := b.now()
	out := make([]MappingView, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.view(now, b.worker))
	}
	return out
}

func (m *Mapping) view(now time.Time, worker string) MappingView {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := MappingView{Function: m.function, Stream: m.stream, UUID: m.uuid, Delivered: m.delivered, Dropped: m.dropped,
		DeliveryFailures: m.deliveryFailures}
	if !m.lastDelivery.IsZero() {
		t := m.lastDelivery
		v.LastDelivery = &t
	}
	for id, s := range m.shards {
		if s.state == "" && s.parents == nil { // only counted (a delivery before any state): not a shard to draw
			continue
		}
		sv := ShardView{ShardID: id, Parents: s.parents, State: s.state, Checkpoint: s.checkpoint,
			RetryingFirst: s.failFirst, RetryingLast: s.failLast, LastError: s.lastError, Delivered: s.delivered, Dropped: s.dropped}
		switch {
		case s.state == "":
			sv.State = StatePending // known from a listing, not yet told
		case s.blocked && s.state == StateReading:
			sv.State = StateBlocked
		}
		if s.state == StateReading {
			sv.Owner = worker
			if n := len(s.ages); n > 0 {
				age := s.ages[n-1].ms
				sv.IteratorAgeMillis = &age
				if v.IteratorAgeMillis == nil || age > *v.IteratorAgeMillis {
					v.IteratorAgeMillis = &age
				}
			}
		}
		sv.Spark = spark(s.ages, now)
		v.Shards = append(v.Shards, sv)
	}
	slices.SortFunc(v.Shards, func(a, b ShardView) int { return cmp.Compare(a.ShardID, b.ShardID) })
	v.Graph = layout(v.Shards)
	return v
}

// spark renders an age history as polyline points over the last AgeWindow.
func spark(ages []sample, now time.Time) string {
	if len(ages) == 0 {
		return ""
	}
	top := 1.0
	for _, a := range ages {
		top = max(top, a.ms)
	}
	var sb strings.Builder
	for _, a := range ages {
		x := float64(sparkW) * (1 - float64(now.Sub(a.at))/float64(AgeWindow))
		y := float64(sparkH-2) * (1 - a.ms/top)
		fmt.Fprintf(&sb, "%.1f,%.1f ", max(x, 0), y+1)
	}
	return strings.TrimSpace(sb.String())
}

// layout places each shard one row below its deepest parent; within a row, shards are ordered
// by their parents' positions, then by ID.
func layout(shards []ShardView) Graph {
	byID := make(map[string]*ShardView, len(shards))
	for i := range shards {
		byID[shards[i].ShardID] = &shards[i]
	}
	depth := map[string]int{}
	var depthOf func(id string, seen int) int
	depthOf = func(id string, seen int) int {
		if d, ok := depth[id]; ok {
			return d
		}
		d := 0
		if seen < len(shards) { // a cycle cannot happen in Kinesis; bound the walk anyway
			for _, p := range byID[id].Parents {
				if _, ok := byID[p]; ok {
					d = max(d, depthOf(p, seen+1)+1)
				}
			}
		}
		depth[id] = d
		return d
	}
	rows := [][]string{}
	for _, s := range shards {
		d := depthOf(s.ShardID, 0)
		for len(rows) <= d {
			rows = append(rows, nil)
		}
		rows[d] = append(rows[d], s.ShardID)
	}
	x := map[string]int{}
	g := Graph{}
	widest := 0
	for d, row := range rows {
		center := func(id string) float64 {
			sum, n := 0.0, 0
			for _, p := range byID[id].Parents {
				if px, ok := x[p]; ok {
					sum, n = sum+float64(px), n+1
				}
			}
			if n == 0 {
				return -1
			}
			return sum / float64(n)
		}
		slices.SortStableFunc(row, func(a, b string) int {
			if c := cmp.Compare(center(a), center(b)); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		for i, id := range row {
			x[id] = margin + i*(nodeW+gapX)
			s := byID[id]
			g.Nodes = append(g.Nodes, Node{ShardID: id, State: s.State, Parents: strings.Join(s.Parents, " "),
				X: x[id], Y: margin + d*(nodeH+gapY), Depth: d})
		}
		widest = max(widest, len(row))
	}
	pos := map[string]Node{}
	for _, n := range g.Nodes {
		pos[n.ShardID] = n
	}
	for _, n := range g.Nodes {
		for _, p := range byID[n.ShardID].Parents {
			if pn, ok := pos[p]; ok {
				g.Edges = append(g.Edges, Edge{X1: pn.X + nodeW/2, Y1: pn.Y + nodeH, X2: n.X + nodeW/2, Y2: n.Y})
			}
		}
	}
	g.Width = 2*margin + max(widest, 1)*(nodeW+gapX) - gapX
	g.Height = 2*margin + max(len(rows), 1)*(nodeH+gapY) - gapY
	return g
}
