package live

import (
	"cmp"
	"slices"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// State is what /live/state.json serves: the mappings at SnapshotAt, as Worker sees them; with
// Scope "fleet", every worker's shards (the other workers' fetched from their own state.json),
// with "worker" this worker's alone.
type State struct {
	SnapshotAt time.Time     `json:"snapshotAt"`
	Worker     string        `json:"worker,omitempty"`
	Scope      string        `json:"scope"`
	Mappings   []MappingView `json:"mappings"`
}

// Scopes of a State.
const (
	ScopeFleet  = "fleet"
	ScopeWorker = "worker"
)

// MappingView is one mapping as the page and state.json show it.
type MappingView struct {
	Function string `json:"function"`
	Stream   string `json:"stream"`
	UUID     string `json:"uuid,omitempty"`
	// Summary counts the shards by state and lists the blocked ones first.
	Summary Summary `json:"summary"`
	// Workers are the workers of the mapping's lease table and what their pages answered (in
	// the fleet scope, with a lease table).
	Workers          []WorkerView `json:"workers,omitempty"`
	Shards           []ShardView  `json:"shards"`
	Delivered        int          `json:"delivered"`
	Dropped          int          `json:"dropped"`
	DeliveryFailures int          `json:"deliveryFailures"`
	LastDelivery     *time.Time   `json:"lastDelivery,omitempty"`
	// Skipped counts the batches an operator skipped (esm skip) here.
	Skipped int `json:"skipped,omitempty"`
	// Rewind is the mapping's latest rewind (esm rewind, on a lease table): in progress, or the
	// last one.
	Rewind *RewindView `json:"rewind,omitempty"`
	// IteratorAgeMillis is the mapping's: the largest latest age of the shards being read.
	IteratorAgeMillis *float64 `json:"iteratorAgeMillis,omitempty"`
}

// Summary is a mapping's shards counted by state.
type Summary struct {
	Shards  int            `json:"shards"`
	ByState map[string]int `json:"byState"`
}

// WorkerView is one worker of the fleet and whether its page answered.
type WorkerView struct {
	ID   string `json:"id"`
	Addr string `json:"addr,omitempty"`
	// Status is WorkerSelf, WorkerOK, WorkerUnreachable or WorkerNoAddr.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// LastAnswer is when its page last answered.
	LastAnswer *time.Time `json:"lastAnswer,omitempty"`
	Shards     int        `json:"shards"` // the shards it reads
}

// Worker statuses.
const (
	WorkerSelf        = "this worker"
	WorkerOK          = "ok"
	WorkerUnreachable = "unreachable"
	WorkerNoAddr      = "no address" // it publishes none (no --metrics-addr, or an older esm)
)

// ShardView is one shard. Times are to the second (the checkpoint's) or the millisecond.
type ShardView struct {
	ShardID      string     `json:"shardId"`
	Parents      []string   `json:"parents,omitempty"`
	State        string     `json:"state"`
	Owner        string     `json:"owner,omitempty"`
	Checkpoint   string     `json:"checkpoint,omitempty"`
	CheckpointAt *time.Time `json:"checkpointAt,omitempty"`
	// IteratorAgeMillis is the latest iterator age, while the shard is read.
	IteratorAgeMillis *float64 `json:"iteratorAgeMillis,omitempty"`
	// BlockedSince is the first failure of the batch a blocked shard retries; Attempts counts the
	// failed attempts of the batch failing now.
	BlockedSince *time.Time `json:"blockedSince,omitempty"`
	Attempts     int        `json:"attempts,omitempty"`
	// RetryingFirst and RetryingLast bound the batch being retried; empty when none is.
	RetryingFirst string     `json:"retryingFirst,omitempty"`
	RetryingLast  string     `json:"retryingLast,omitempty"`
	LastError     string     `json:"lastError,omitempty"`
	LastErrorAt   *time.Time `json:"lastErrorAt,omitempty"`
	Delivered     int        `json:"delivered,omitempty"`
	Dropped       int        `json:"dropped,omitempty"`
	// Unreachable: no worker that answered reads the shard while one did not answer: its owner
	// has probably stopped answering.
	Unreachable bool `json:"unreachable,omitempty"`
	// LastSkip is the last batch of the shard an operator skipped (esm skip); SkipPending the
	// batch ("first..last") of a skip under way.
	LastSkip    *SkipView `json:"lastSkip,omitempty"`
	SkipPending string    `json:"skipPending,omitempty"`

	ages []sample // the iterator-age history, for the sparkline
}

// SkipView is a batch an operator skipped: its sequence numbers and records, where its failure
// record went ("" when the mapping has no destination: dropped), and when.
type SkipView struct {
	First       string     `json:"first"`
	Last        string     `json:"last"`
	Records     int        `json:"records"`
	Destination string     `json:"destination,omitempty"`
	At          *time.Time `json:"at"`
}

// RewindView is a mapping's latest rewind: its revision and state (requested, applying,
// applied, refused), what was asked, by whom and when, and once ended when and what was done.
type RewindView struct {
	Revision    int64                `json:"revision"`
	State       string               `json:"state"`
	InProgress  bool                 `json:"inProgress,omitempty"`
	Request     poller.RewindRequest `json:"request"`
	By          string               `json:"by,omitempty"`
	RequestedAt *time.Time           `json:"requestedAt,omitempty"`
	DoneAt      *time.Time           `json:"doneAt,omitempty"`
	Report      string               `json:"report,omitempty"`
}

// NewRewindView is the view of a rewind notice.
func NewRewindView(n poller.RewindNotice) *RewindView {
	return &RewindView{Revision: n.Revision, State: n.State, InProgress: n.InProgress, Request: n.Request, By: n.By,
		RequestedAt: stamp(n.RequestedAt, time.Millisecond), DoneAt: stamp(n.DoneAt, time.Millisecond), Report: n.Report}
}

// Snapshot returns this worker's mappings as its own page shows them.
func (b *Board) Snapshot() State {
	b.mu.Lock()
	ms := slices.Clone(b.mappings)
	b.mu.Unlock()
	st := State{SnapshotAt: b.now().UTC().Truncate(time.Millisecond), Worker: b.worker, Scope: ScopeWorker,
		Mappings: make([]MappingView, 0, len(ms))}
	for _, m := range ms {
		st.Mappings = append(st.Mappings, m.view(b.worker))
	}
	return st
}

func (m *Mapping) view(worker string) MappingView {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := MappingView{Function: m.function, Stream: m.stream, UUID: m.uuid, Delivered: m.delivered, Dropped: m.dropped,
		DeliveryFailures: m.deliveryFailures, LastDelivery: stamp(m.lastDelivery, time.Millisecond), Skipped: m.skipped, Rewind: m.rewind}
	for id, s := range m.shards {
		if s.state == "" && !s.listed { // only counted (a delivery before any state): not a shard to draw
			continue
		}
		sv := ShardView{ShardID: id, Parents: s.parents, State: s.state, Checkpoint: s.checkpoint,
			CheckpointAt: stamp(s.checkpointAt, time.Second), RetryingFirst: s.failFirst, RetryingLast: s.failLast,
			Attempts: s.attempts, LastError: s.lastError, LastErrorAt: stamp(s.lastErrorAt, time.Millisecond),
			Delivered: s.delivered, Dropped: s.dropped, LastSkip: s.lastSkip, SkipPending: s.skipPending, ages: slices.Clone(s.ages)}
		switch {
		case s.state == "":
			sv.State = StatePending // known from a listing, not yet told
		case s.blocked && s.state == StateReading:
			sv.State, sv.BlockedSince = StateBlocked, stamp(s.blockedSince, time.Millisecond)
		}
		if s.state == StateReading {
			sv.Owner = worker
			if n := len(s.ages); n > 0 {
				age := s.ages[n-1].ms
				sv.IteratorAgeMillis = &age
			}
		}
		v.Shards = append(v.Shards, sv)
	}
	v.finish()
	return v
}

// finish orders the shards by id and computes the summary and the mapping's iterator age.
func (v *MappingView) finish() {
	slices.SortFunc(v.Shards, func(a, b ShardView) int { return cmp.Compare(a.ShardID, b.ShardID) })
	v.Summary = Summary{Shards: len(v.Shards), ByState: map[string]int{}}
	v.IteratorAgeMillis = nil
	for _, s := range v.Shards {
		v.Summary.ByState[s.State]++
		if a := s.IteratorAgeMillis; a != nil && (v.IteratorAgeMillis == nil || *a > *v.IteratorAgeMillis) {
			age := *a
			v.IteratorAgeMillis = &age
		}
	}
}

// stamp is t in UTC to the unit, nil when zero.
func stamp(t time.Time, unit time.Duration) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC().Truncate(unit)
	return &t
}

// addSample adds an iterator-age sample at now to ages (at most one a second: the latest of a
// second wins) and forgets those older than AgeWindow.
func addSample(ages []sample, now time.Time, ms float64) []sample {
	if n := len(ages); n > 0 && now.Sub(ages[n-1].at) < ageSpacing {
		ages[n-1].ms = ms
		return ages
	}
	cut := 0
	for cut < len(ages) && now.Sub(ages[cut].at) > AgeWindow {
		cut++
	}
	return append(ages[cut:], sample{at: now, ms: ms})
}
