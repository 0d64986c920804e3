package sim

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Invariants checked after every run (besides those checked as they happen: checkpoints passing
// unhandled records, checkpoints landing on a lease their writer does not hold with the counter
// it left, writes by a worker that is not the live one, failure records that do not match their
// range). Each counts the cases it judged: records, pairs of invocations, checkpoints, workers.
const (
	InvLost       = "nothing lost"
	InvOrder      = "per-key order of first deliveries"
	InvLineage    = "lineage on invocation start and end times"
	InvOverlap    = "no overlapping invocations (shard at PF 1, key at PF > 1)"
	InvCheckpoint = "checkpoints cover only handled records, fenced by lease owner and counter"
	InvWindow     = "window totals and carried state"
	InvObserver   = "observer counts add up"
	InvFilter     = "filtered-out records never invoked, and counted"
	InvRetries    = "a discarded batch was invoked MaximumRetryAttempts+1 times"
	InvExpiry     = "a worker declared dead 0.9 of its own lease after its last heartbeat"
	InvGoroutines = "every goroutine stopped"
)

// Invariants lists them in report order.
var Invariants = []string{InvLost, InvOrder, InvLineage, InvOverlap, InvCheckpoint, InvWindow, InvObserver, InvFilter, InvRetries, InvSkip, InvExpiry, InvRewind, InvGoroutines}

// check judges a run's history; returned is how many of incs had their Run return.
func (w *world) check(res *Result, incs []*incarnation, returned int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := &judge{res: res, perKind: map[string]int{}}
	calls := slices.Clone(w.calls)
	slices.SortStableFunc(calls, func(a, b *call) int { return a.start.Compare(b.start) })
	w.checkLostLocked(j)
	w.checkOrderLocked(j, calls)
	// Lineage holds from each rewind's application on again (its parents read again first).
	from := 0
	for _, rw := range w.rewinds {
		if rw.applied.IsZero() {
			continue
		}
		to := from + slices.IndexFunc(calls[from:], func(c *call) bool { return !c.start.Before(rw.applied) })
		if to < from {
			to = len(calls)
		}
		w.checkLineageLocked(j, calls[from:to])
		from = to
	}
	w.checkLineageLocked(j, calls[from:])
	w.checkRewindsLocked(j, calls)
	w.checkOverlapLocked(j, calls)
	res.Checked[InvCheckpoint] += w.cpJudged
	res.Checked[InvExpiry] += w.declared
	if w.s.Window > 0 {
		w.checkWindowsLocked(j, calls)
	}
	w.checkObserversLocked(j, incs)
	if w.s.Filter {
		w.checkFilterLocked(j, calls, incs)
	}
	w.checkRetriesLocked(j, calls)
	w.checkSkipsLocked(j, incs)
	res.Checked[InvGoroutines] += returned
	if returned != len(incs) {
		j.bad("goroutines: %d of %d workers' Run returned", returned, len(incs))
	}
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
// filtered out, unless retention trimmed its shard before any of that happened (excused).
func (w *world) checkLostLocked(j *judge) {
	for _, r := range w.recs {
		if w.excused[r.seq] {
			continue
		}
		j.res.Checked[InvLost]++
		if !w.doneLocked(r) {
			j.bad("lost: %s (%s:%d, shard %s) was neither handled, delivered nor filtered", r.seq, r.key, r.n, r.shard)
		}
	}
}

// checkOrderLocked: per-key order of first deliveries. The first time the function sees each
// record, the records of one key come in put order. A record of a rewind's window first seen in
// its replay (it had gone to the destination without being invoked, or had not been reached) is
// judged with the replay (InvRewind) instead.
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
			if w.replayedLocked(r, c.start) {
				continue
			}
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
// records the function handled (not discarded, not filtered out) since the last rewind applied
// before it: a rewind drops the open window's state and the replay aggregates afresh, so the
// records of a window handled before a rewind count in no window of the replay, and a replayed
// window counts what the replay invoked (poller.PlanRewind).
func (w *world) checkWindowsLocked(j *judge, calls []*call) {
	for _, c := range calls {
		if !c.final || !c.responded || c.failed || w.trimmed[c.shard] {
			continue
		}
		from, to := w.rewindEpochLocked(c.start)
		handled := map[string]bool{}
		for _, o := range calls {
			if o.shard == c.shard && !o.start.Before(from) && o.start.Before(to) {
				for _, seq := range o.handled {
					handled[seq] = true
				}
			}
		}
		sent := map[string]bool{}
		for _, d := range w.discards {
			if !d.at.Before(from) && d.at.Before(to) {
				for _, seq := range d.seqs {
					sent[seq] = true
				}
			}
		}
		want, ambiguous := 0, false
		for _, r := range w.byShard[c.shard] {
			if !r.at.Truncate(w.s.Window).Equal(c.window) {
				continue
			}
			// A record handled by a worker that died before its checkpoint, then discarded
			// after the restart (its new batch failed), is in no surviving state: such a
			// window cannot be judged by counting.
			ambiguous = ambiguous || (handled[r.seq] && sent[r.seq])
			if handled[r.seq] {
				want++
			}
		}
		if ambiguous {
			continue
		}
		j.res.Checked[InvWindow]++
		if c.state != want {
			j.bad("window %s of %s: final state %d, the window has %d handled records since the last rewind", c.window.Sub(epoch), c.shard, c.state, want)
		}
	}
}

// rewindEpochLocked is the span [from, to) between the rewinds applied around t: from the last
// applied at or before t (or the beginning), to the next one after it (or the end).
func (w *world) rewindEpochLocked(t time.Time) (from, to time.Time) {
	to = time.Unix(1<<62, 0)
	for _, rw := range w.rewinds {
		switch {
		case rw.applied.IsZero():
		case !rw.applied.After(t) && rw.applied.After(from):
			from = rw.applied
		case rw.applied.After(t) && rw.applied.Before(to):
			to = rw.applied
		}
	}
	return from, to
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

// checkOverlapLocked: no two invocations of one shard (PF 1) or of one partition key (PF > 1)
// run at the same time, by their start and end at the function. Each invocation after the first
// of its key is one judged pair: it against the latest end before it.
func (w *world) checkOverlapLocked(j *judge, calls []*call) {
	lastEnd := map[string]*call{}
	for _, c := range calls { // by start
		for _, k := range c.keys {
			prev := lastEnd[k]
			if prev != nil {
				j.res.Checked[InvOverlap]++
				if c.start.Before(prev.end) {
					j.bad("overlap: %s invoked by worker %d at %s while worker %d's invocation of it (%s..%s) ran",
						k, c.inc, c.start.Sub(epoch), prev.inc, prev.start.Sub(epoch), prev.end.Sub(epoch))
				}
			}
			if prev == nil || c.end.After(prev.end) {
				lastEnd[k] = c
			}
		}
	}
}

// checkFilterLocked: with a filter, no record it drops (tag b) reaches the function, and the
// observers counted every one a reader must have filtered: those followed on their shard by a
// record the function handled.
func (w *world) checkFilterLocked(j *judge, calls []*call, incs []*incarnation) {
	for _, c := range calls {
		for _, seq := range c.seqs {
			j.res.Checked[InvFilter]++
			if w.recs[seq].tag == "b" {
				j.bad("filter: record %s (%s:%d), filtered out by the pattern, invoked by worker %d", seq, w.recs[seq].key, w.recs[seq].n, c.inc)
			}
		}
	}
	must := 0
	for _, recs := range w.byShard {
		later := false
		for i := len(recs) - 1; i >= 0; i-- {
			r := recs[i]
			if r.tag == "b" && later && !w.excused[r.seq] {
				must++
			}
			later = later || w.handled[r.seq]
		}
	}
	counted := 0
	for _, inc := range incs {
		inc.obs.mu.Lock()
		counted += inc.obs.filtered
		inc.obs.mu.Unlock()
	}
	j.res.Checked[InvFilter] += must
	if counted < must {
		j.bad("filter: the observers counted %d records filtered out, the readers had to filter at least %d", counted, must)
	}
}

// checkRetriesLocked: a batch discarded with its retries exhausted was invoked exactly
// MaximumRetryAttempts+1 times by the worker that discarded it, and its failure record says so.
// Judged where a batch keeps its records from one attempt to the next (no bisection, no partial
// responses) and one worker ran at a time.
func (w *world) checkRetriesLocked(j *judge, calls []*call) {
	if w.s.Bisect || w.s.Partial || w.s.Retries < 0 || w.s.Workers > 1 {
		return
	}
	for _, d := range w.discards {
		if d.condition != "RetryAttemptsExhausted" || len(d.seqs) == 0 {
			continue
		}
		n := 0
		for _, c := range calls {
			if c.inc == d.inc && c.responded && !c.start.After(d.at) && slices.Equal(c.seqs, d.seqs) {
				n++
			}
		}
		j.res.Checked[InvRetries]++
		if n != w.s.Retries+1 || d.invokes != n {
			j.bad("retries: batch %s.. (%d records) discarded by worker %d after %d invocations (its record says %d), MaximumRetryAttempts is %d",
				d.seqs[0], len(d.seqs), d.inc, n, d.invokes, w.s.Retries)
		}
	}
}
