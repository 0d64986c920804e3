package poller

import (
	"context"
	"maps"
	"sync"
	"time"
)

// ShardProgress is what is durably known about one shard of a mapping.
type ShardProgress struct {
	// Checkpoint is the sequence number of the last record fully handled; "" when none was.
	Checkpoint string `json:"checkpoint,omitempty"`
	// Finished is set once the shard was read to its end and every record was handled. A finished
	// shard is never read again, and its children may start.
	Finished bool `json:"finished,omitempty"`
	// Start is the position a shard without a checkpoint starts from (TRIM_HORIZON, LATEST or
	// AT_TIMESTAMP), decided once when the mapping first saw the stream. Shards found later (children)
	// have none and start at their first record.
	Start string `json:"start,omitempty"`
	// StartTimestamp is when a LATEST start was decided (millisecond precision, as Kinesis
	// arrival times). A shard that has no checkpoint yet is reopened AT_TIMESTAMP there after a
	// restart, so that records written while esm was down are not skipped. Progress stored
	// without it (older versions) reopens at LATEST.
	StartTimestamp time.Time `json:"startTimestamp,omitzero"`
	// Window is the open tumbling window and its state (TumblingWindowInSeconds > 0).
	Window *WindowState `json:"window,omitempty"`
	// Rewind is what an operator's rewind wrote (rewind.go): where the shard opens until its
	// next checkpoint, and the replay window it is in. Nil when none applies.
	Rewind *Rewind `json:"rewind,omitempty"`
	// Discarded are slot batches given up on (ParallelizationFactor > 1) that the checkpoint
	// has not passed yet (discarded.go): not read again by the shard's next owner.
	Discarded []DiscardedRun `json:"discarded,omitempty"`
	// UpdatedAt is when the progress was last written.
	UpdatedAt time.Time `json:"updatedAt"`
}

// Store keeps the progress of one mapping durably. A checkpoint is written only after every
// record up to it was handled.
type Store interface {
	// Load returns the progress of every shard the mapping has recorded.
	Load(ctx context.Context) (map[string]ShardProgress, error)
	// Save records the progress of the given shards, all or none.
	Save(ctx context.Context, updates map[string]ShardProgress) error
}

// MemoryStore is a Store in memory, for tests, benchmarks and embedding where progress need not
// survive the process.
type MemoryStore struct {
	mu sync.Mutex
	m  map[string]ShardProgress
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{m: map[string]ShardProgress{}} }

// Load implements Store.
func (s *MemoryStore) Load(context.Context) (map[string]ShardProgress, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.m), nil
}

// Save implements Store.
func (s *MemoryStore) Save(_ context.Context, updates map[string]ShardProgress) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(s.m, updates)
	return nil
}
