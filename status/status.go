package status

import (
	"slices"
	"strings"
	"time"

	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source"
)

// Shard states, as the poller's design names them. A running esm's live state (WithMetricsAddr)
// replaces Pending and Reading with its own, finer one.
const (
	Pending  = "pending"  // a parent is not finished yet
	Reading  = "reading"  // every parent finished: the shard is (or will be) read
	Finished = "finished" // read to its end and checkpointed
)

// Report is one mapping's shards, ordered by shard id.
type Report struct {
	Stream   string `json:"stream"`
	Function string `json:"function"`
	// StateDir says where the progress came from: the state directory, "lease table NAME", or
	// why no checkpoint is shown.
	StateDir string `json:"stateDir"`
	// Summary counts the shards by state.
	Summary Summary `json:"summary"`
	// Workers are the workers whose live view was read (the lease table's), and whether each
	// answered.
	Workers []Worker `json:"workers,omitempty"`
	// Rewind is the mapping's latest rewind (esm rewind), as its lease table says: in progress,
	// or the last one.
	Rewind *live.RewindView `json:"rewind,omitempty"`
	Shards []Shard          `json:"shards"`
}

// Summary is what the first lines of the report say: the shards by state, the mapping's
// iterator age (the largest of the shards read), and the blocked shards.
type Summary struct {
	Shards            int            `json:"shards"`
	ByState           map[string]int `json:"byState"`
	IteratorAgeMillis *float64       `json:"iteratorAgeMillis,omitempty"`
	Blocked           []string       `json:"blocked,omitempty"`
}

// Mappings is what Reader.All found at the metrics address: a JSON list.
type Mappings struct {
	MetricsAddr string
	List        []MappingReport
}

// MappingReport is one mapping of a running esm, as Reader.All finds it: UUID is the mapping's
// (esm serve's), "" for esm run's.
type MappingReport struct {
	UUID string `json:"uuid"`
	Report
}

// Shard is one shard of the mapping.
type Shard struct {
	ShardID    string     `json:"shardId"`
	Parents    []string   `json:"parents,omitempty"`
	State      string     `json:"state"`
	Checkpoint string     `json:"checkpoint,omitempty"`
	Start      string     `json:"start,omitempty"`
	UpdatedAt  *time.Time `json:"updatedAt,omitempty"`
	// Owner is the worker holding the shard's lease (with WithLeaseTable); OwnerSilent: its live
	// view did not answer (what is shown is the table's).
	Owner       string `json:"owner,omitempty"`
	OwnerSilent bool   `json:"ownerSilent,omitempty"`
	// IteratorAgeMillis is the live iterator age a running esm reports (with WithMetricsAddr).
	IteratorAgeMillis *float64 `json:"iteratorAgeMillis,omitempty"`
	// ReadBy is how a running esm reads the shard: polling or subscription (with
	// WithMetricsAddr), and Subscription its subscription's figures.
	ReadBy       string        `json:"readBy,omitempty"`
	Subscription *Subscription `json:"subscription,omitempty"`
	// Trimmed is set for a shard the store knows that the stream no longer lists (retention).
	Trimmed bool `json:"trimmed,omitempty"`
	// A blocked shard: since when (its failing batch's first failure), how many attempts
	// failed, and the last error, as its worker's live page or its blocked mark says.
	BlockedSince *time.Time `json:"blockedSince,omitempty"`
	Attempts     int        `json:"attempts,omitempty"`
	LastError    string     `json:"lastError,omitempty"`
	LastErrorAt  *time.Time `json:"lastErrorAt,omitempty"`
	// RetryingFirst and RetryingLast bound the batch the shard retries (what esm skip --first
	// and --last name); LastSkip is the last batch an operator skipped there.
	RetryingFirst string         `json:"retryingFirst,omitempty"`
	RetryingLast  string         `json:"retryingLast,omitempty"`
	LastSkip      *live.SkipView `json:"lastSkip,omitempty"`
	SkipPending   string         `json:"skipPending,omitempty"` // the batch of a skip under way
}

// Subscription is a shard's enhanced fan-out subscription, as a running esm's metrics say.
type Subscription struct {
	AgeSeconds          *float64 `json:"ageSeconds,omitempty"`
	Renewals            float64  `json:"renewals"`
	InUseRefusals       float64  `json:"inUseRefusals"`
	LastEventAgeSeconds *float64 `json:"lastEventAgeSeconds,omitempty"`
}

// Shards joins a stream's listing with a mapping's progress, as the poller sees it: a shard is
// finished when the progress says so; a parent the listing no longer shows was trimmed and counts
// as finished; a shard is reading when all its parents are finished, pending otherwise. Shards the
// progress knows and the listing does not are included, Trimmed. The result is ordered by shard id.
func Shards(listing []source.Shard, progress map[string]poller.ShardProgress) []Shard {
	listed := map[string]bool{}
	for _, s := range listing {
		listed[s.ID] = true
	}
	finished := func(id string) bool { return progress[id].Finished || !listed[id] }
	var out []Shard
	for _, s := range listing {
		id := s.ID
		st := Shard{ShardID: id, State: Reading}
		for _, p := range s.Parents {
			st.Parents = append(st.Parents, p)
			if !finished(p) {
				st.State = Pending
			}
		}
		st.fill(progress[id])
		out = append(out, st)
	}
	for id, p := range progress { // shards the stream no longer lists
		if !listed[id] {
			st := Shard{ShardID: id, State: Finished, Trimmed: true}
			st.fill(p)
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b Shard) int { return strings.Compare(a.ShardID, b.ShardID) })
	return out
}

func (st *Shard) fill(p poller.ShardProgress) {
	st.Checkpoint, st.Start = p.Checkpoint, p.Start
	if p.Finished {
		st.State = Finished
	}
	if !p.UpdatedAt.IsZero() {
		t := p.UpdatedAt.UTC()
		st.UpdatedAt = &t
	}
}

// ApplyLive adds what a running esm says of the shards: its state (a finished shard stays
// finished), iterator age and subscription. Shards live does not name are left as they are.
func (r *Report) ApplyLive(live map[string]LiveShard) {
	for i := range r.Shards {
		sh := &r.Shards[i]
		if l, ok := live[sh.ShardID]; ok {
			if l.State != "" && sh.State != Finished {
				sh.State = l.State
			}
			sh.IteratorAgeMillis, sh.ReadBy, sh.Subscription = l.IteratorAgeMillis, l.ReadBy, l.Subscription
			if l.Owner != "" { // its worker's live page answered: what it says stands
				sh.Owner = l.Owner
				sh.BlockedSince, sh.Attempts, sh.LastError, sh.LastErrorAt = l.BlockedSince, l.Attempts, l.LastError, l.LastErrorAt
				sh.RetryingFirst, sh.RetryingLast, sh.LastSkip, sh.SkipPending = l.RetryingFirst, l.RetryingLast, l.LastSkip, l.SkipPending
			}
		}
	}
}

// summarize counts the shards by state, finds the mapping's iterator age and lists the blocked
// shards, longest blocked first.
func (r Report) summarize() Summary {
	sum := Summary{Shards: len(r.Shards), ByState: map[string]int{}}
	var blocked []Shard
	for _, s := range r.Shards {
		sum.ByState[s.State]++
		if a := s.IteratorAgeMillis; a != nil && (sum.IteratorAgeMillis == nil || *a > *sum.IteratorAgeMillis) {
			age := *a
			sum.IteratorAgeMillis = &age
		}
		if s.State == live.StateBlocked {
			blocked = append(blocked, s)
		}
	}
	slices.SortStableFunc(blocked, func(a, b Shard) int { return since(a).Compare(since(b)) })
	for _, s := range blocked {
		sum.Blocked = append(sum.Blocked, s.ShardID)
	}
	return sum
}

func since(s Shard) time.Time {
	if s.BlockedSince == nil {
		return time.Time{}
	}
	return *s.BlockedSince
}
