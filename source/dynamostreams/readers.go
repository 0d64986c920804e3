package dynamostreams

import (
	"log/slog"
	"sync"
)

// readers counts the readers of each shard in this process, over every mapping: DynamoDB
// Streams throttles a shard read by more than MaxReadersPerShard processes at once, so a third
// reader is warned about when it starts (it still reads: LimitExceededException is backed off).
type readers struct {
	mu sync.Mutex
	n  map[string]int // stream ARN + shard id: readers now
}

// shardReaders is the process's count.
var shardReaders = &readers{n: map[string]int{}}

// join counts a reader of the shard in, warning when it makes more than MaxReadersPerShard;
// leave counts it out again.
func (r *readers) join(log *slog.Logger, streamARN, shardID string) (leave func()) {
	key := streamARN + " " + shardID
	r.mu.Lock()
	r.n[key]++
	n := r.n[key]
	r.mu.Unlock()
	if n > MaxReadersPerShard {
		log.Warn("more than two readers share a DynamoDB Streams shard: the stream throttles them (LimitExceededException); map fewer functions to this stream",
			"stream_arn", streamARN, "shard_id", shardID, "readers", n)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.n[key]--; r.n[key] == 0 {
				delete(r.n, key)
			}
		})
	}
}
