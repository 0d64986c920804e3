package live

import (
	"cmp"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What the page draws of a State: the summary, the blocked shards first, the lineage's open
// frontier (the finished history folded), and the table filtered, sorted and cut to a number
// of rows; every sparkline on one age scale.

// Geometry of a sparkline, in SVG user units.
const (
	sparkW = 160
	sparkH = 28
)

// DefaultRows is how many rows of the shard table the page shows unless asked for more.
const DefaultRows = 100

// Sort orders of the table.
const (
	SortState = "state" // blocked first (longest first), then unreachable, reading (oldest age first), pending, released, finished
	SortAge   = "age"   // iterator age, oldest first
	SortOwner = "owner"
	SortShard = "shard"
)

// stateRank orders the states in the summary and in SortState.
var stateRank = map[string]int{StateBlocked: 0, StateReading: 2, StatePending: 3, StateReleased: 4, StateFinished: 5}

// query is what the page's form asks for.
type query struct {
	State, Owner, Sort string
	Rows               int // 0: all
}

func parseQuery(v url.Values) query {
	q := query{State: v.Get("state"), Owner: v.Get("owner"), Sort: cmp.Or(v.Get("sort"), SortState), Rows: DefaultRows}
	switch r := v.Get("rows"); r {
	case "all":
		q.Rows = 0
	case "":
	default:
		if n, err := strconv.Atoi(r); err == nil && n > 0 {
			q.Rows = n
		}
	}
	return q
}

// pageData is what the page's template draws.
type pageData struct {
	State
	Query    query
	Mappings []mappingPage
}

type mappingPage struct {
	MappingView
	States   []stateCount
	Owners   []string
	Blocked  []ShardView // every blocked shard, longest blocked first
	Rows     []row       // the table: filtered, sorted, cut to Query.Rows
	Matching int         // the shards the filter keeps
	Open     []generation
	Folded   []generation // the finished shards, by generation
	NFolded  int
	AgeTop   float64 // the sparklines' common top, in ms
	Silent   int     // workers that did not answer
}

type stateCount struct {
	State string
	N     int
}

type row struct {
	ShardView
	Spark string
}

type generation struct {
	Depth int
	Nodes []node
}

type node struct {
	ShardID, Short, State, Parents, Title string
	Depth                                 int
	Unreachable                           bool
}

func present(st State, q query) pageData {
	d := pageData{State: st, Query: q}
	now := st.SnapshotAt
	for _, v := range st.Mappings {
		d.Mappings = append(d.Mappings, presentMapping(v, q, now))
	}
	return d
}

func presentMapping(v MappingView, q query, now time.Time) mappingPage {
	mp := mappingPage{MappingView: v}
	for s, n := range v.Summary.ByState {
		mp.States = append(mp.States, stateCount{s, n})
	}
	slices.SortFunc(mp.States, func(a, b stateCount) int { return cmp.Compare(rankOf(a.State), rankOf(b.State)) })
	owners := map[string]bool{}
	var keep []ShardView
	for _, s := range v.Shards {
		if s.Owner != "" {
			owners[s.Owner] = true
		}
		if s.State == StateBlocked {
			mp.Blocked = append(mp.Blocked, s)
		}
		if (q.State == "" || q.State == displayState(s)) && (q.Owner == "" || q.Owner == s.Owner) {
			keep = append(keep, s)
		}
		for _, a := range s.ages {
			mp.AgeTop = max(mp.AgeTop, a.ms)
		}
	}
	for _, w := range v.Workers {
		if w.Status == WorkerUnreachable || w.Status == WorkerNoAddr {
			mp.Silent++
		}
	}
	mp.Owners = sortedKeys(owners)
	slices.SortFunc(mp.Blocked, byBlockedSince)
	slices.SortStableFunc(keep, order(q.Sort))
	mp.Matching = len(keep)
	if q.Rows > 0 && len(keep) > q.Rows {
		keep = keep[:q.Rows]
	}
	mp.AgeTop = niceCeil(mp.AgeTop)
	for _, s := range keep {
		mp.Rows = append(mp.Rows, row{ShardView: s, Spark: spark(s.ages, now, mp.AgeTop)})
	}
	mp.Open, mp.Folded, mp.NFolded = lineage(v.Shards)
	return mp
}

// displayState is the state the page shows and filters on.
func displayState(s ShardView) string {
	if s.Unreachable {
		return "unreachable"
	}
	return s.State
}

func rankOf(state string) int {
	if r, ok := stateRank[state]; ok {
		return r
	}
	return 1 // unreachable, and states of newer versions
}

func byBlockedSince(a, b ShardView) int {
	at, bt := time.Time{}, time.Time{}
	if a.BlockedSince != nil {
		at = *a.BlockedSince
	}
	if b.BlockedSince != nil {
		bt = *b.BlockedSince
	}
	return cmp.Or(at.Compare(bt), cmp.Compare(a.ShardID, b.ShardID))
}

func ageOf(s ShardView) float64 {
	if s.IteratorAgeMillis == nil {
		return -1
	}
	return *s.IteratorAgeMillis
}

// order is the table's order for a sort.
func order(sort string) func(a, b ShardView) int {
	switch sort {
	case SortAge:
		return func(a, b ShardView) int { return cmp.Compare(ageOf(b), ageOf(a)) }
	case SortOwner:
		return func(a, b ShardView) int { return cmp.Compare(a.Owner, b.Owner) }
	case SortShard:
		return func(a, b ShardView) int { return 0 } // the shards come by id
	}
	return func(a, b ShardView) int {
		if c := cmp.Compare(rankOf(displayState(a)), rankOf(displayState(b))); c != 0 {
			return c
		}
		if a.State == StateBlocked {
			return byBlockedSince(a, b)
		}
		return cmp.Compare(ageOf(b), ageOf(a))
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// niceCeil rounds a top of scale (ms) up to 1, 2 or 5 times a power of ten; at least 1 s.
func niceCeil(ms float64) float64 {
	if ms <= 1000 {
		return 1000
	}
	p := math.Pow(10, math.Floor(math.Log10(ms)))
	for _, f := range []float64{1, 2, 5, 10} {
		if f*p >= ms {
			return f * p
		}
	}
	return 10 * p
}

// spark renders an age history as polyline points over the last AgeWindow, on the scale 0..top.
func spark(ages []sample, now time.Time, top float64) string {
	var sb strings.Builder
	for _, a := range ages {
		x := float64(sparkW) * (1 - float64(now.Sub(a.at))/float64(AgeWindow))
		y := float64(sparkH-2) * (1 - min(a.ms/top, 1))
		fmt.Fprintf(&sb, "%.1f,%.1f ", min(max(x, 0), sparkW), y+1)
	}
	return strings.TrimSpace(sb.String())
}

// lineage groups the shards by generation (one below their deepest parent): the open ones (not
// finished) and, folded, the finished ones.
func lineage(shards []ShardView) (open, folded []generation, nFolded int) {
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
	add := func(gens []generation, d int, n node) []generation {
		for len(gens) <= d {
			gens = append(gens, generation{Depth: len(gens)})
		}
		gens[d].Nodes = append(gens[d].Nodes, n)
		return gens
	}
	for _, s := range shards {
		n := node{ShardID: s.ShardID, Short: shortID(s.ShardID), State: s.State, Parents: strings.Join(s.Parents, " "),
			Unreachable: s.Unreachable, Title: s.ShardID + ": " + displayState(s)}
		if s.Owner != "" {
			n.Title += " on " + s.Owner
		}
		if len(s.Parents) > 0 {
			n.Title += "; parents " + strings.Join(s.Parents, ", ")
		}
		n.Depth = depthOf(s.ShardID, 0)
		if s.State == StateFinished {
			folded, nFolded = add(folded, n.Depth, n), nFolded+1
		} else {
			open = add(open, n.Depth, n)
		}
	}
	return compact(open), compact(folded), nFolded
}

// compact drops empty generations.
func compact(gens []generation) []generation {
	return slices.DeleteFunc(gens, func(g generation) bool { return len(g.Nodes) == 0 })
}

// shortID is a shard id's number without its zeros ("shardId-000000000042" → "42").
func shortID(id string) string {
	n := strings.TrimLeft(strings.TrimPrefix(id, "shardId-"), "0")
	if n == "" && strings.HasPrefix(id, "shardId-") {
		return "0"
	}
	return cmp.Or(n, id)
}
