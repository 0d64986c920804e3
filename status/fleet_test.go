package status_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/metrics/prom"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/status"
)

// worker serves what a running "esm run --metrics-addr" serves, /metrics and /live/state.json,
// from the observers esm gives its poller; feed drives them as the poller would.
func worker(t *testing.T, id string, at time.Time, feed func(o poller.Observer, d poller.DetailObserver)) string {
	t.Helper()
	reg := prom.NewRegistry()
	board := live.New(live.WithWorker(id), live.WithClock(func() time.Time { return at }))
	page := board.Add("f", "a")
	page.SetMappingUUID("u1")
	feed(metrics.Tee(prom.New(reg, "f", "a"), page), page)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("GET "+live.PathState, board.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// golden compares got with testdata/name (ESM_UPDATE_GOLDEN=1 rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, name, []byte(got))
}

// TestBlockedAcrossTwoWorkers: esm status given both workers' --metrics-addr shows each shard as
// the worker reading it says, w2's blocked shard as blocked (not reading) with its owner, since
// when, its attempts and its error, in the summary first; with --watch's row budget, a summary
// and the top rows, blocked first.
func TestBlockedAcrossTwoWorkers(t *testing.T) {
	at := time.Date(2026, 5, 4, 12, 30, 45, 0, time.UTC)
	ids := []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003"}
	w1 := worker(t, "w1", at, func(o poller.Observer, d poller.DetailObserver) {
		for _, id := range ids {
			d.ShardLineage(id, nil)
		}
		o.ShardState(ids[0], poller.StateReading)
		o.IteratorAge(ids[0], 1500*time.Millisecond)
		o.ShardState(ids[2], poller.StateReading)
		o.IteratorAge(ids[2], 20*time.Millisecond)
	})
	w2 := worker(t, "w2", at.Add(time.Minute), func(o poller.Observer, d poller.DetailObserver) {
		for _, id := range ids {
			d.ShardLineage(id, nil)
		}
		o.ShardState(ids[1], poller.StateReading)
		o.IteratorAge(ids[1], 95*time.Second)
		d.BatchFailing(ids[1], poller.BatchFailure{First: "49590338271490256608559692538361571095921575989136588898",
			Last: "49590338271490256608559692538361571095921575989136588899", Cause: "function error: cannot parse the poison record",
			FailedAt: at.Add(time.Minute), Since: at.Add(50 * time.Second), Attempts: 4, Blocked: true})
		o.ShardBlocked(ids[1], true)
		o.ShardState(ids[3], poller.StateReading)
	})
	kin := fakeKinesis{shards: map[string][]types.Shard{streamA: {shard(ids[0]), shard(ids[1]), shard(ids[2]), shard(ids[3])}}}
	r := status.New(kin, status.WithStateDir("/nonexistent/esm-state"), status.WithMetricsAddr(w1), status.WithMetricsAddr(w2))
	rep, err := r.Mapping(context.Background(), streamA, "arn:aws:lambda:us-east-1:000000000000:function:f")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "blocked-two-workers.txt", render(t, rep))
	var b strings.Builder
	if err := status.Brief(rep, 10).Render(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "blocked-two-workers-watch.txt", b.String())
	if lines := strings.Count(b.String(), "\n"); lines > 10 {
		t.Errorf("--watch's frame has %d lines for 10", lines)
	}
}
