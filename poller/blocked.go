package poller

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"
)

// Two signals operators ask for, about batches that do not go through: a shard blocked on one
// batch for too long, and a function whose batchItemFailures Lambda would ignore.

// DefaultBlockedAfter is how long a shard retries the same batch before it is reported blocked
// (see WithBlockedAfter).
const DefaultBlockedAfter = time.Minute

// WithBlockedAfter sets how long a shard may retry the same batch (a failed invocation, a
// function not reached, an on-failure destination not reached) before it is reported blocked:
// Observer.ShardBlocked(shard, true) and a warning naming the shard and the last failure. The
// time runs from the batch's first failure (the halves of a bisected batch keep their parent's)
// and is judged after each failure, by the poller's clock; the shard is reported unblocked once
// the batch was handled, discarded or the shard stopped being read here. Default
// DefaultBlockedAfter; zero or negative keeps it.
func WithBlockedAfter(d time.Duration) Option {
	return func(p *Poller) {
		if d > 0 {
			p.blockedAfter = d
		}
	}
}

// stall is how long one batch has been failing, and whether that was reported.
type stall struct {
	since    time.Time // the batch's first failure; zero while it has not failed
	reported bool
	told     bool // a DetailObserver was told the batch is failing
}

// blockage counts a shard's batches reported blocked (several slots may be) and reports the
// shard's transitions between none and some.
type blockage struct {
	mu sync.Mutex // orders the reports of concurrent slots
	n  int
}

// stalled notes a failure of the batch s tracks (its first and last sequence numbers), with its
// cause, and reports the shard blocked when the batch has been failing for longer than the
// threshold.
func (r *reader) stalled(s *stall, first, last, cause string) {
	r.failing(s, first, last, cause)
	now := r.p.now()
	if s.since.IsZero() {
		s.since = now
	}
	failing := now.Sub(s.since)
	if s.reported || failing < r.p.blockedAfter {
		return
	}
	s.reported = true
	r.blocked.mu.Lock()
	defer r.blocked.mu.Unlock()
	if r.blocked.n++; r.blocked.n == 1 {
		r.p.obs.ShardBlocked(r.shardID, true)
	}
	r.p.log.Warn("shard blocked: retrying the same batch", "shard_id", r.shardID,
		"failing_for", failing.Round(time.Millisecond), "blocked_after", r.p.blockedAfter, "cause", cause)
}

// failing tells a DetailObserver that the batch s tracks failed by cause.
func (r *reader) failing(s *stall, first, last, cause string) {
	if r.p.detail != nil {
		s.told = true
		r.p.detail.BatchFailing(r.shardID, first, last, cause)
	}
}

// unstalled ends s: the batch went through, was given up on, or is no longer retried here.
func (r *reader) unstalled(s *stall) {
	if s.told {
		s.told = false
		r.p.detail.BatchFailing(r.shardID, "", "", "")
	}
	s.since = time.Time{}
	if !s.reported {
		return
	}
	s.reported = false
	r.blocked.mu.Lock()
	defer r.blocked.mu.Unlock()
	if r.blocked.n--; r.blocked.n == 0 {
		r.p.obs.ShardBlocked(r.shardID, false)
		r.p.log.Info("shard no longer blocked", "shard_id", r.shardID)
	}
}

// maxCause bounds the text of a failure quoted as a blocked shard's cause.
const maxCause = 512

// clip is a failure's text, cut to maxCause bytes.
func clip(detail []byte) string {
	if len(detail) > maxCause {
		return string(detail[:maxCause]) + "…"
	}
	return string(detail)
}

// ignoredItemFailures notes a response that lists batchItemFailures while the mapping lacks
// ReportBatchItemFailures: Lambda then ignores them and counts the batch as handled, silently.
// Each one is counted; the first one of the mapping is logged.
func (b *batchRun) ignoredItemFailures(payload []byte) {
	if !listsItemFailures(payload) {
		return
	}
	r := b.r
	r.p.obs.BatchItemFailuresIgnored(r.shardID)
	if r.p.warnedIgnored.CompareAndSwap(false, true) {
		b.log().Warn("the function returned batchItemFailures but the mapping's FunctionResponseTypes lacks ReportBatchItemFailures: as Lambda does, the response is ignored and the whole batch counts as handled (logged once per mapping; esm_batch_item_failures_ignored_total counts them)",
			"response", clip(payload))
	}
}

var itemFailuresKey = []byte(`"batchItemFailures"`)

// listsItemFailures reports whether payload is a JSON object with a non-empty batchItemFailures
// list. Responses without the key are rejected without decoding.
func listsItemFailures(payload []byte) bool {
	if !bytes.Contains(payload, itemFailuresKey) {
		return false
	}
	var v struct {
		BatchItemFailures []json.RawMessage `json:"batchItemFailures"`
	}
	return json.Unmarshal(payload, &v) == nil && len(v.BatchItemFailures) > 0
}
