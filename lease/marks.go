package lease

import (
	"context"
	"sync"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// MarkSpacing is the least time between two blocked-mark writes of one worker: at most 0.2
// write units a second per worker, 20 for a fleet of 100 whose every worker's shards keep
// blocking and recovering, and none while nothing changes.
const MarkSpacing = 5 * time.Second

// maxMarkCause bounds the cause a mark carries, in bytes.
const maxMarkCause = 300

// BlockedMarks is the poller.Observer (and DetailObserver) that marks this worker's blocked
// shards on their lease items, for esm status run where the workers cannot be reached: a
// write when a shard becomes blocked (since when, the cause, the attempts) and one when it
// stops being blocked, coalesced per shard and spaced by MarkSpacing; Run writes them.
type BlockedMarks struct {
	poller.NopObserver
	d    *Dynamo
	wake chan struct{}

	mu      sync.Mutex
	failing map[string]*Blocked // the batch failing now, by shard
	pending map[string]*Blocked // marks to write (nil: remove), by shard
	written map[string]bool     // shards with a mark written
}

// BlockedMarks returns the observer that marks this worker's blocked shards; run its Run while
// the poller runs.
func (d *Dynamo) BlockedMarks() *BlockedMarks {
	return &BlockedMarks{d: d, wake: make(chan struct{}, 1), failing: map[string]*Blocked{},
		pending: map[string]*Blocked{}, written: map[string]bool{}}
}

var _ poller.DetailObserver = (*BlockedMarks)(nil)

// ShardLineage is not needed here.
func (*BlockedMarks) ShardLineage(string, []string) {}

// Checkpointed is not needed here.
func (*BlockedMarks) Checkpointed(string, string) {}

// BatchFailing follows the shard's failing batch: since when, how many attempts, the last cause.
func (m *BlockedMarks) BatchFailing(shardID string, f poller.BatchFailure) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.First == "" {
		delete(m.failing, shardID)
		return
	}
	cause := f.Cause
	if len(cause) > maxMarkCause {
		cause = cause[:maxMarkCause] + "…"
	}
	m.failing[shardID] = &Blocked{Since: f.Since, Cause: cause, CauseAt: f.FailedAt, Attempts: f.Attempts}
}

// ShardBlocked queues the shard's mark, or its removal.
func (m *BlockedMarks) ShardBlocked(shardID string, blocked bool) {
	m.mu.Lock()
	switch {
	case blocked:
		b := Blocked{Since: m.d.cfg.now()}
		if f := m.failing[shardID]; f != nil {
			b = *f
		}
		m.pending[shardID] = &b
	case m.written[shardID]:
		m.pending[shardID] = nil
	default: // never written: nothing to remove
		delete(m.pending, shardID)
	}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// ShardState forgets a shard no longer read here.
func (m *BlockedMarks) ShardState(shardID, state string) {
	if state != poller.StateReading {
		m.mu.Lock()
		delete(m.failing, shardID)
		m.mu.Unlock()
	}
}

// Run writes the queued marks, one every MarkSpacing at most, until ctx ends.
func (m *BlockedMarks) Run(ctx context.Context) error {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.wake:
		}
		for {
			if wait := MarkSpacing - m.d.cfg.now().Sub(last); !last.IsZero() && wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return nil
				case <-t.C:
				}
			}
			shard, b, ok := m.next()
			if !ok {
				break
			}
			last = m.d.cfg.now()
			if err := m.d.markBlocked(ctx, shard, b); err != nil && ctx.Err() == nil {
				m.d.log.Warn("blocked mark not written; esm status shows it when the shard's owner answers", "shard_id", shard, "err", err)
			}
		}
	}
}

// next takes a queued mark.
func (m *BlockedMarks) next() (string, *Blocked, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, b := range m.pending {
		delete(m.pending, id)
		if b == nil {
			delete(m.written, id)
		} else {
			m.written[id] = true
		}
		return id, b, true
	}
	return "", nil, false
}
