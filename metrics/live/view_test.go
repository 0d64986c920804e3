package live_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/poller"
)

// TestLineageLayout: a split then a merge of the two children: each shard is one row below its
// deepest parent, the merged child under both.
func TestLineageLayout(t *testing.T) {
	b := live.New()
	m := b.Add("fn", "orders")
	m.ShardLineage("a", nil)
	m.ShardLineage("b", []string{"a"})
	m.ShardLineage("c", []string{"a"})
	m.ShardLineage("d", []string{"b", "c"})
	for _, s := range []string{"a", "b", "c"} {
		m.ShardState(s, poller.StateFinished)
	}
	m.ShardState("d", poller.StateReading)
	v := b.Snapshot()[0]
	y := map[string]int{}
	depth := map[string]int{}
	for _, n := range v.Graph.Nodes {
		y[n.ShardID], depth[n.ShardID] = n.Y, n.Depth
	}
	if depth["a"] != 0 || depth["b"] != 1 || depth["c"] != 1 || depth["d"] != 2 {
		t.Fatalf("depths %v", depth)
	}
	if !(y["a"] < y["b"] && y["b"] == y["c"] && y["c"] < y["d"]) {
		t.Fatalf("rows %v: want parents above children", y)
	}
	if len(v.Graph.Edges) != 4 {
		t.Fatalf("%d edges, want 4 (a→b, a→c, b→d, c→d)", len(v.Graph.Edges))
	}
	for _, e := range v.Graph.Edges {
		if e.Y1 >= e.Y2 {
			t.Fatalf("edge %+v goes up", e)
		}
	}
}

// TestShardView: blocked shows while reading, the owner is this worker only while it reads, the
// retried batch clears when it is done while its error stays, and deliveries add up.
func TestShardView(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := live.New(live.WithWorker("w1"), live.WithClock(func() time.Time { return now }))
	m := b.Add("fn", "orders")
	m.ShardState("s", poller.StateReading)
	m.IteratorAge("s", 3*time.Second)
	m.BatchFailing("s", poller.BatchFailure{First: "1", Last: "5", Cause: "function error: boom"})
	m.ShardBlocked("s", true)
	m.RecordsDelivered("s", 2)
	sv := b.Snapshot()[0].Shards[0]
	if sv.State != live.StateBlocked || sv.Owner != "w1" || sv.RetryingFirst != "1" || sv.RetryingLast != "5" ||
		sv.LastError != "function error: boom" || sv.IteratorAgeMillis == nil || *sv.IteratorAgeMillis != 3000 || sv.Delivered != 2 {
		t.Fatalf("blocked shard %+v", sv)
	}
	m.BatchFailing("s", poller.BatchFailure{})
	m.ShardBlocked("s", false)
	m.Checkpointed("s", "5")
	m.ShardState("s", poller.StateReleased)
	v := b.Snapshot()[0]
	sv = v.Shards[0]
	if sv.State != live.StateReleased || sv.Owner != "" || sv.RetryingFirst != "" || sv.LastError == "" || sv.Checkpoint != "5" ||
		sv.IteratorAgeMillis != nil || v.Delivered != 2 {
		t.Fatalf("released shard %+v, mapping delivered %d", sv, v.Delivered)
	}
}

// TestIteratorAgeHistory: at most one sample a second is kept, for AgeWindow.
func TestIteratorAgeHistory(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := live.New(live.WithClock(func() time.Time { return now }))
	m := b.Add("fn", "orders")
	m.ShardState("s", poller.StateReading)
	for i := range 10 * 60 { // ten minutes, every 500 ms
		m.IteratorAge("s", time.Duration(i)*time.Millisecond)
		now = now.Add(500 * time.Millisecond)
	}
	points := strings.Fields(b.Snapshot()[0].Shards[0].Spark)
	if n := len(points); n < 295 || n > 302 {
		t.Fatalf("%d samples kept, want about 300 (one a second over 5 minutes)", n)
	}
}

// TestPageWithoutScript: the page is plain HTML: the table and the graph are in it as served.
func TestPageWithoutScript(t *testing.T) {
	b := live.New()
	m := b.Add("fn", "orders")
	m.ShardState("shardId-000000000000", poller.StateReading)
	m.BatchFailing("shardId-000000000000", poller.BatchFailure{First: "7", Last: "7", Cause: `function error: <script>alert(1)</script>`})
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	for _, path := range []string{live.PathPage, live.PathPage + "?part=content"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(body)
		for _, want := range []string{`<table class="shards">`, `<tr data-shard="shardId-000000000000" data-state="reading">`,
			`<g class="shard reading" data-shard="shardId-000000000000"`, "&lt;script&gt;alert(1)&lt;/script&gt;"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s lacks %s", path, want)
			}
		}
		if strings.Contains(page, "<script>alert") {
			t.Errorf("%s does not escape the error", path)
		}
	}
}
