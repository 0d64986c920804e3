package sim

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Invariants checked after every run (besides those checked as they happen: overlapping
// invocations, checkpoints passing unhandled records, writes by a worker that is not the live
// one, failure records that do not match their range, and the goroutines the bubble waits for).
const (
	InvLost       = "nothing lost"
	InvOrder      = "per-key order of first deliveries"
	InvLineage    = "lineage on invocation end times"
	InvOverlap    = "no overlapping invocations (shard at PF 1, key at PF > 1)"
	InvCheckpoint = "checkpoints cover only handled records, written by the live worker"
	InvWindow     = "window totals and carried state"
	InvObserver   = "observer counts add up"
	InvGoroutines = "every goroutine stopped"
)

// Invariants lists them in report order.
var Invariants = []string{InvLost, InvOrder, InvLineage, InvOverlap, InvCheckpoint, InvWindow, InvObserver, InvGoroutines}

func (w *world) check(res *Result, incs []*incarnation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := &judge{res: res, perKind: map[string]int{}}
	calls := slices.Clone(w.calls)
	slices.SortStableFunc(calls, func(a, b *call) int { return a.start.Compare(b.start) })
	w.checkLostLocked(j)
	w.checkOrderLocked(j, calls)
	w.checkLineageLocked(j, calls)
	res.Checked[InvOverlap] += len(calls)
	res.Checked[InvCheckpoint] += w.saves
	if w.s.Window > 0 {
		w.checkWindowsLocked(j, calls)
	}
	w.checkObserversLocked(j, incs)
	res.Checked[InvGoroutines] += len(incs)
}

// judge collects a run's violations: the first five of each kind (the text before the first
// colon).
type judge struct {
	res     *Result
	perKind map[string]int
}

func (j *judge) bad(format string, args ...any) {
	kind, _, _ := strings.Cut(format, ":")
	if j.perKind[kind]++; j.perKind[kind] <= 5 {
		j.res.Violations = append(j.res.Violations, fmt.Sprintf(format, args...))
	}
}

// checkLostLocked: nothing lost. Every record was handled, delivered to the destination or
// filtered out, unless retention trimmed its shard.
func (w *world) checkLostLocked(j *judge) {
	for _, r := range w.recs {
		j.res.Checked[InvLost]++
		if !w.doneLocked(r) && !w.trimmed[r.shard] {
			j.bad("lost: %s (%s:%d, shard %s) was neither handled, delivered nor filtered", r.seq, r.key, r.n, r.shard)
		}
	}
}

// checkOrderLocked: per-key order of first deliveries. The first time the function sees each
// record, the records of one key come in put order.
func (w *world) checkOrderLocked(j *judge, calls []*call) {
	seen := map[string]bool{}
	last := map[string]int{}
	for _, c := range calls {
		for _, seq := range c.seqs {
			if seen[seq] {
				continue
			}
			seen[seq] = true
			r := w.recs[seq]
			j.res.Checked[InvOrder]++
			if n, ok := last[r.key]; ok && r.n < n {
				j.bad("order: %s:%d first seen at %s after %s:%d", r.key, r.n, c.start.Sub(epoch), r.key, n)
			}
			last[r.key] = max(last[r.key], r.n)
		}
	}
}

// checkLineageLocked: no invocation of a shard starts before every invocation of each of its
// ancestors has ended.
func (w *world) checkLineageLocked(j *judge, calls []*call) {
	lastEnd := map[string]time.Time{}
	for _, c := range calls {
		if c.frozen { // ended after a freeze: its shard may have been taken over meanwhile
			continue
		}
		if c.end.After(lastEnd[c.shard]) {
			lastEnd[c.shard] = c.end
		}
	}
	firstStart := map[string]time.Time{}
	for _, c := range calls {
		if t, ok := firstStart[c.shard]; !ok || c.start.Before(t) {
			firstStart[c.shard] = c.start
		}
	}
	if os.Getenv("ESM_SIM_DEBUG") != "" {
		for shard, start := range firstStart {
			fmt.Fprintf(os.Stderr, "%s parents=%v first=%s last=%s trimmed=%t\n", shard, w.parents[shard], start.Sub(epoch), lastEnd[shard].Sub(epoch), w.trimmed[shard])
		}
	}
	for shard, start := range firstStart {
		for _, a := range w.ancestorsLocked(shard) {
			end, ok := lastEnd[a]
			if !ok {
				continue
			}
			j.res.Checked[InvLineage]++
			if start.Before(end) {
				j.bad("lineage: %s invoked at %s, before its ancestor %s's last invocation ended at %s",
					shard, start.Sub(epoch), a, end.Sub(epoch))
			}
		}
	}
}

// checkWindowsLocked: each final invocation of a window carries the number of the window's
// records the function handled (not discarded, not filtered out).
func (w *world) checkWindowsLocked(j *judge, calls []*call) {
	for _, c := range calls {
		if !c.final || !c.responded || c.failed || w.trimmed[c.shard] {
			continue
		}
		want, ambiguous := 0, false
		for _, r := range w.byShard[c.shard] {
			if !r.at.Truncate(w.s.Window).Equal(c.window) {
				continue
			}
			// A record handled by a worker that died before its checkpoint, then discarded
			// after the restart (its new batch failed), is in no surviving state: such a
			// window cannot be judged by counting.
			ambiguous = ambiguous || (w.handled[r.seq] && w.sent[r.seq])
			if w.handled[r.seq] {
				want++
			}
		}
		if ambiguous {
			continue
		}
		j.res.Checked[InvWindow]++
		if c.state != want {
			j.bad("window %s of %s: final state %d, the window has %d handled records", c.window.Sub(epoch), c.shard, c.state, want)
		}
	}
}

// checkObserversLocked: each worker's observer counted what the function, the destination and
// Kinesis saw.
func (w *world) checkObserversLocked(j *judge, incs []*incarnation) {
	for _, inc := range incs {
		o := inc.obs
		o.mu.Lock()
		j.res.Checked[InvObserver]++
		if !inc.polledMatches(o.polled) || o.invoked != inc.invokedRecs || o.failed != inc.failedInvokes ||
			o.delivered != inc.delivered || o.dropped != 0 || o.filtered > inc.filtered || o.throttled != inc.throttles {
			j.bad("observer of worker %d: polled %d/%d invoked %d/%d failed %d/%d delivered %d/%d dropped %d filtered %d/≤%d throttled %d/%d (observer/actual)",
				inc.id, o.polled, inc.polled, o.invoked, inc.invokedRecs, o.failed, inc.failedInvokes, o.delivered, inc.delivered,
				o.dropped, o.filtered, inc.filtered, o.throttled, inc.throttles)
		}
		o.mu.Unlock()
	}
}

func (w *world) ancestorsLocked(shard string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(string)
	walk = func(id string) {
		for _, p := range w.parents[id] {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
				walk(p)
			}
		}
	}
	walk(shard)
	return out
}
