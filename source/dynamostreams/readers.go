package dynamostreams

import (
	"log/slog"
	"sync"
	"time"
)

// readers counts the readers of each shard in this process, over every mapping: DynamoDB
// Streams throttles a shard read by more than MaxReadersPerShard processes at once, so a reader
// that makes more is warned about, once per shard (it still reads: LimitExceededException is
// backed off). A reader counts while it opened or read the shard within the last readerActive,
// and no longer once it read the shard to its end: the engine tells a source nothing of a
// reader's start and stop, and a reader that reads polls every PollInterval.
type readers struct {
	mu   sync.Mutex
	last map[string]map[*Stream]*reading // stream ARN + shard id → its readers
}

// reading is one reader's use of a shard.
type reading struct {
	at     time.Time // its last open or read
	warned bool      // it was warned about
}

// readerActive is how long after its last call a reader still counts.
const readerActive = 5 * time.Second

// shardReaders is the process's count.
var shardReaders = &readers{last: map[string]map[*Stream]*reading{}}

// touch counts s a reader of the shard at now, and warns (once for s and the shard) when it
// makes more than MaxReadersPerShard.
func (r *readers) touch(log *slog.Logger, s *Stream, streamARN, shardID string, now time.Time) {
	key := streamARN + " " + shardID
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.last[key]
	if m == nil {
		m = map[*Stream]*reading{}
		r.last[key] = m
	}
	for other, rd := range m {
		if now.Sub(rd.at) > readerActive {
			delete(m, other)
		}
	}
	rd := m[s]
	if rd == nil {
		rd = &reading{}
		m[s] = rd
	}
	rd.at = now
	if len(m) > MaxReadersPerShard && !rd.warned {
		rd.warned = true
		log.Warn("more than two readers share a DynamoDB Streams shard: the stream throttles them (LimitExceededException); map fewer functions to this stream",
			"stream_arn", streamARN, "shard_id", shardID, "readers", len(m))
	}
}

// done counts s out of the shard's readers: it read the shard to its end.
func (r *readers) done(s *Stream, streamARN, shardID string) {
	key := streamARN + " " + shardID
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last[key], s)
	if len(r.last[key]) == 0 {
		delete(r.last, key)
	}
}
