package poller

import (
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kinesis-esm/esm/source"
)

// Rewinds (issue 43): a shard's position moved back by an operator, to a time or a sequence
// number, or a window [From, Until) of its records replayed. A rewind is applied to the store
// while no reader of the shards it changes runs (the runner stops the poller, or every worker
// of a lease table, first: lease/DESIGN.md, "Rewinds"); the poller then reads the store's
// progress as at any start, and the readers follow Rewind below.

// Rewind is the part of a shard's progress a rewind wrote.
type Rewind struct {
	// Revision is the rewind's number (each mapping counts its rewinds).
	Revision int64 `json:"rev"`
	// Timestamp and Sequence are where the shard opens while it has no checkpoint since the
	// rewind: AT_TIMESTAMP, or AT_SEQUENCE_NUMBER. Neither: its first record (a descendant of
	// a rewound shard, or a shard that started after the rewind's time).
	Timestamp time.Time `json:"at,omitzero"`
	Sequence  string    `json:"seq,omitempty"`
	// Until is the end (exclusive, by arrival time) of a replayed window; zero for a move. From
	// the first record that arrived at or after it, the records this mapping had handled
	// before the rewind (up to Skip, or every one when SkipAll: the shard was finished) are
	// not invoked again; the first record after them ends the replay.
	Until   time.Time `json:"until,omitzero"`
	Skip    string    `json:"skip,omitempty"`
	SkipAll bool      `json:"skipAll,omitempty"`
}

// RewindRequest is what an operator asks for. Exactly one of Timestamp and Sequences is set.
type RewindRequest struct {
	// Shards to rewind; empty: every shard of the stream (Timestamp only).
	Shards []string `json:"shards,omitempty"`
	// Timestamp: move each shard to its first record that arrived at or after it, or, with
	// Until, replay the window [Timestamp, Until).
	Timestamp time.Time `json:"timestamp,omitzero"`
	Until     time.Time `json:"until,omitzero"`
	// Sequences: move each named shard to that record (AT_SEQUENCE_NUMBER).
	Sequences map[string]string `json:"sequences,omitempty"`
}

// Validate checks a request against the stream's shards (a listing) and the time now; each
// problem is a *ValidationError whose message says what to fix.
func (q RewindRequest) Validate(shards []source.Shard, now time.Time) error {
	known := make(map[string]source.Shard, len(shards))
	for _, s := range shards {
		known[s.ID] = s
	}
	bad := func(field, format string, args ...any) error {
		return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case q.Timestamp.IsZero() && len(q.Sequences) == 0:
		return bad("Timestamp", "a rewind needs a time (--to-timestamp, or a window --from/--until) or a sequence number per shard (--sequence SHARD=SEQ)")
	case !q.Timestamp.IsZero() && len(q.Sequences) > 0:
		return bad("Sequences", "give either a time or sequence numbers, not both")
	case q.Timestamp.After(now):
		return bad("Timestamp", "timestamp %s is in the future (now %s): a rewind moves back to records that exist", q.Timestamp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case !q.Until.IsZero() && q.Until.After(now):
		return bad("Until", "window end %s is in the future (now %s): replay a window that has passed", q.Until.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case !q.Until.IsZero() && !q.Until.After(q.Timestamp):
		return bad("Until", "window end %s is not after its start %s: the window is [start, end)", q.Until.UTC().Format(time.RFC3339), q.Timestamp.UTC().Format(time.RFC3339))
	case !q.Until.IsZero() && len(q.Sequences) > 0:
		return bad("Until", "a window is given by times: --from and --until")
	}
	for _, id := range q.Shards {
		if _, ok := known[id]; !ok {
			return bad("Shards", "shard %s is not a shard of the stream (trimmed, or a typo); its shards: %s", id, strings.Join(sortedIDs(known), ", "))
		}
	}
	for id, seq := range q.Sequences {
		s, ok := known[id]
		if !ok {
			return bad("Sequences", "shard %s is not a shard of the stream (trimmed, or a typo); its shards: %s", id, strings.Join(sortedIDs(known), ", "))
		}
		if err := inRange(s, seq); err != nil {
			return bad("Sequences", "sequence number %q for shard %s: %v", seq, id, err)
		}
	}
	return nil
}

// inRange checks that seq is a sequence number within the shard's range (a number of another
// shard usually lies outside it; the source refuses the rest when the shard is opened there).
func inRange(s source.Shard, seq string) error {
	n, ok := new(big.Int).SetString(seq, 10)
	if !ok || n.Sign() < 0 {
		return fmt.Errorf("not a sequence number (decimal digits)")
	}
	if lo, ok := new(big.Int).SetString(s.StartingSequenceNumber, 10); ok && n.Cmp(lo) < 0 {
		return fmt.Errorf("before the shard's first sequence number %s: it is of another shard", s.StartingSequenceNumber)
	}
	if hi, ok := new(big.Int).SetString(s.EndingSequenceNumber, 10); ok && n.Cmp(hi) > 0 {
		return fmt.Errorf("after the shard's last sequence number %s: it is of another shard", s.EndingSequenceNumber)
	}
	return nil
}

func sortedIDs[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// RewindPlan is what a rewind writes: the new progress of every shard it changes, and what the
// operator must be told.
type RewindPlan struct {
	Progress map[string]ShardProgress
	// Rewound are the shards the request names (or every shard listed), Reset their descendants,
	// which wait for them again.
	Rewound, Reset []string
}

// PlanRewind computes a rewind's new progress from the stream's shards, the progress stored
// and the request (validated): each rewound shard opens at the rewind's position, unfinished,
// and every descendant of one waits for its parents again (lineage: a rewind to before a
// split reads the parents again, then the children). A replay's shards keep what they had
// handled (Skip, and the runs it discarded past it), so that after the window the mapping goes
// on from where it was.
//
// As for tumbling windows a rewind is the mapping created again at the new position: the open
// window of every shard it changes is dropped, without a final invocation, and the replay
// aggregates its windows from empty state (the first one from the new position on, partial
// when that is inside a window). Both stores write this progress whole (the lease table
// removes the window's attribute), so no state of before the rewind reaches the replay.
func PlanRewind(q RewindRequest, shards []source.Shard, stored map[string]ShardProgress, rev int64) RewindPlan {
	children := map[string][]string{}
	all := make([]string, 0, len(shards))
	for _, s := range shards {
		all = append(all, s.ID)
		for _, p := range s.Parents {
			children[p] = append(children[p], s.ID)
		}
	}
	named := q.Shards
	if len(q.Sequences) > 0 {
		named = sortedIDs(q.Sequences)
	} else if len(named) == 0 {
		named = all
	}
	plan := RewindPlan{Progress: map[string]ShardProgress{}}
	rewound := map[string]bool{}
	for _, id := range named {
		rewound[id] = true
	}
	// Every descendant of a rewound shard is reset (breadth first, each once).
	queue := slices.Clone(named)
	seen := map[string]bool{}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		old := stored[id]
		rw := &Rewind{Revision: rev, Until: q.Until}
		if !q.Until.IsZero() {
			rw.Skip, rw.SkipAll = handled(old)
		}
		if len(q.Sequences) > 0 {
			rw.Sequence = q.Sequences[id]
		} else {
			rw.Timestamp = q.Timestamp // a shard that started later opens at its first record
		}
		// Window: none (see above); what the old window had aggregated is not carried over.
		pr := ShardProgress{Start: old.Start, StartTimestamp: old.StartTimestamp, Rewind: rw, Window: nil}
		if !q.Until.IsZero() {
			// Discarded past the checkpoint: after the window, not read again (discarded.go).
			pr.Discarded = old.Discarded
		}
		plan.Progress[id] = pr
		if rewound[id] {
			plan.Rewound = append(plan.Rewound, id)
		} else {
			plan.Reset = append(plan.Reset, id)
		}
		queue = append(queue, children[id]...)
	}
	sort.Strings(plan.Rewound)
	sort.Strings(plan.Reset)
	return plan
}

// handled is what a shard had handled before a replay: up to its checkpoint, or every record
// when it was finished.
func handled(pr ShardProgress) (skip string, all bool) {
	if pr.Finished {
		return "", true
	}
	if rw := pr.Rewind; rw != nil && !rw.Until.IsZero() && (rw.SkipAll || seqLess(pr.Checkpoint, rw.Skip)) {
		// A replay still in progress: what it would skip was handled too.
		return rw.Skip, rw.SkipAll
	}
	return pr.Checkpoint, false
}

// seqLess compares two sequence numbers ("" is before every one).
func seqLess(a, b string) bool {
	if a == "" || b == "" {
		return a == "" && b != ""
	}
	x, okx := new(big.Int).SetString(a, 10)
	y, oky := new(big.Int).SetString(b, 10)
	if !okx || !oky {
		return a < b
	}
	return x.Cmp(y) < 0
}

// replayCut applies the shard's replay window to the records of one read, in order: records
// before the window's end pass; from the first at or after it, those the mapping had handled
// before the rewind are dropped (not invoked again); the first one after them ends the replay
// (the reader's progress forgets it at its next write). It returns the records to deliver.
//
// It reads the rewind the reader began with, not the progress: a read is taken under the idle
// poller's entry lock, which must not wait for the slots' progress lock (held through a save's
// retries). Once a write forgot the rewind, no record at or before its Skip is read any more, so
// the replay ends at the next record, as it would have.
func (r *reader) replayCut(recs []source.Record) []source.Record {
	rw := r.replay
	if rw == nil || rw.Until.IsZero() || r.replayOver {
		return recs
	}
	out := recs[:0:0]
	for i, rec := range recs {
		if !r.windowPast {
			if rec.ArrivalTime.IsZero() || rec.ArrivalTime.Before(rw.Until) {
				out = append(out, rec)
				continue
			}
			r.windowPast = true
			r.p.log.Info("rewind window replayed", "shard_id", r.shardID, "until", rw.Until.UTC().Format(time.RFC3339Nano), "revision", rw.Revision)
		}
		if rw.SkipAll || !seqLess(rw.Skip, rec.SequenceNumber) {
			continue
		}
		r.replayOver = true
		r.p.log.Info("rewind replay over; the mapping goes on from where it was", "shard_id", r.shardID, "after", rw.Skip, "revision", rw.Revision)
		return append(out, recs[i:]...)
	}
	return out
}

// endReplay is the progress a write of pr stores: the rewind forgotten once the checkpoint
// makes it moot: any checkpoint after a move, and after a replay one past every record the
// mapping had handled before it (every record after such a checkpoint is new, window or not).
func endReplay(pr ShardProgress) ShardProgress {
	if rw := pr.Rewind; rw != nil && pr.Checkpoint != "" && (rw.Until.IsZero() || !rw.SkipAll && seqLess(rw.Skip, pr.Checkpoint)) {
		pr.Rewind = nil
	}
	return pr
}
