package live_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/poller"
)

// TestPageShowsRewind: a rewind in progress is on the page (the workers invoke nothing) and in
// state.json; once it ended, the page shows it as the last rewind with its outcome and report.
func TestPageShowsRewind(t *testing.T) {
	asked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	q := poller.RewindRequest{Timestamp: asked.Add(-time.Hour), Until: asked.Add(-30 * time.Minute)}
	b := live.New()
	m := b.Add("fn", "orders")
	m.ShardState("shardId-000000000000", poller.StateReading)
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	n := poller.RewindNotice{Revision: 3, State: "requested", InProgress: true, Request: q, By: "ops@host", RequestedAt: asked}
	m.RewindSeen(n)
	page := get(t, srv, live.PathPage)
	for _, want := range []string{`data-rewind-revision="3" data-rewind-state="requested"`, `<b>Rewind in progress</b> (requested)`,
		`every shard: replay [2026-01-02T02:04:05Z, 2026-01-02T02:34:05Z), asked by ops@host at 03:04:05.`} {
		if !strings.Contains(page, want) {
			t.Errorf("page in progress lacks %s", want)
		}
	}
	if r := rewindOf(t, get(t, srv, live.PathState)); r == nil || !r.InProgress || r.Revision != 3 || !r.Request.Until.Equal(q.Until) {
		t.Fatalf("state.json in progress: rewind %+v", r)
	}
	n.State, n.InProgress, n.DoneAt, n.Report = "applied", false, asked.Add(2*time.Second), "applied: 1 shards rewound (shardId-000000000000), 0 descendants wait for them again"
	m.RewindSeen(n)
	page = get(t, srv, live.PathPage)
	if strings.Contains(page, "Rewind in progress") {
		t.Error("page still shows the rewind in progress once applied")
	}
	for _, want := range []string{`data-rewind-state="applied"`, `Last rewind, applied at 03:04:07: revision 3,`, `. applied: 1 shards rewound`} {
		if !strings.Contains(page, want) {
			t.Errorf("page after the rewind lacks %s", want)
		}
	}
	if r := rewindOf(t, get(t, srv, live.PathState)); r == nil || r.InProgress || r.State != "applied" || r.DoneAt == nil || r.Report != n.Report {
		t.Fatalf("state.json after: rewind %+v", r)
	}
}

func rewindOf(t *testing.T, body string) *live.RewindView {
	t.Helper()
	var st live.State
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Mappings) != 1 {
		t.Fatalf("mappings %+v", st.Mappings)
	}
	return st.Mappings[0].Rewind
}
