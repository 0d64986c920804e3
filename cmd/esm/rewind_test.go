package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// TestRewindBadInput: every flag of esm rewind is checked before anything is asked of the
// workers, with exit 2 and a message that says what to fix.
func TestRewindBadInput(t *testing.T) {
	stream := newStream(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put, err := local.PutRecords(ctx, kin, stream, []local.Record{{PartitionKey: "k", Data: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	own, seq := *put[0].ShardId, *put[0].SequenceNumber
	other := "shardId-000000000000"
	if own == other {
		other = "shardId-000000000001"
	}
	base := []string{"rewind", "--endpoint-url", kinesisEndpoint, "--stream", stream, "--lease-table", "no-such-table"}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"nothing to rewind to", nil, []string{"needs a time"}},
		{"unknown shard", []string{"--to-timestamp", "1h", "--shard", "shardId-000000000042"}, []string{"shard shardId-000000000042 is not a shard of the stream", own}},
		{"timestamp in the future", []string{"--to-timestamp", future}, []string{"is in the future"}},
		{"window end before its start", []string{"--from", "1h", "--until", "2h"}, []string{"is not after its start", "[start, end)"}},
		{"window end in the future", []string{"--from", "1h", "--until", future}, []string{"window end", "in the future"}},
		{"window without its end", []string{"--from", "1h"}, []string{"needs both --from and --until"}},
		{"move and window", []string{"--to-timestamp", "1h", "--from", "2h", "--until", "1h"}, []string{"give one of them"}},
		{"bad time", []string{"--to-timestamp", "yesterday"}, []string{"--to-timestamp", "RFC 3339", "duration ago"}},
		{"negative duration", []string{"--to-timestamp=-1h"}, []string{"without a sign"}},
		{"sequence of another shard", []string{"--sequence", other + "=" + seq}, []string{"shard " + other + " has no record with sequence number " + seq}},
		{"sequence without its shard", []string{"--sequence", seq}, []string{"SHARD=SEQ"}},
		{"sequence not a number", []string{"--sequence", own + "=abc"}, []string{"not a sequence number"}},
		{"sequence and time", []string{"--sequence", own + "=" + seq, "--to-timestamp", "1h"}, []string{"not both"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runESM(t, append(base, tc.args...)...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// TestRewindStateDirWorker: esm run keeping its progress in a --state-dir applies esm rewind
// itself (esm rewind --metrics-addr): a request at fault is refused with exit 2 and the mapping
// goes on; a rewind to a sequence number stops the poller, is written into the state file, and
// the records from that one are invoked again, in order, once each, then the mapping goes on.
// Without it esm rewind refused a mapping with no lease table.
func TestRewindStateDirWorker(t *testing.T) {
	stream := newStream(t, 1)
	dir := t.TempDir()
	out, addr := filepath.Join(dir, "out.jsonl"), freeAddr(t)
	seqs := putSequenced(t, stream, "r0", "r1", "r2", "r3")
	proc := startESM(t, []string{"EXAMPLE_OUTPUT=" + out}, "--stream", stream, "--state-dir", filepath.Join(dir, "state"),
		"--metrics-addr", addr, "--poll-interval", "100ms")
	data := func() []string {
		var got []string
		for _, d := range readDeliveries(t, out) {
			got = append(got, d.Data)
		}
		return got
	}
	testkit.WaitFor(t, "every record delivered", 60*time.Second, func() bool { return len(data()) == 4 })
	code, stdout, stderr := runESMEnv(t, nil, "", "rewind", "--metrics-addr", addr, "--sequence", "shardId-000000000009="+seqs[1])
	if code != 2 || !strings.Contains(stderr, "shard shardId-000000000009 is not a shard of the stream") {
		t.Fatalf("a rewind of an unknown shard: exit %d, want 2 and what to fix\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runESMEnv(t, nil, "", "rewind", "--metrics-addr", addr, "--sequence", "shardId-000000000000="+seqs[1])
	if code != 0 || !strings.Contains(stdout, "rewind 1 applied") || !strings.Contains(stdout, "rewound shardId-000000000000") {
		t.Fatalf("esm rewind --metrics-addr: exit %d\n%s%s", code, stdout, stderr)
	}
	testkit.WaitFor(t, "the records from the rewind's on delivered again", 60*time.Second, func() bool { return len(data()) == 7 })
	putSequenced(t, stream, "r4")
	testkit.WaitFor(t, "the next record", 60*time.Second, func() bool { return len(data()) == 8 })
	if want := []string{"r0", "r1", "r2", "r3", "r1", "r2", "r3", "r4"}; !slices.Equal(data(), want) {
		t.Fatalf("deliveries %v, want %v", data(), want)
	}
	if code := proc.stop(t); code != 0 {
		t.Fatalf("esm run exit code %d", code)
	}
}
