package prom

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// TestIteratorAgeAfterCatchingUp (issue 40): a mapping that starts 30 s behind shows about 30 s
// while it reads its backlog, and once it has caught up its iterator age, each shard's and the
// mapping's, is under a second within two poll intervals, by GetRecords and by an enhanced
// fan-out subscription (whose caught-up events the pump keeps from its parked reader). Before, the
// age was set only when a batch was sent, so it stayed at the last batch's for as long as the
// shard stayed idle.
func TestIteratorAgeAfterCatchingUp(t *testing.T) {
	for _, efo := range []bool{false, true} {
		t.Run(fmt.Sprintf("subscription=%t", efo), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { ageAfterCatchingUp(t, efo) })
		})
	}
}

func ageAfterCatchingUp(t *testing.T, efo bool) {
	const shards, records, backlog = 2, 40, 30 * time.Second
	f := fakekinesis.New(fakekinesis.WithSubscriptionHeartbeat(5 * time.Second))
	cfg := poller.Config{StartingPosition: poller.TrimHorizon, BatchSize: 5,
		PollInterval: time.Second, ShardSyncInterval: time.Hour}
	arn := f.CreateStream("s", shards)
	var opts []kinesissrc.Option
	if efo {
		opts = append(opts, kinesissrc.WithConsumer(f.RegisterConsumer("s", "esm")))
	}
	last := map[string]string{} // each shard's last record
	for i := range records {
		shard, seq := f.Put("s", fmt.Sprint("k", i), []byte("x"))
		last[shard] = seq
	}
	time.Sleep(backlog)
	reg := prometheus.NewRegistry()
	store := poller.NewMemoryStore()
	p, err := poller.New(kinesissrc.MustNew(f, arn, opts...), cfg, store, inprocess.New(func() error { time.Sleep(100 * time.Millisecond); return nil }),
		poller.WithObserver(New(reg, "fn", "orders")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	mapping := map[string]string{LabelFunction: "fn", LabelStream: "orders"}
	var most float64
	for caughtUp := false; !caughtUp; {
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if m, ok := gather(t, reg).find(NameMappingIteratorAge, mapping); ok {
			most = max(most, m.GetGauge().GetValue())
		}
		caughtUp = checkpointed(t, store, last)
	}
	if most < float64(backlog/time.Millisecond) {
		t.Fatalf("the mapping's age was at most %v ms while it read a backlog %s old", most, backlog)
	}
	time.Sleep(2 * cfg.PollInterval)
	synctest.Wait()
	fams := gather(t, reg)
	if got := fams.value(t, NameMappingIteratorAge, mapping); got >= 1000 {
		t.Fatalf("%s = %v ms two poll intervals after the mapping caught up, want under 1000", NameMappingIteratorAge, got)
	}
	for i := range shards {
		if got := fams.value(t, "IteratorAge", shardLabels(fmt.Sprintf("shardId-%012d", i))); got >= 1000 {
			t.Fatalf("shard %d's IteratorAge = %v ms two poll intervals after it caught up, want under 1000", i, got)
		}
	}
}

// checkpointed reports whether every shard's checkpoint is at its last record.
func checkpointed(t *testing.T, store *poller.MemoryStore, last map[string]string) bool {
	t.Helper()
	progress, err := store.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for shard, seq := range last {
		if progress[shard].Checkpoint != seq {
			return false
		}
	}
	return true
}
