package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/poller"
)

func shard(id string, parents ...string) types.Shard {
	s := types.Shard{ShardId: aws.String(id)}
	if len(parents) > 0 {
		s.ParentShardId = aws.String(parents[0])
	}
	if len(parents) > 1 {
		s.AdjacentParentShardId = aws.String(parents[1])
	}
	return s
}

// TestShardStates: a split (0 → 2, 3) and a merge (2 + 3 → 4, and 1 + 4 → 5), with parents
// finished, being read, or trimmed away by retention.
func TestShardStates(t *testing.T) {
	shards := []types.Shard{shard("s0"), shard("s1"), shard("s2", "s0"), shard("s3", "s0"), shard("s4", "s2", "s3"), shard("s5", "s1", "s4"), shard("s7", "s6")}
	progress := map[string]poller.ShardProgress{
		"s0": {Checkpoint: "10", Finished: true},
		"s1": {Checkpoint: "11"},
		"s2": {Checkpoint: "20", Finished: true},
		"s3": {Start: "TRIM_HORIZON"},
		"s9": {Checkpoint: "90", Finished: true}, // in the store, no longer listed
	}
	got := map[string]shardStatus{}
	for _, s := range shardStates(shards, progress) {
		got[s.ShardID] = s
	}
	for id, want := range map[string]string{
		"s0": stateFinished, // the store says so
		"s1": stateReading,  // no parent, checkpointed
		"s2": stateFinished,
		"s3": stateReading,  // its parent finished
		"s4": statePending,  // s3 is not finished
		"s5": statePending,  // s1 and s4 are not
		"s7": stateReading,  // its parent s6 was trimmed: it counts as finished
		"s9": stateFinished, // trimmed, from the store
	} {
		if got[id].State != want {
			t.Errorf("%s is %s, want %s", id, got[id].State, want)
		}
	}
	if !got["s9"].Trimmed || got["s9"].Checkpoint != "90" || strings.Join(got["s4"].Parents, ",") != "s2,s3" {
		t.Errorf("shard details wrong: %+v %+v", got["s9"], got["s4"])
	}
	tree := renderTree(statusReport{Stream: "arn", Function: "fn", StateDir: ".esm", Shards: shardStates(shards, progress)})
	for _, want := range []string{
		"s0                                           finished  checkpoint 10\n",
		"├─ s2                                        finished  checkpoint 20\n",
		"│  └─ s4                                     pending   (merged with s3)\n",
		"└─ s3                                        reading   starts at TRIM_HORIZON\n",
		"s1                                           reading   checkpoint 11\n└─ s5                                        pending   (merged with s4)\n",
		"s7                                           reading\n",
		"s9                                           finished  checkpoint 90 (trimmed from the stream)",
	} {
		if !strings.Contains(tree, want) {
			t.Errorf("tree lacks %q:\n%s", want, tree)
		}
	}
}

// TestStatusReadsFileStore reads what checkpoint.FileStore wrote (through checkpoint.ReadFile), and checks
// that a held store is reported, not waited for.
func TestStatusReadsFileStore(t *testing.T) {
	dir := t.TempDir()
	store, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	key := checkpoint.MappingKey("arn:aws:kinesis:us-east-1:000000000000:stream/s", "arn:aws:lambda:us-east-1:000000000000:function:f")
	want := poller.ShardProgress{Checkpoint: "4959", Finished: true, UpdatedAt: time.Now().UTC().Truncate(time.Second)}
	if err := store.Mapping(key).Save(context.Background(), map[string]poller.ShardProgress{"shardId-000000000001": want}); err != nil {
		t.Fatal(err)
	}
	if _, err := readProgress(dir, key); !errors.Is(err, checkpoint.ErrLocked) {
		t.Errorf("reading a held store: %v, want an error wrapping checkpoint.ErrLocked", err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := readProgress(dir, key)
	if err != nil {
		t.Fatal(err)
	}
	if p := got["shardId-000000000001"]; p.Checkpoint != want.Checkpoint || !p.Finished || !p.UpdatedAt.Equal(want.UpdatedAt) || len(got) != 1 {
		t.Fatalf("read %+v, want %+v", got, want)
	}
	if got, err := readProgress(filepath.Join(dir, "none"), key); err != nil || len(got) != 0 {
		t.Fatalf("a state directory that does not exist: %v, %v; want no progress", got, err)
	}
}
