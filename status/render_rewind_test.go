package status

import (
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
)

// TestHeaderShowsRewind: the rewind a lease table holds is in the report's header, in progress
// (the workers invoke nothing) and, once ended, as the last one with its outcome and report.
func TestHeaderShowsRewind(t *testing.T) {
	asked := time.Date(2026, 5, 4, 12, 31, 50, 0, time.UTC)
	st := lease.RewindState{Revision: 4, State: lease.RewindRequested, By: "ops@host", RequestedAt: asked,
		Request: poller.RewindRequest{Shards: []string{"shardId-000000000001"}, Timestamp: asked.Add(-time.Hour)}}
	rep := Report{Stream: "orders", Function: "fn", Shards: []Shard{{ShardID: "shardId-000000000001", State: Reading}}}
	(&leaseFleet{rewind: st}).apply(&rep)
	want := "rewind    IN PROGRESS (revision 4 requested, the workers invoke nothing until it is applied): " +
		"shards shardId-000000000001 to 2026-05-04T11:31:50Z, asked by ops@host at 2026-05-04 12:31:50\n"
	if got := rep.header(); !strings.Contains(got, want) {
		t.Fatalf("header\n%s\nlacks\n%s", got, want)
	}
	st.State, st.DoneAt, st.Report = lease.RewindRefused, asked.Add(3*time.Second), "refused: a worker did not stop; nothing was changed"
	(&leaseFleet{rewind: st}).apply(&rep)
	want = "rewind    revision 4 refused at 2026-05-04 12:31:53: shards shardId-000000000001 to 2026-05-04T11:31:50Z, " +
		"asked by ops@host at 2026-05-04 12:31:50; refused: a worker did not stop; nothing was changed\n"
	if got := rep.header(); !strings.Contains(got, want) {
		t.Fatalf("header\n%s\nlacks\n%s", got, want)
	}
	rep.Rewind = nil
	(&leaseFleet{}).apply(&rep)
	if got := rep.header(); strings.Contains(got, "rewind") {
		t.Fatalf("a table without a rewind shows one:\n%s", got)
	}
}
