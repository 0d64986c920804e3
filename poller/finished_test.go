package poller

import (
	"testing"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// TestShardWithStartedChildIsNotRead: a shard whose child was read (the store holds a checkpoint
// of the child) is finished, whatever the store says of the shard itself: a lease created again
// after its finished one was deleted says "not started". The poller never reads it; its
// children, whose parent is then finished, are read.
func TestShardWithStartedChildIsNotRead(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	parent := "shardId-000000000000"
	f.PutToShard("s", parent, "k", []byte("parent:0"))
	kids := f.Split("s", parent)
	first := f.PutToShard("s", kids[0], "k", []byte("child:0"))
	f.PutToShard("s", kids[0], "k", []byte("child:1"))
	f.PutToShard("s", kids[1], "k", []byte("other:0"))
	table := newLeaseTable()
	// Another worker finished the parent, read the child up to its first record, and the
	// parent's finished lease was deleted; the parent's lease then came back unstarted.
	table.progress[parent] = ShardProgress{Start: TrimHorizon}
	table.progress[kids[0]] = ShardProgress{Checkpoint: first}
	rec := &recorder{}
	w := &memWorker{t: table, id: "A"}
	startWorker(t, f, arn, table, w, rec)
	testkit.WaitFor(t, "the children's records", 5*time.Second, func() bool { return len(rec.deliveries()) >= 2 })
	from := w.claims.Load()
	testkit.WaitFor(t, "ten claim cycles more", 5*time.Second, func() bool { return w.claims.Load() >= from+10 })
	for _, d := range rec.deliveries() {
		if d.shard == parent || d.data == "child:0" {
			t.Fatalf("invoked %s (%s) again: its lineage was read", d.data, d.shard)
		}
	}
	if n := len(rec.deliveries()); n != 2 {
		t.Fatalf("%d deliveries, want child:1 and other:0", n)
	}
}

// TestChildrenOfShardFinishedElsewhereFoundAtOnce: a shard that another worker finished (and
// died before anyone listed its children, which it knew from ChildShards) makes this worker
// list the shards at once, not at the next shard sync (an hour here).
func TestChildrenOfShardFinishedElsewhereFoundAtOnce(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	parent := "shardId-000000000000"
	table := newLeaseTable()
	table.owner[parent] = "Z" // read by another worker
	rec := &recorder{}
	w := &memWorker{t: table, id: "A"}
	startWorker(t, f, arn, table, w, rec)
	testkit.WaitFor(t, "claim cycles", 5*time.Second, func() bool { return w.claims.Load() >= 3 })
	listings := f.Calls("ListShards")

	kids := f.Split("s", parent)
	f.PutToShard("s", kids[0], "k", []byte("child:0"))
	table.mu.Lock()
	table.progress[parent] = ShardProgress{Finished: true}
	delete(table.owner, parent)
	table.mu.Unlock()
	testkit.WaitFor(t, "the child's record", 5*time.Second, func() bool { return len(rec.deliveries()) >= 1 })
	if n := f.Calls("ListShards"); n <= listings {
		t.Fatalf("child read without a new listing (%d, before %d)", n, listings)
	}
}
