package status_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
	"github.com/kinesis-esm/esm/status"
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

func render(t *testing.T, r status.Report) string {
	t.Helper()
	var b strings.Builder
	if err := r.Render(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
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
	got := map[string]status.Shard{}
	for _, s := range status.Shards(kinesissrc.ShardsOf(shards), progress) {
		got[s.ShardID] = s
	}
	for id, want := range map[string]string{
		"s0": status.Finished, // the store says so
		"s1": status.Reading,  // no parent, checkpointed
		"s2": status.Finished,
		"s3": status.Reading,  // its parent finished
		"s4": status.Pending,  // s3 is not finished
		"s5": status.Pending,  // s1 and s4 are not
		"s7": status.Reading,  // its parent s6 was trimmed: it counts as finished
		"s9": status.Finished, // trimmed, from the store
	} {
		if got[id].State != want {
			t.Errorf("%s is %s, want %s", id, got[id].State, want)
		}
	}
	if !got["s9"].Trimmed || got["s9"].Checkpoint != "90" || strings.Join(got["s4"].Parents, ",") != "s2,s3" {
		t.Errorf("shard details wrong: %+v %+v", got["s9"], got["s4"])
	}
	tree := render(t, status.Report{Stream: "arn", Function: "fn", StateDir: ".esm", Shards: status.Shards(kinesissrc.ShardsOf(shards), progress)})
	for _, want := range []string{
		"stream    arn\nfunction  fn\nstate     .esm\nshards    8: 3 reading, 2 pending, 3 finished\n\n",
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

// fakeKinesis answers ListShards with shards and DescribeStreamSummary with arns (by name or
// ARN); any other call panics (the nil embedded interface).
type fakeKinesis struct {
	kinesissrc.API
	shards map[string][]types.Shard // by stream ARN
	arns   map[string]string        // stream name or ARN → ARN
}

func (f fakeKinesis) ListShards(_ context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	s, ok := f.shards[aws.ToString(in.StreamARN)]
	if !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no stream")}
	}
	return &kinesis.ListShardsOutput{Shards: s}, nil
}

func (f fakeKinesis) DescribeStreamSummary(_ context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	arn, ok := f.arns[aws.ToString(in.StreamARN)+aws.ToString(in.StreamName)]
	if !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no stream")}
	}
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{StreamARN: aws.String(arn)}}, nil
}

// TestStatusReadsFileStore reads what checkpoint.FileStore wrote (through checkpoint.ReadFile), and checks
// that a held store is reported, not waited for.
func TestStatusReadsFileStore(t *testing.T) {
	const streamARN, fn = "arn:aws:kinesis:us-east-1:000000000000:stream/s", "arn:aws:lambda:us-east-1:000000000000:function:f"
	ctx := context.Background()
	kin := fakeKinesis{shards: map[string][]types.Shard{streamARN: {shard("shardId-000000000001")}}}
	dir := t.TempDir()
	store, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	key := checkpoint.MappingKey(streamARN, fn)
	want := poller.ShardProgress{Checkpoint: "4959", Finished: true, UpdatedAt: time.Now().UTC().Truncate(time.Second)}
	if err := store.Mapping(key).Save(ctx, map[string]poller.ShardProgress{"shardId-000000000001": want}); err != nil {
		t.Fatal(err)
	}
	if _, err := status.New(kin, status.WithStateDir(dir)).Mapping(ctx, streamARN, fn); !errors.Is(err, checkpoint.ErrLocked) {
		t.Errorf("reading a held store: %v, want an error wrapping checkpoint.ErrLocked", err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := status.New(kin, status.WithStateDir(dir)).Mapping(ctx, streamARN, fn)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Shards) != 1 || rep.StateDir != dir {
		t.Fatalf("report %+v, want one shard from %s", rep, dir)
	}
	if s := rep.Shards[0]; s.Checkpoint != want.Checkpoint || s.State != status.Finished || s.UpdatedAt == nil || !s.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("read %+v, want %+v", s, want)
	}
	rep, err = status.New(kin, status.WithStateDir(filepath.Join(dir, "none"))).Mapping(ctx, streamARN, fn)
	if err != nil || len(rep.Shards) != 1 || rep.Shards[0].Checkpoint != "" || rep.Shards[0].State != status.Reading {
		t.Fatalf("a state directory that does not exist: %+v, %v; want no progress", rep, err)
	}
}

func TestWriteAndRedraw(t *testing.T) {
	rep := status.Report{Stream: "arn", Function: "fn", StateDir: ".esm", Shards: []status.Shard{{ShardID: "s0", State: status.Reading, Checkpoint: "7"}}}
	text := "stream    arn\nfunction  fn\nstate     .esm\nshards    1: 1 reading\n\ns0                                           reading   checkpoint 7\n"
	var b strings.Builder
	if err := status.Write(&b, rep, false); err != nil || b.String() != text {
		t.Errorf("text: %q, %v; want %q", b.String(), err, text)
	}
	b.Reset()
	want := `{
  "stream": "arn",
  "function": "fn",
  "stateDir": ".esm",
  "summary": {
    "shards": 1,
    "byState": {
      "reading": 1
    }
  },
  "shards": [
    {
      "shardId": "s0",
      "state": "reading",
      "checkpoint": "7"
    }
  ]
}
`
	if err := status.Write(&b, rep, true); err != nil || b.String() != want {
		t.Errorf("JSON: %s, %v; want %s", b.String(), err, want)
	}
	b.Reset()
	at := time.Date(2026, 5, 4, 12, 30, 45, 0, time.UTC)
	if err := status.Redraw(&b, rep, at); err != nil || b.String() != "\x1b[H\x1b[2J"+text+"\n12:30:45  (Ctrl-C to stop)\n" {
		t.Errorf("frame: %q, %v", b.String(), err)
	}
}

// TestShowWatches: with an interval, Show redraws every interval until the context ends, and a
// read interrupted by the end is no error.
func TestShowWatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var b strings.Builder
		reads := 0
		read := func(ctx context.Context) (status.View, error) {
			reads++
			if reads == 3 {
				cancel()
				return nil, ctx.Err()
			}
			return status.Report{Stream: "arn", Function: "fn", StateDir: fmt.Sprint(reads)}, nil
		}
		start := time.Now()
		if err := status.Show(ctx, &b, false, time.Second, read); err != nil {
			t.Fatal(err)
		}
		if reads != 3 || time.Since(start) != 2*time.Second || strings.Count(b.String(), "\x1b[H\x1b[2J") != 2 ||
			!strings.Contains(b.String(), "state     2\n") {
			t.Errorf("%d reads in %s, shown:\n%q", reads, time.Since(start), b.String())
		}
		b.Reset()
		boom := errors.New("boom")
		if err := status.Show(context.Background(), &b, true, 0, func(context.Context) (status.View, error) { return nil, boom }); err != boom {
			t.Errorf("a failed read: %v", err)
		}
		if err := status.Show(context.Background(), &b, true, 0, func(context.Context) (status.View, error) { return status.Report{}, nil }); err != nil || !strings.HasPrefix(b.String(), "{\n") {
			t.Errorf("once, as JSON: %q, %v", b.String(), err)
		}
	})
}
