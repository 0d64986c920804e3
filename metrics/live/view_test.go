package live_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/poller"
)

// get fetches path from h and returns the body.
func get(t *testing.T, srv *httptest.Server, path string) string {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %s %s", path, resp.Status, body)
	}
	return string(body)
}

// TestLineageGenerations: a split then a merge of the two children: the open shard is drawn in
// its generation (one below its deepest parent), the finished history folded below it.
func TestLineageGenerations(t *testing.T) {
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
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	page := get(t, srv, live.PathPage+"?part=content")
	open, folded, ok := strings.Cut(page, `<details class="history">`)
	if !ok {
		t.Fatalf("no folded history in %s", page)
	}
	if !strings.Contains(open, `data-shard="d" data-state="reading" data-parents="b c" data-depth="2"`) {
		t.Errorf("the open shard d is not drawn in generation 2 with its parents: %s", open)
	}
	for _, s := range []string{"a", "b", "c"} {
		if strings.Contains(open, `class="node finished" data-shard="`+s+`"`) || !strings.Contains(folded, `data-shard="`+s+`" data-state="finished"`) {
			t.Errorf("finished shard %s is not folded", s)
		}
	}
	if !strings.Contains(folded, "finished history: 3 shards") {
		t.Errorf("the folded history does not count 3 shards")
	}
}

// TestShardView: blocked shows while reading, with since when (the batch's first failure) and
// the attempts; the owner is this worker only while it reads; the retried batch clears when it
// is done while its error (and its time) stays; deliveries add up; the snapshot says when and
// by whom.
func TestShardView(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := live.New(live.WithWorker("w1"), live.WithClock(func() time.Time { return now }))
	m := b.Add("fn", "orders")
	m.ShardState("s", poller.StateReading)
	m.IteratorAge("s", 3*time.Second)
	failedAt := now
	m.BatchFailing("s", poller.BatchFailure{First: "1", Last: "5", Cause: "function error: boom", FailedAt: now, Since: now, Attempts: 1})
	now = now.Add(time.Second)
	m.BatchFailing("s", poller.BatchFailure{First: "1", Last: "5", Cause: "function error: boom again", FailedAt: now, Since: failedAt, Attempts: 2})
	now = now.Add(time.Second)
	m.ShardBlocked("s", true)
	m.RecordsDelivered("s", 2)
	st := b.Snapshot()
	if !st.SnapshotAt.Equal(now) || st.Worker != "w1" || st.Scope != live.ScopeWorker {
		t.Errorf("snapshot %v by %q (%s)", st.SnapshotAt, st.Worker, st.Scope)
	}
	sv := st.Mappings[0].Shards[0]
	if sv.State != live.StateBlocked || sv.Owner != "w1" || sv.RetryingFirst != "1" || sv.RetryingLast != "5" ||
		sv.LastError != "function error: boom again" || sv.IteratorAgeMillis == nil || *sv.IteratorAgeMillis != 3000 || sv.Delivered != 2 ||
		sv.Attempts != 2 || sv.BlockedSince == nil || !sv.BlockedSince.Equal(failedAt) || sv.LastErrorAt == nil || !sv.LastErrorAt.Equal(failedAt.Add(time.Second)) {
		t.Fatalf("blocked shard %+v", sv)
	}
	m.BatchFailing("s", poller.BatchFailure{})
	m.ShardBlocked("s", false)
	m.Checkpointed("s", "5")
	m.ShardState("s", poller.StateReleased)
	v := b.Snapshot().Mappings[0]
	sv = v.Shards[0]
	if sv.State != live.StateReleased || sv.Owner != "" || sv.RetryingFirst != "" || sv.LastError == "" || sv.Checkpoint != "5" ||
		sv.CheckpointAt == nil || !sv.CheckpointAt.Equal(now) || sv.IteratorAgeMillis != nil || v.Delivered != 2 || sv.Attempts != 0 || sv.BlockedSince != nil {
		t.Fatalf("released shard %+v, mapping delivered %d", sv, v.Delivered)
	}
	if v.Summary.Shards != 1 || v.Summary.ByState[live.StateReleased] != 1 {
		t.Errorf("summary %+v", v.Summary)
	}
}

// TestIteratorAgeHistory: at most one sample a second is kept, for AgeWindow, and every
// sparkline is drawn on one scale: the largest age of all (rounded up), named in the header.
func TestIteratorAgeHistory(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := live.New(live.WithClock(func() time.Time { return now }))
	m := b.Add("fn", "orders")
	m.ShardState("s", poller.StateReading)
	m.ShardState("t", poller.StateReading)
	for i := range 10 * 60 { // ten minutes, every 500 ms
		m.IteratorAge("s", time.Duration(i)*time.Millisecond)
		m.IteratorAge("t", time.Duration(i)*time.Millisecond/10)
		now = now.Add(500 * time.Millisecond)
	}
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	page := get(t, srv, live.PathPage+"?part=content")
	lines := regexp.MustCompile(`points="([^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(lines) != 2 {
		t.Fatalf("%d sparklines, want 2", len(lines))
	}
	if n := len(strings.Fields(lines[0][1])); n < 295 || n > 302 {
		t.Fatalf("%d samples kept, want about 300 (one a second over 5 minutes)", n)
	}
	if !strings.Contains(page, "(0 – 1 s, one scale)") {
		t.Errorf("the age axis does not name the common top (1 s, the largest age 599 ms rounded up)")
	}
	lowest := func(points string) float64 { // the smallest y: the highest point drawn
		low := 1e9
		for _, p := range strings.Fields(points) {
			var x, y float64
			fmt.Sscanf(p, "%f,%f", &x, &y)
			low = min(low, y)
		}
		return low
	}
	if hs, ht := lowest(lines[0][1]), lowest(lines[1][1]); ht <= hs+10 {
		t.Errorf("the shard ten times younger reaches y=%v, as high as the other's y=%v: not one scale", ht, hs)
	}
}

// TestPageWithoutScript: the page is plain HTML: the table and the graph are in it as served,
// and the error is escaped.
func TestPageWithoutScript(t *testing.T) {
	b := live.New()
	m := b.Add("fn", "orders")
	m.ShardState("shardId-000000000000", poller.StateReading)
	m.BatchFailing("shardId-000000000000", poller.BatchFailure{First: "7", Last: "7", Cause: `function error: <script>alert(1)</script>`})
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	for _, path := range []string{live.PathPage, live.PathPage + "?part=content"} {
		page := get(t, srv, path)
		for _, want := range []string{`<table class="shards">`, `<tr data-shard="shardId-000000000000" data-state="reading">`,
			`<span class="node reading" data-shard="shardId-000000000000"`, "&lt;script&gt;alert(1)&lt;/script&gt;"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s lacks %s", path, want)
			}
		}
		if strings.Contains(page, "<script>alert") {
			t.Errorf("%s does not escape the error", path)
		}
	}
}

// TestPageSummaryBlockedFirstAndFilters: the summary counts the shards by state; blocked shards
// come first, in a table of their own with their error and since when, and first in the shard
// table; the table is filtered by state and owner, ordered by age, and cut to its rows.
func TestPageSummaryBlockedFirstAndFilters(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := live.New(live.WithWorker("w1"), live.WithClock(func() time.Time { return now }))
	m := b.Add("fn", "orders")
	for i := range 150 {
		id := fmt.Sprintf("shardId-%012d", i)
		m.ShardState(id, poller.StateReading)
		m.IteratorAge(id, time.Duration(i)*time.Second)
	}
	blocked := "shardId-000000000077"
	m.BatchFailing(blocked, poller.BatchFailure{First: "1", Last: "1", Cause: "cannot parse the poison record", Since: now, Attempts: 1})
	m.ShardBlocked(blocked, true)
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	page := get(t, srv, live.PathPage+"?part=content")
	for _, want := range []string{`<b>150 shards</b>`, `data-state="blocked">1 blocked</span>`, `data-state="reading">149 reading</span>`,
		"Iterator age: <b>2.4 min</b>", `100 of 150 matching shards shown.`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	bt, rest, _ := strings.Cut(page, `<table class="shards">`)
	if !strings.Contains(bt, `<table class="blocked">`) || !strings.Contains(bt, "cannot parse the poison record") {
		t.Errorf("no blocked table with the error above the shard table")
	}
	rows := regexp.MustCompile(`<tr data-shard="([^"]+)" data-state="([^"]+)">`).FindAllStringSubmatch(rest, -1)
	if len(rows) != 100 || rows[0][1] != blocked || rows[1][1] != "shardId-000000000149" {
		t.Fatalf("%d rows, first %v: want 100, the blocked shard first, then the oldest age", len(rows), rows[:2])
	}
	only := get(t, srv, live.PathPage+"?part=content&state=blocked")
	if n := strings.Count(only, `<tr data-shard=`); n != 2 { // the blocked table's row and the shard table's
		t.Errorf("?state=blocked: %d rows, want the blocked shard's two", n)
	}
	if n := strings.Count(get(t, srv, live.PathPage+"?part=content&owner=w2"), `<tr data-shard=`); n != 1 { // the blocked table's
		t.Errorf("?owner=w2 shows %d reading rows of w1", n)
	}
	all := get(t, srv, live.PathPage+"?part=content&rows=all&sort=shard")
	rows = regexp.MustCompile(`<tr data-shard="([^"]+)" data-state`).FindAllStringSubmatch(all, -1)
	if len(rows) != 150 || rows[0][1] != "shardId-000000000000" || rows[149][1] != "shardId-000000000149" {
		t.Errorf("?rows=all&sort=shard: %d rows, first %v", len(rows), rows[0])
	}
}

// TestStateJSONAt1000Shards: state.json of 1,000 shards being read, each with a checkpoint
// (Kinesis' 56 digits), a parent, an age and a long owner, ten blocked with a long error, is at
// most 200 KB, and reads back whole.
func TestStateJSONAt1000Shards(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := live.New(live.WithWorker("esm-worker-7d9f8b6c4-x2k9p"), live.WithClock(func() time.Time { return now }))
	m := b.Add("orders-function", "orders")
	m.SetMappingUUID("f3b1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d")
	for i := range 1000 {
		id := fmt.Sprintf("shardId-%012d", i)
		m.ShardLineage(id, []string{fmt.Sprintf("shardId-%012d", 2000+i/2)})
		m.ShardState(id, poller.StateReading)
		m.IteratorAge(id, time.Duration(i)*time.Millisecond*137)
		m.Checkpointed(id, fmt.Sprintf("4959033827149025660855969253836157109592157598913658%04d", i))
		if i%100 == 0 {
			m.BatchFailing(id, poller.BatchFailure{First: "49590338271490256608559692538361571095921575989136580000",
				Last: "49590338271490256608559692538361571095921575989136589999", Cause: "function error: " + strings.Repeat("x", 400),
				FailedAt: now, Since: now, Attempts: 3})
			m.ShardBlocked(id, true)
		}
		now = now.Add(time.Millisecond)
	}
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	body := get(t, srv, live.PathState)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+live.PathState, nil)
	req.Header.Set("Accept-Encoding", "gzip") // set by hand: the client leaves the body compressed
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	zipped, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("state.json asked with gzip: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	var st live.State
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Mappings) != 1 || len(st.Mappings[0].Shards) != 1000 || st.Mappings[0].Summary.ByState[live.StateBlocked] != 10 {
		t.Fatalf("state.json: %d mappings, summary %+v", len(st.Mappings), st.Mappings[0].Summary)
	}
	t.Logf("state.json at 1,000 shards: %d bytes, %d gzipped", len(body), len(zipped))
	if len(zipped) > 200_000 || len(body) > 200_000 {
		t.Errorf("state.json at 1,000 shards is %d bytes, %d gzipped: want at most 200 KB, plain and as sent", len(body), len(zipped))
	}
	// Nothing is lost on the way: read back and written again, it is the same document, and a
	// blocked shard keeps every field.
	again, err := json.Marshal(st)
	if err != nil || string(again)+"\n" != body {
		t.Errorf("state.json read back and written again differs (%v)", err)
	}
	s := st.Mappings[0].Shards[100]
	if s.ShardID != "shardId-000000000100" || s.State != live.StateBlocked || s.Owner != "esm-worker-7d9f8b6c4-x2k9p" ||
		len(s.Parents) != 1 || s.Checkpoint != "49590338271490256608559692538361571095921575989136580100" || s.CheckpointAt == nil ||
		s.IteratorAgeMillis == nil || *s.IteratorAgeMillis != 13700 || s.BlockedSince == nil || s.Attempts != 3 ||
		s.RetryingLast == "" || !strings.HasPrefix(s.LastError, "function error: xxx") || s.LastErrorAt == nil {
		t.Errorf("shard 100 read back: %+v", s)
	}
}

// TestStateJSONReadsShardObjects: a peer's state.json with its shards as objects (an esm from
// before the table) reads as the table does.
func TestStateJSONReadsShardObjects(t *testing.T) {
	var st live.State
	doc := `{"scope":"worker","worker":"w2","mappings":[{"function":"f","stream":"s","summary":{"shards":1},` +
		`"shards":[{"shardId":"shardId-000000000001","state":"blocked","owner":"w2","attempts":2,"lastError":"boom"}]}]}`
	if err := json.Unmarshal([]byte(doc), &st); err != nil {
		t.Fatal(err)
	}
	if s := st.Mappings[0].Shards; len(s) != 1 || s[0].Owner != "w2" || s[0].Attempts != 2 || s[0].LastError != "boom" {
		t.Fatalf("shards as objects read as %+v", s)
	}
	table := `{"mappings":[{"shards":{"columns":["shardId","future","owner"],"rows":[["shardId-000000000001",7,"w2"],["shardId-000000000002"]]}}]}`
	if err := json.Unmarshal([]byte(table), &st); err != nil {
		t.Fatal(err)
	}
	if s := st.Mappings[0].Shards; len(s) != 2 || s[0].Owner != "w2" || s[1].ShardID != "shardId-000000000002" || s[1].Owner != "" {
		t.Fatalf("a table with a column unknown here read as %+v", s)
	}
}
