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

// TestPageShowsSkip: a batch an operator skipped is the shard's last skip on the page (its
// sequence numbers, where it went, when) and in state.json, and the mapping counts it.
func TestPageShowsSkip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	b := live.New()
	m := b.Add("fn", "orders")
	m.ShardState("shardId-000000000000", poller.StateReading)
	m.SkipPending("shardId-000000000000", "41", "42", true)
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	if page := get(t, srv, live.PathPage); !strings.Contains(page, `data-skip-pending="41..42"`) {
		t.Fatalf("the page does not show the skip under way")
	}
	m.SkipPending("shardId-000000000000", "41", "42", false)
	m.BatchSkipped("shardId-000000000000", poller.Skipped{ShardID: "shardId-000000000000", First: "41", Last: "42", Records: 2,
		Destination: "arn:aws:sqs:us-east-1:000000000000:failures", At: at})
	page := get(t, srv, live.PathPage)
	if strings.Contains(page, "data-skip-pending") {
		t.Errorf("the page still shows the skip under way once answered")
	}
	for _, want := range []string{`Skipped by an operator: 1 batches.`, `data-skipped-first="41" data-skipped-last="42"`,
		`skipped by an operator at 03:04:05`, `2 records sent to arn:aws:sqs:us-east-1:000000000000:failures`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	var st live.State
	if err := json.Unmarshal([]byte(get(t, srv, live.PathState)), &st); err != nil {
		t.Fatal(err)
	}
	v := st.Mappings[0]
	if v.Skipped != 1 || len(v.Shards) != 1 || v.Shards[0].LastSkip == nil {
		t.Fatalf("state.json: %+v", v)
	}
	if k := *v.Shards[0].LastSkip; k.First != "41" || k.Last != "42" || k.Records != 2 || !k.At.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("last skip %+v", k)
	}
}
