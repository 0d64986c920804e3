package lease

import (
	"slices"
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

// TestLeaseKeepsDiscardedRuns: the slot batches given up on that the checkpoint has not passed
// (ShardProgress.Discarded) are written with the checkpoint and read back, so the shard's next
// owner does not read them again; a progress without them removes the attribute.
func TestLeaseKeepsDiscardedRuns(t *testing.T) {
	runs := []poller.DiscardedRun{{First: "100", Last: "180", Slot: 2, Of: 5}, {First: "150", Last: "150", Slot: 0, Of: 5}}
	u, err := newProgressUpdate(poller.ShardProgress{Checkpoint: "90", Discarded: runs})
	if err != nil || u.values[":disc"] == nil {
		t.Fatalf("progress update does not write the discarded runs: %+v, %v", u, err)
	}
	it, err := newItem(poller.ShardInfo{ShardID: "shardId-000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	it[attrDiscarded] = u.values[":disc"]
	l, err := decodeLease(it)
	if err != nil || !slices.Equal(l.Progress.Discarded, runs) {
		t.Fatalf("decoded %+v (%v), want %+v", l.Progress.Discarded, err, runs)
	}
	if u, err = newProgressUpdate(poller.ShardProgress{Checkpoint: "200"}); err != nil || !slices.Contains(u.remove, "#disc") {
		t.Fatalf("a progress without discarded runs leaves the attribute: %+v, %v", u, err)
	}
}
