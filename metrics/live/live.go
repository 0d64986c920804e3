// Package live keeps what an operator asks of the mappings running in this process and serves it
// as a live page: for each mapping a summary (shards by state, iterator age), its blocked shards
// first with their errors, the lineage (the open shards by generation, the finished ones folded),
// and each shard's state (pending on its parents, reading, blocked, finished, or released to
// another worker), owner, iterator age over the last minutes, checkpoint, the batch it is
// retrying with the last error, and the mapping's on-failure deliveries.
//
// A [Board] holds the mappings; [Board.Add] returns a [Mapping], the poller.Observer (and
// poller.DetailObserver) that feeds it. With [WithPeers] the board also shows the shards the other
// workers of the lease table read, fetched from their own state. [Board.Handler] serves /live, a
// page that works as plain HTML without JavaScript (and reloads itself every few seconds) and,
// with JavaScript, patches its content in place every second with a small inline script: no
// front-end build; and /live/state.json, the same state as JSON ([State]; each mapping's shards
// as a [ShardTable], their field names once rather than on every shard).
package live

import (
	"slices"
	"sync"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// AgeWindow is how far back a shard's iterator age is kept and drawn.
const AgeWindow = 5 * time.Minute

// ageSpacing is the least time between two kept iterator-age samples of a shard.
const ageSpacing = time.Second

// Display states: the poller's, and blocked.
const (
	StatePending  = poller.StatePending
	StateReading  = poller.StateReading
	StateBlocked  = "blocked"
	StateFinished = poller.StateFinished
	StateReleased = poller.StateReleased
)

// Board is the live state of the mappings of this process. Safe for concurrent use.
type Board struct {
	worker string
	now    func() time.Time
	fleet  *fleet // the other workers (WithPeers); nil: this worker alone

	mu       sync.Mutex
	mappings []*Mapping
}

// Option configures New.
type Option func(*Board)

// WithWorker names this worker (its lease-table worker ID): the owner shown for the shards it
// reads. Without it, they show "this worker".
func WithWorker(id string) Option { return func(b *Board) { b.worker = id } }

// WithClock sets the clock of the iterator-age history (default time.Now).
func WithClock(now func() time.Time) Option { return func(b *Board) { b.now = now } }

// New returns an empty board.
func New(opts ...Option) *Board {
	b := &Board{now: time.Now, worker: "this worker"}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Add adds a mapping of function on stream to the board and returns its observer.
func (b *Board) Add(function, stream string) *Mapping {
	m := &Mapping{board: b, function: function, stream: stream, shards: map[string]*shard{}}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mappings = append(b.mappings, m)
	return m
}

// Remove takes m off the board (a mapping deleted while the process runs).
func (b *Board) Remove(m *Mapping) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mappings = slices.DeleteFunc(b.mappings, func(x *Mapping) bool { return x == m })
}

// Mapping is one mapping's live state; it is the poller.Observer that feeds it. Its methods are
// safe for concurrent use and take one short lock.
type Mapping struct {
	poller.NopObserver
	board            *Board
	function, stream string

	mu                                   sync.Mutex
	uuid                                 string
	shards                               map[string]*shard
	delivered, dropped, deliveryFailures int
	lastDelivery                         time.Time
	skipped                              int         // batches skipped by an operator
	rewind                               *RewindView // the mapping's latest rewind (esm rewind)
}

var (
	_ poller.Observer       = (*Mapping)(nil)
	_ poller.DetailObserver = (*Mapping)(nil)
	_ poller.SkipObserver   = (*Mapping)(nil)
	_ poller.RewindObserver = (*Mapping)(nil)
)

type shard struct {
	listed       bool // told its lineage
	parents      []string
	state        string // the poller's; "" before the first
	blocked      bool
	blockedSince time.Time // the failing batch's first failure, while blocked
	checkpoint   string
	checkpointAt time.Time
	ages         []sample
	// The batch failing now (first == "": none), since when and how many attempts failed, and the
	// last failure's cause, kept after it.
	failFirst, failLast string
	failSince           time.Time
	attempts            int
	lastError           string
	lastErrorAt         time.Time
	delivered, dropped  int
	lastSkip            *SkipView // the last batch an operator skipped here
	skipPending         string    // "first..last" of a skip ordered and not yet answered
}

type sample struct {
	at time.Time
	ms float64
}

// SetMappingUUID sets the mapping's UUID shown on the page.
func (m *Mapping) SetMappingUUID(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.uuid = id
}

// shard returns the shard's state, creating it; m.mu is held.
func (m *Mapping) shard(id string) *shard {
	s := m.shards[id]
	if s == nil {
		s = &shard{}
		m.shards[id] = s
	}
	return s
}

func (m *Mapping) update(id string, f func(s *shard)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m.shard(id))
}

// ShardState records the shard's state.
func (m *Mapping) ShardState(id, state string) {
	m.update(id, func(s *shard) {
		s.state = state
		if state != poller.StateReading {
			s.blocked, s.blockedSince = false, time.Time{}
		}
	})
}

// ShardBlocked records whether the shard is blocked, since its failing batch's first failure.
func (m *Mapping) ShardBlocked(id string, blocked bool) {
	now := m.board.now()
	m.update(id, func(s *shard) {
		switch {
		case !blocked:
			s.blockedSince = time.Time{}
		case !s.blocked:
			s.blockedSince = cmpTime(s.failSince, now)
		}
		s.blocked = blocked
	})
}

// cmpTime is t, or else when t is zero.
func cmpTime(t, orElse time.Time) time.Time {
	if t.IsZero() {
		return orElse
	}
	return t
}

// ShardLineage records the shard's parents.
func (m *Mapping) ShardLineage(id string, parents []string) {
	m.update(id, func(s *shard) {
		s.listed = true
		if !slices.Equal(s.parents, parents) {
			s.parents = slices.Clone(parents)
		}
	})
}

// Checkpointed records the shard's checkpoint.
func (m *Mapping) Checkpointed(id, seq string) {
	now := m.board.now()
	m.update(id, func(s *shard) { s.checkpoint, s.checkpointAt = seq, now })
}

// BatchFailing records the batch the shard is retrying and its cause.
func (m *Mapping) BatchFailing(id string, f poller.BatchFailure) {
	at := f.FailedAt
	if at.IsZero() {
		at = m.board.now()
	}
	m.update(id, func(s *shard) {
		s.failFirst, s.failLast, s.failSince, s.attempts = f.First, f.Last, f.Since, f.Attempts
		if f.Cause != "" {
			s.lastError, s.lastErrorAt = f.Cause, at
		}
	})
}

// IteratorAge adds a sample to the shard's iterator-age history (see addSample).
func (m *Mapping) IteratorAge(id string, age time.Duration) {
	now := m.board.now()
	ms := float64(max(age, 0)) / float64(time.Millisecond)
	m.update(id, func(s *shard) { s.ages = addSample(s.ages, now, ms) })
}

// RecordsDelivered counts records sent to the on-failure destination.
func (m *Mapping) RecordsDelivered(id string, n int) {
	now := m.board.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.shard(id).delivered += n
	m.delivered += n
	m.lastDelivery = now
}

// RecordsDropped counts records discarded without reaching a destination.
func (m *Mapping) RecordsDropped(id string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.shard(id).dropped += n
	m.dropped += n
}

// DestinationDeliveryFailed counts failed sends to the on-failure destination.
func (m *Mapping) DestinationDeliveryFailed(string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deliveryFailures++
}

// SkipPending records a skip under way (esm skip), until it was answered.
func (m *Mapping) SkipPending(id, first, last string, pending bool) {
	m.update(id, func(s *shard) {
		s.skipPending = ""
		if pending {
			s.skipPending = first + ".." + last
		}
	})
}

// BatchSkipped records the batch an operator skipped (esm skip) as the shard's last skip.
func (m *Mapping) BatchSkipped(id string, k poller.Skipped) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.skipped++
	m.shard(id).lastSkip = &SkipView{First: k.First, Last: k.Last, Records: k.Records, Destination: k.Destination,
		At: stamp(k.At, time.Millisecond)}
}

// RewindSeen records the mapping's latest rewind: in progress, or the last one, as its table says.
func (m *Mapping) RewindSeen(n poller.RewindNotice) {
	v := NewRewindView(n)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rewind = v
}

// RewindEnded: the page shows the rewind RewindSeen was told of; the metrics count it.
func (m *Mapping) RewindEnded(poller.RewindNotice) {}
