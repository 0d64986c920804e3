package lease

import (
	"testing"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// TestLeaseKeepsLatestStartTimestamp: a lease created for a LATEST start keeps when the start
// was decided, so a worker that takes the shard before its first checkpoint resumes there; an
// item without the attribute (KCL's, or an older esm's) reads as before.
func TestLeaseKeepsLatestStartTimestamp(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 123e6, time.UTC)
	it, err := newItem(poller.ShardInfo{ShardID: "shardId-000000000000",
		Initial: poller.ShardProgress{Start: poller.Latest, StartTimestamp: at}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := decodeLease(it)
	if err != nil {
		t.Fatal(err)
	}
	if l.Progress.Start != poller.Latest || !l.Progress.StartTimestamp.Equal(at) {
		t.Fatalf("decoded %+v, want LATEST from %s", l.Progress, at)
	}
	delete(it, attrStartTimestamp)
	if l, err = decodeLease(it); err != nil || !l.Progress.StartTimestamp.IsZero() || l.Progress.Start != poller.Latest {
		t.Fatalf("item without %s: %+v, %v", attrStartTimestamp, l.Progress, err)
	}
	u, err := newProgressUpdate(poller.ShardProgress{Start: poller.Latest, StartTimestamp: at})
	if err != nil || u.values[":startts"] == nil {
		t.Fatalf("progress update does not write the start timestamp: %+v, %v", u, err)
	}
}
