package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Verdict is the judge's finding on one invariant.
type Verdict struct {
	Name   string
	OK     bool
	Detail string
}

// Stats are the run's figures.
type Stats struct {
	Records, Deliveries, Duplicates int
	Invocations                     int
	// LongestChildWait is the longest a child shard waited for its first invocation once its
	// parents were done (their last invocation ended) and it had a record; LongestChild names it.
	LongestChildWait time.Duration
	LongestChild     string
	// MidInvocation counts, per kind, the process faults and partitions that hit a worker while
	// one of its invocations was running.
	MidInvocation map[string]int
	// Children is how many shards of the lineage have parents (a DynamoDB stream: rotations);
	// ParentChildPairs how many parent→child pairs both had invocations.
	Children, ParentChildPairs int
}

// Input is what the judge reads.
type Input struct {
	Invocations  []Invocation
	Produced     Produced
	Lineage      map[string][]string // every shard with its parents
	Events       []FaultEvent
	Exits        []Exit
	MaxChildWait time.Duration
	// Resharded says the stream was resharded (or its shards rotated), so that lineage must
	// have had pairs to judge.
	Resharded bool
	// Required is what the run must have gone through for its verdicts to count (zero: nothing
	// more than each verdict asks).
	Required Required
	// End is when the workers were stopped: a child never invoked waited until then.
	End time.Time
	// InFlight is how much longer than MaxChildWait a child may wait when a worker faulted
	// during its wait (or up to InFlight before it) had an invocation in flight: what the
	// horizon of a busy worker adds to the takeover bound of an idle one (see InFlightAllowance).
	// A worker faulted while idle adds nothing.
	InFlight time.Duration
	// Recent is how long before a fault an invocation of the faulted worker may have ended and
	// still count as in flight: its last heartbeat may have published a busy horizon for it
	// (an invocation in flight at that heartbeat, or started since the one before).
	Recent time.Duration
}

// Required is what a run must have exercised, judged by the verdict "the run exercised the path".
type Required struct {
	// Rotations is how many parent→child pairs of shards with invocations of both the lineage
	// must hold.
	Rotations int
	// Kills is how many SIGKILLs the load must have dealt.
	Kills int
}

// maxShown is how many examples a failed verdict names.
const maxShown = 3

// Judge checks a run's invariants: every record delivered, per-key order of first deliveries,
// lineage by invocation start and end times, no overlap of one shard's invocations, the child
// wait, clean exits, and that faults hit invocations in flight.
func Judge(in Input) ([]Verdict, Stats) {
	invs := slices.Clone(in.Invocations)
	slices.SortStableFunc(invs, func(a, b Invocation) int {
		return cmp.Or(a.Start.Compare(b.Start), a.End.Compare(b.End))
	})
	st := Stats{Invocations: len(invs), MidInvocation: map[string]int{}}
	var out []Verdict
	out = append(out, checkDelivered(invs, in.Produced, &st))
	out = append(out, checkOrder(invs))
	out = append(out, checkLineage(invs, in.Lineage, in.Resharded))
	out = append(out, checkOverlap(invs))
	out = append(out, checkChildWait(invs, in, &st))
	out = append(out, checkExits(in.Exits))
	out = append(out, checkMidInvocation(invs, in.Events, &st))
	st.Children, st.ParentChildPairs = children(in.Lineage), parentChildPairs(invs, in.Lineage)
	if in.Required != (Required{}) {
		out = append(out, checkExercised(in, st))
	}
	return out, st
}

func checkDelivered(invs []Invocation, p Produced, st *Stats) Verdict {
	seen := map[string]bool{}
	for _, inv := range invs {
		for _, r := range inv.Records {
			st.Deliveries++
			seen[r.Data] = true
		}
	}
	var missing []string
	keys := sortedKeys(p.Written)
	for _, k := range keys {
		for i := range p.Written[k] {
			st.Records++
			if d := k + ":" + strconv.Itoa(i); !seen[d] {
				missing = append(missing, d)
			}
		}
	}
	st.Duplicates = st.Deliveries - len(seen)
	v := Verdict{Name: "every record delivered", OK: len(missing) == 0 && st.Records > 0,
		Detail: fmt.Sprintf("%d of %d records, %d deliveries, %d duplicates", st.Records-len(missing), st.Records, st.Deliveries, st.Duplicates)}
	if len(missing) > 0 {
		v.Detail += fmt.Sprintf("; missing %d, e.g. %s", len(missing), strings.Join(missing[:min(maxShown, len(missing))], ", "))
	}
	return v
}

// checkOrder: per partition key, first deliveries (by invocation start) in put order.
func checkOrder(invs []Invocation) Verdict {
	seen := map[string]bool{}
	next := map[string]int{}
	var bad []string
	for _, inv := range invs {
		for _, r := range inv.Records {
			if seen[r.Data] {
				continue
			}
			seen[r.Data] = true
			key, n, ok := parseData(r.Data)
			if !ok {
				bad = append(bad, fmt.Sprintf("record %q is not the producer's", r.Data))
				continue
			}
			if n != next[key] {
				bad = append(bad, fmt.Sprintf("%s first delivered where %s:%d was due (%s on %s at %s)",
					r.Data, key, next[key], inv.Shard, inv.Worker, inv.Start.Format(timeFmt)))
			}
			next[key] = max(next[key], n+1)
		}
	}
	v := Verdict{Name: "order per partition key", OK: len(bad) == 0 && len(next) > 0,
		Detail: fmt.Sprintf("%d keys judged", len(next))}
	if len(bad) > 0 {
		v.Detail += fmt.Sprintf("; %d out of order, e.g. %s", len(bad), strings.Join(bad[:min(maxShown, len(bad))], "; "))
	}
	return v
}

func parseData(d string) (key string, n int, ok bool) {
	key, num, found := strings.Cut(d, ":")
	if !found {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	return key, n, err == nil
}

const timeFmt = "15:04:05.000"

// ancestors returns every ancestor of shard (parents, their parents, …).
func ancestors(lineage map[string][]string, shard string) []string {
	var out []string
	seen := map[string]bool{}
	queue := slices.Clone(lineage[shard])
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
		queue = append(queue, lineage[s]...)
	}
	return out
}

// byShard groups invocations (sorted by start) per shard.
func byShard(invs []Invocation) map[string][]Invocation {
	out := map[string][]Invocation{}
	for _, inv := range invs {
		out[inv.Shard] = append(out[inv.Shard], inv)
	}
	return out
}

// lastEnd is the end of a shard's last invocation to end, and that invocation.
func lastEnd(invs []Invocation) (Invocation, bool) {
	if len(invs) == 0 {
		return Invocation{}, false
	}
	return slices.MaxFunc(invs, func(a, b Invocation) int { return a.End.Compare(b.End) }), true
}

// checkLineage: no invocation of a shard starts before every invocation of each of its ancestors
// has ended.
func checkLineage(invs []Invocation, lineage map[string][]string, resharded bool) Verdict {
	shards := byShard(invs)
	pairs, bad := 0, []string{}
	for _, child := range sortedKeys(shards) {
		for _, a := range ancestors(lineage, child) {
			last, ok := lastEnd(shards[a])
			if !ok {
				continue
			}
			pairs++
			for _, inv := range shards[child] {
				if inv.Start.Before(last.End) {
					bad = append(bad, fmt.Sprintf("%s invoked on %s at %s, %s before %s's invocation on %s ended (%s–%s)",
						child, inv.Worker, inv.Start.Format(timeFmt), last.End.Sub(inv.Start).Round(time.Millisecond), a,
						last.Worker, last.Start.Format(timeFmt), last.End.Format(timeFmt)))
					break
				}
			}
		}
	}
	v := Verdict{Name: "lineage by invocation start and end", OK: len(bad) == 0 && (pairs > 0 || !resharded),
		Detail: fmt.Sprintf("%d ancestor→descendant pairs with invocations", pairs)}
	if len(bad) > 0 {
		v.Detail += fmt.Sprintf("; %d broken, e.g. %s", len(bad), strings.Join(bad[:min(maxShown, len(bad))], "; "))
	}
	if pairs == 0 && resharded {
		v.Detail += "; the stream was resharded but no pair had invocations: nothing judged"
	}
	return v
}

// checkOverlap: no two invocations of one shard run at the same time.
func checkOverlap(invs []Invocation) Verdict {
	shards := byShard(invs)
	n, judged := 0, 0
	var worst time.Duration
	var bad []string
	for _, s := range sortedKeys(shards) {
		list := shards[s]
		judged += max(0, len(list)-1)
		var prev Invocation
		for i, inv := range list {
			if i > 0 && inv.Start.Before(prev.End) {
				n++
				d := prev.End.Sub(inv.Start)
				if d > worst {
					worst = d
				}
				if len(bad) < maxShown {
					bad = append(bad, fmt.Sprintf("%s: %s's invocation %s–%s and %s's from %s (%s overlap)", s, prev.Worker,
						prev.Start.Format(timeFmt), prev.End.Format(timeFmt), inv.Worker, inv.Start.Format(timeFmt), d.Round(time.Millisecond)))
				}
			}
			if i == 0 || inv.End.After(prev.End) {
				prev = inv
			}
		}
	}
	v := Verdict{Name: "no overlap of one shard's invocations", OK: n == 0 && judged > 0,
		Detail: fmt.Sprintf("%d successive invocations judged", judged)}
	if n > 0 {
		v.Detail += fmt.Sprintf("; %d overlaps, the longest %s, e.g. %s", n, worst.Round(time.Millisecond), strings.Join(bad, "; "))
	}
	return v
}

// checkChildWait: once its parents are done (their last invocation ended) and it holds a
// record, a child shard's first invocation comes within MaxChildWait, or, when a worker was
// faulted during the wait or less than the takeover bound before it (the child or a parent may
// have been placed on it), within MaxChildWait plus the takeover bound; one never invoked waited
// until in.End.
func checkChildWait(invs []Invocation, in Input, st *Stats) Verdict {
	lineage, p, end := in.Lineage, in.Produced, in.End
	shards := byShard(invs)
	judged, idle, busy := 0, 0, 0
	var longestIdle, longestBusy time.Duration
	var bad []string
	for _, child := range sortedKeys(lineage) {
		parents := lineage[child]
		if len(parents) == 0 || len(shards[child]) == 0 && p.FirstPut[child].IsZero() {
			continue
		}
		ready := p.FirstPut[child]
		for _, par := range parents {
			if last, ok := lastEnd(shards[par]); ok && last.End.After(ready) {
				ready = last.End
			}
		}
		if ready.IsZero() {
			continue
		}
		judged++
		first := Invocation{Worker: "nobody", Start: end}
		if len(shards[child]) > 0 {
			first = shards[child][0]
		}
		wait := first.Start.Sub(ready)
		if wait > st.LongestChildWait {
			st.LongestChildWait, st.LongestChild = wait, child
		}
		limit, why := in.MaxChildWait+heldWhileCut(in.Events, ready, first.Start), ""
		// A fault during the wait (or just before) on a worker with an invocation in flight
		// delays the child until that worker's horizon has passed: it may have held a parent
		// (paused, cut off or killed, it is declared dead and its leases wait for its
		// invocations) or the child. A worker faulted while idle published no horizon.
		for _, e := range in.Events {
			if !e.From.Before(first.Start) || !e.To.Add(in.InFlight).After(ready) {
				continue
			}
			if inv, ok := inFlightAt(invs, e.Worker, e.From, in.Recent); ok {
				limit += in.InFlight
				why = fmt.Sprintf("%s on %s at %s with %s's invocation started at %s in flight", e.Kind, e.Worker,
					e.From.Format(timeFmt), inv.Shard, inv.Start.Format(timeFmt))
				break
			}
		}
		if why == "" {
			idle++
			longestIdle = max(longestIdle, wait)
		} else {
			busy++
			longestBusy = max(longestBusy, wait)
		}
		if wait > limit {
			applied := "no invocation in flight at any fault near it: bound " + in.MaxChildWait.String()
			if why != "" {
				applied = fmt.Sprintf("%s: bound %s + %s", why, in.MaxChildWait, in.InFlight.Round(time.Millisecond))
			}
			bad = append(bad, fmt.Sprintf("%s waited %s (ready %s, first invoked on %s at %s; %s)", child, wait.Round(time.Millisecond),
				ready.Format(timeFmt), first.Worker, first.Start.Format(timeFmt), applied))
		}
	}
	v := Verdict{Name: fmt.Sprintf("no child waits more than %s once its parents are done", in.MaxChildWait), OK: len(bad) == 0,
		Detail: fmt.Sprintf("%d children judged: %d against %s (no faulted worker had an invocation in flight; plus the length of a partition from the stream or the function during the wait; the longest waited %s), "+
			"%d against %s + %s (a worker faulted while they waited or just before had one in flight; the longest waited %s); the longest wait %s",
			judged, idle, in.MaxChildWait, longestIdle.Round(time.Millisecond), busy, in.MaxChildWait, in.InFlight.Round(time.Millisecond),
			longestBusy.Round(time.Millisecond), st.LongestChildWait.Round(time.Millisecond))}
	if st.LongestChild != "" {
		v.Detail += " (" + st.LongestChild + ")"
	}
	if len(bad) > 0 {
		v.Detail += "; " + strings.Join(bad[:min(maxShown, len(bad))], "; ")
	}
	return v
}

// heldWhileCut is the longest partition from the stream (Kinesis or DynamoDB Streams) or from
// the function, and not from DynamoDB (that one's worker is declared dead), that overlapped a
// child's wait from ready to first: its worker kept its leases, heartbeat going, and could not
// read or invoke until it healed.
func heldWhileCut(events []FaultEvent, ready, first time.Time) time.Duration {
	var held time.Duration
	for _, e := range events {
		cut := partitionOf(e.Kind)
		if len(cut) > 0 && !slices.Contains(cut, DynamoDB) && e.From.Before(first) && e.To.After(ready) {
			held = max(held, e.To.Sub(e.From))
		}
	}
	return held
}

// inFlightAt is an invocation of worker w that was running at t, or ended less than recent
// before it.
func inFlightAt(invs []Invocation, w string, t time.Time, recent time.Duration) (Invocation, bool) {
	for _, inv := range invs {
		if inv.Worker == w && inv.Start.Before(t) && inv.End.After(t.Add(-recent)) {
			return inv, true
		}
	}
	return Invocation{}, false
}

// checkExits: a SIGTERM ends a worker with exit 0, and no worker exits on its own.
func checkExits(exits []Exit) Verdict {
	terms := 0
	var bad []string
	for _, e := range exits {
		switch {
		case e.Cause == "sigterm":
			terms++
			if e.Code != 0 {
				bad = append(bad, fmt.Sprintf("%s exited %d after SIGTERM at %s, %s after it started", e.Worker, e.Code, e.At.Format(timeFmt), e.Uptime.Round(time.Millisecond)))
			}
		case e.Cause == "self":
			bad = append(bad, fmt.Sprintf("%s exited on its own with %d at %s", e.Worker, e.Code, e.At.Format(timeFmt)))
		}
	}
	v := Verdict{Name: "SIGTERM exits 0, and no worker exits on its own", OK: len(bad) == 0 && terms > 0,
		Detail: fmt.Sprintf("%d SIGTERMs", terms)}
	if len(bad) > 0 {
		v.Detail += fmt.Sprintf("; %d bad exits: %s", len(bad), strings.Join(bad[:min(maxShown, len(bad))], "; "))
	}
	return v
}

// checkMidInvocation counts the faults that hit a worker while one of its invocations ran; a run
// in which none did has not tested what it claims.
func checkMidInvocation(invs []Invocation, events []FaultEvent, st *Stats) Verdict {
	total := 0
	for _, e := range events {
		for _, inv := range invs {
			if inv.Worker == e.Worker && inv.Start.Before(e.From) && inv.End.After(e.From) {
				st.MidInvocation[e.Kind]++
				total++
				break
			}
		}
	}
	var parts []string
	for _, k := range sortedKeys(st.MidInvocation) {
		parts = append(parts, fmt.Sprintf("%s %d", k, st.MidInvocation[k]))
	}
	return Verdict{Name: "faults landed mid-invocation", OK: total > 0,
		Detail: fmt.Sprintf("%d of %d process faults and partitions: %s", total, len(events), strings.Join(parts, ", "))}
}

// children is how many shards of lineage have parents.
func children(lineage map[string][]string) int {
	n := 0
	for _, ps := range lineage {
		if len(ps) > 0 {
			n++
		}
	}
	return n
}

// parentChildPairs is how many parent→child pairs of lineage both had invocations.
func parentChildPairs(invs []Invocation, lineage map[string][]string) int {
	shards := byShard(invs)
	n := 0
	for child, parents := range lineage {
		for _, p := range parents {
			if len(shards[child]) > 0 && len(shards[p]) > 0 {
				n++
			}
		}
	}
	return n
}

// checkExercised: the run went through what in.Required asks (a run that did not has tested
// less than it claims): enough parent→child pairs with invocations of both, SIGKILLs during the
// load, and records.
func checkExercised(in Input, st Stats) Verdict {
	kills := 0
	for _, e := range in.Events {
		if strings.HasPrefix(e.Kind, "sigkill") {
			kills++
		}
	}
	req := in.Required
	ok := st.ParentChildPairs >= req.Rotations && kills >= req.Kills && st.Records > 0
	return Verdict{Name: "the run exercised the path", OK: ok,
		Detail: fmt.Sprintf("%d child shards, %d parent→child pairs with invocations of both (want %d); %d SIGKILLs during the load (want %d); %d records",
			st.Children, st.ParentChildPairs, req.Rotations, kills, req.Kills, st.Records)}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
