package poller

import (
	"bytes"
	"encoding/json"
	"time"
)

// Two signals operators ask for, about batches that do not go through: a shard blocked on one
// batch for too long, and a function whose batchItemFailures Lambda would ignore.

// DefaultBlockedAfter is how long a shard retries the same batch before it is reported blocked
// (see WithBlockedAfter).
const DefaultBlockedAfter = time.Minute

// WithBlockedAfter sets how long a shard may go on with the same batch (a failed invocation, a
// function not reached, an on-failure destination not reached, one invocation that has not
// returned) before it is reported blocked: Observer.ShardBlocked(shard, true) and a warning
// naming the shard and the last failure. The time runs from the batch's first send (the halves of
// a bisected batch keep their parent's; a failure record's from its first delivery) and is judged
// on the poller's clock at the instant it is up (signals.go), not when a retry ends; the shard is
// reported unblocked once the batch was handled, discarded or the shard stopped being read here.
// Default DefaultBlockedAfter; zero or negative keeps it.
func WithBlockedAfter(d time.Duration) Option {
	return func(p *Poller) {
		if d > 0 {
			p.blockedAfter = d
		}
	}
}

// stalled notes a failure of the batch st tracks (its first and last sequence numbers), with its
// cause; the batch is in flight from then on if it was not (a failure record's delivery). A
// DetailObserver is told.
func (r *reader) stalled(st *stall, first, last, cause string) {
	r.begin(st, time.Time{})
	s := &r.sig
	s.mu.Lock()
	defer s.mu.Unlock()
	st.first, st.last, st.cause = first, last, cause
	st.failures++
	st.failedAt = r.p.now()
	r.tellLocked(st)
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
