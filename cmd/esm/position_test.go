package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// TestStartingPositions: three records before a timestamp T, three after it, then esm starts, then
// two more. TRIM_HORIZON delivers all eight, AT_TIMESTAMP T the last five, LATEST the last two.
func TestStartingPositions(t *testing.T) {
	for _, tc := range []struct {
		position string
		want     []int
	}{
		{"TRIM_HORIZON", []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"AT_TIMESTAMP", []int{3, 4, 5, 6, 7}},
		{"LATEST", []int{6, 7}},
	} {
		t.Run(tc.position, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stream := newStream(t, 1)
			put := func(from, to int) []types.PutRecordsResultEntry {
				var recs []local.Record
				for i := from; i < to; i++ {
					recs = append(recs, local.Record{PartitionKey: "k", Data: fmt.Appendf(nil, "r%d", i)})
				}
				res, err := local.PutRecords(ctx, kin, stream, recs)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			res := put(0, 3)
			ts := arrivalOf(ctx, t, stream, *res[2].ShardId, *res[2].SequenceNumber).Add(time.Millisecond)
			testkit.WaitFor(t, "the clock to pass T", time.Second, func() bool { return time.Now().After(ts.Add(time.Millisecond)) })
			put(3, 6)

			dir := t.TempDir()
			out := filepath.Join(dir, "out.jsonl")
			args := []string{"--stream", stream, "--state-dir", filepath.Join(dir, "state"), "--starting-position", tc.position,
				"--poll-interval", "100ms", "--log-level", "debug"}
			if tc.position == "AT_TIMESTAMP" {
				args = append(args, "--starting-position-timestamp", ts.UTC().Format(time.RFC3339Nano))
			}
			proc := startESM(t, []string{"EXAMPLE_OUTPUT=" + out}, args...)
			testkit.WaitFor(t, "the shard iterator", 30*time.Second, func() bool { return strings.Contains(proc.stderr.String(), "shard iterator opened") })
			put(6, 8)
			testkit.WaitFor(t, "deliveries", 30*time.Second, func() bool { return len(readDeliveries(t, out)) >= len(tc.want) })
			if code := proc.stop(t); code != 0 {
				t.Fatalf("exit code %d", code)
			}
			got := readDeliveries(t, out)
			var idx []int
			for _, d := range got {
				n, _ := strconv.Atoi(strings.TrimPrefix(d.Data, "r"))
				idx = append(idx, n)
			}
			if fmt.Sprint(idx) != fmt.Sprint(tc.want) {
				t.Fatalf("%s delivered records %v, want %v", tc.position, idx, tc.want)
			}
		})
	}
}

func arrivalOf(ctx context.Context, t *testing.T, stream, shardID, seq string) time.Time {
	t.Helper()
	it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(shardID),
		ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(seq)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1)})
	if err != nil || len(out.Records) != 1 {
		t.Fatalf("read back record %s: %v", seq, err)
	}
	return *out.Records[0].ApproximateArrivalTimestamp
}
