package poller

import (
	"fmt"
	"strings"
	"time"
)

// RewindNotice is a mapping's latest rewind on its lease table as a worker saw it: its revision,
// state (requested, applying, applied, refused: lease.Rewind*), request, who asked and when, and,
// once it ended, when and what was done or why it was refused.
type RewindNotice struct {
	Revision int64
	State    string
	// InProgress: State is requested or applying; the workers of the mapping invoke nothing.
	InProgress  bool
	Request     RewindRequest
	By          string
	RequestedAt time.Time
	DoneAt      time.Time
	Report      string
}

// RewindObserver is what an Observer may also implement to be told of a mapping's rewinds (the
// live page, the metrics); the runner finds it by type assertion. Its methods must be cheap and
// safe for concurrent use.
type RewindObserver interface {
	// RewindSeen: the mapping's latest rewind, read from its table when the worker starts, when
	// it sees one requested (in progress), and when it starts again after one (ended).
	RewindSeen(n RewindNotice)
	// RewindEnded: a rewind this worker stopped for ended (n.State applied or refused); called
	// once per rewind per worker, after RewindSeen of the same notice.
	RewindEnded(n RewindNotice)
}

// String says what the request asks, in a line: "every shard to 2026-…", "shards a b: replay
// [2026-…, 2026-…)", "shard a to sequence number 4968…".
func (q RewindRequest) String() string {
	which := "every shard"
	if len(q.Shards) > 0 {
		which = "shards " + strings.Join(q.Shards, " ")
	}
	switch {
	case len(q.Sequences) > 0:
		var to []string
		for _, id := range sortedIDs(q.Sequences) {
			to = append(to, id+" to sequence number "+q.Sequences[id])
		}
		return strings.Join(to, ", ")
	case !q.Until.IsZero():
		return fmt.Sprintf("%s: replay [%s, %s)", which, q.Timestamp.UTC().Format(time.RFC3339), q.Until.UTC().Format(time.RFC3339))
	default:
		return which + " to " + q.Timestamp.UTC().Format(time.RFC3339)
	}
}
