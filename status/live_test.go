package status_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/status"
)

const (
	streamA = "arn:aws:kinesis:us-east-1:000000000000:stream/a"
	streamB = "arn:aws:kinesis:us-east-1:000000000000:stream/b"
)

// metricsText is what an esm serve running two mappings exposes: mapping u1 reads shardId-0 by
// subscription and shardId-1 by polling (after a subscription: its subscription series remain),
// mapping u2 is esm run's shape (a stream name, no uuid label would be ""; here u2).
const metricsText = `# HELP IteratorAge Lambda's IteratorAge.
# TYPE IteratorAge gauge
IteratorAge{function="f",shard="shardId-0",stream="` + streamA + `",uuid="u1"} 1500
IteratorAge{function="f",shard="shardId-1",stream="` + streamA + `",uuid="u1"} 20
IteratorAge{function="g",shard="shardId-0",stream="b",uuid="u2"} 7
# HELP esm_shard_state The shard's state.
# TYPE esm_shard_state gauge
esm_shard_state{function="f",shard="shardId-0",state="pending",stream="` + streamA + `",uuid="u1"} 0
esm_shard_state{function="f",shard="shardId-0",state="reading",stream="` + streamA + `",uuid="u1"} 1
esm_shard_state{function="f",shard="shardId-1",state="finished",stream="` + streamA + `",uuid="u1"} 1
# HELP esm_shard_read_by How the shard is read.
# TYPE esm_shard_read_by gauge
esm_shard_read_by{function="f",mode="polling",shard="shardId-0",stream="` + streamA + `",uuid="u1"} 0
esm_shard_read_by{function="f",mode="subscription",shard="shardId-0",stream="` + streamA + `",uuid="u1"} 1
esm_shard_read_by{function="f",mode="polling",shard="shardId-1",stream="` + streamA + `",uuid="u1"} 1
# HELP esm_subscription_started_timestamp_seconds When the subscription started.
# TYPE esm_subscription_started_timestamp_seconds gauge
esm_subscription_started_timestamp_seconds{function="f",shard="shardId-0",stream="` + streamA + `",uuid="u1"} 1000
esm_subscription_started_timestamp_seconds{function="f",shard="shardId-1",stream="` + streamA + `",uuid="u1"} 1000
# HELP esm_subscription_last_event_timestamp_seconds The last event.
# TYPE esm_subscription_last_event_timestamp_seconds gauge
esm_subscription_last_event_timestamp_seconds{function="f",shard="shardId-0",stream="` + streamA + `",uuid="u1"} 1009.5
# HELP esm_subscription_renewals_total Renewals.
# TYPE esm_subscription_renewals_total counter
esm_subscription_renewals_total{function="f",shard="shardId-0",stream="` + streamA + `",uuid="u1"} 3
# HELP esm_subscription_in_use_total Refusals.
# TYPE esm_subscription_in_use_total counter
esm_subscription_in_use_total{function="f",shard="shardId-0",stream="` + streamA + `",uuid="u1"} 1
# HELP esm_batch_size Not a per-shard series status shows.
# TYPE esm_batch_size gauge
esm_batch_size{function="f",stream="` + streamA + `",uuid="u1"} 100
`

var now = time.Unix(1010, 0)

func TestParseMetrics(t *testing.T) {
	got, err := status.ParseMetrics(strings.NewReader(metricsText), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["u1"].Function != "f" || got["u1"].Stream != streamA || got["u2"].Stream != "b" {
		t.Fatalf("mappings %+v, want u1 (f on a) and u2 (g on b)", got)
	}
	s0, s1 := got["u1"].Shards["shardId-0"], got["u1"].Shards["shardId-1"]
	if s0.State != "reading" || s0.ReadBy != "subscription" || s0.IteratorAgeMillis == nil || *s0.IteratorAgeMillis != 1500 {
		t.Errorf("shardId-0: %+v, want reading by subscription at 1500 ms", s0)
	}
	sub := s0.Subscription
	if sub == nil || sub.AgeSeconds == nil || *sub.AgeSeconds != 10 || sub.LastEventAgeSeconds == nil || *sub.LastEventAgeSeconds != 0.5 ||
		sub.Renewals != 3 || sub.InUseRefusals != 1 {
		t.Errorf("shardId-0's subscription: %+v, want 10 s old, last event 0.5 s ago, 3 renewals, 1 refusal", sub)
	}
	if s1.State != "finished" || s1.ReadBy != "polling" || s1.Subscription != nil {
		t.Errorf("shardId-1: %+v, want finished, read by polling, no subscription shown", s1)
	}
	if _, err := status.ParseMetrics(strings.NewReader("IteratorAge{shard=\"x\" 1\n"), now); err == nil {
		t.Error("text that is not the Prometheus text format parsed")
	}
}

func metricsServer(t *testing.T, text string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(text))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestAll reads every mapping of the metrics and renders them, the stream of u2 resolved from its name.
func TestAll(t *testing.T) {
	kin := fakeKinesis{
		shards: map[string][]types.Shard{streamA: {shard("shardId-0"), shard("shardId-1")}, streamB: {shard("shardId-0")}},
		arns:   map[string]string{streamA: streamA, "b": streamB},
	}
	addr := metricsServer(t, metricsText)
	all, err := status.New(kin, status.WithMetricsAddr(addr), status.WithClock(func() time.Time { return now })).All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reps := all.List
	if all.MetricsAddr != addr || len(reps) != 2 || reps[0].UUID != "u1" || reps[1].UUID != "u2" || reps[1].Stream != streamB {
		t.Fatalf("reports %+v, want u1 and u2 (on %s)", reps, streamB)
	}
	var b strings.Builder
	if err := all.Render(&b); err != nil {
		t.Fatal(err)
	}
	want := "mapping   u1\nstream    " + streamA + "\nfunction  f\nstate     held by the esm serve at " + addr + " (checkpoints not shown)\n" +
		"shards    2: 1 reading, 1 finished; iterator age 1.5s\n\n" +
		"shardId-0                                    reading   iterator age 1.5s read by subscription (age 10s, 3 renewals, 1 refused in use, last event 500ms ago)\n" +
		"shardId-1                                    finished  iterator age 20ms read by polling\n\n" +
		"mapping   u2\nstream    " + streamB + "\nfunction  g\nstate     held by the esm serve at " + addr + " (checkpoints not shown)\n" +
		"shards    1: 1 reading; iterator age 7ms\n\n" +
		"shardId-0                                    reading   iterator age 7ms\n\n"
	if b.String() != want {
		t.Errorf("rendered\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := (status.Mappings{MetricsAddr: addr}).Render(&b); err != nil || b.String() != "no mapping in the metrics at "+addr+" (is it an esm serve, and has a mapping started?)\n" {
		t.Errorf("no mapping rendered %q, %v", b.String(), err)
	}
	b.Reset()
	if err := status.Write(&b, status.Mappings{MetricsAddr: addr}, true); err != nil || b.String() != "null\n" {
		t.Errorf("no mapping as JSON: %q, %v; want null, as esm status --all --json has always printed", b.String(), err)
	}
	b.Reset()
	if err := status.Write(&b, all, true); err != nil || !strings.HasPrefix(b.String(), "[\n  {\n    \"uuid\": \"u1\",\n    \"stream\": ") {
		t.Errorf("mappings as JSON: %q, %v; want the list, indented", b.String(), err)
	}
	if _, err := status.New(kin, status.WithMetricsAddr(addr)).All(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := status.New(kin).All(context.Background()); err != status.ErrNoMetricsAddr {
		t.Errorf("All without a metrics address: %v, want ErrNoMetricsAddr", err)
	}
	delete(kin.arns, "b")
	if _, err := status.New(kin, status.WithMetricsAddr(addr)).All(context.Background()); err == nil || !strings.Contains(err.Error(), "mapping u2: stream not found: b") {
		t.Errorf("a mapping whose stream is gone: %v", err)
	}
}

// TestHeldStoreWithLiveView: a state directory held by a running esm is skipped when the live view
// stands in for it, and the live states join the listing.
func TestHeldStoreWithLiveView(t *testing.T) {
	kin := fakeKinesis{shards: map[string][]types.Shard{streamA: {shard("shardId-0"), shard("shardId-1")}}}
	dir := t.TempDir()
	store, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var u1 []string // one mapping's series, as esm run's metrics hold
	for l := range strings.Lines(metricsText) {
		if !strings.Contains(l, `uuid="u2"`) {
			u1 = append(u1, l)
		}
	}
	rep, err := status.New(kin, status.WithStateDir(dir), status.WithMetricsAddr(metricsServer(t, strings.Join(u1, "")))).Mapping(context.Background(), streamA, "fn")
	if err != nil {
		t.Fatal(err)
	}
	if rep.StateDir != "none ("+dir+" is held by a running esm: checkpoints not shown)" || len(rep.Shards) != 2 ||
		rep.Shards[0].State != "reading" || rep.Shards[0].ReadBy != "subscription" || rep.Shards[1].State != "finished" {
		t.Errorf("report %+v", rep)
	}
}

// TestMappingPicksItsLiveMapping: with the metrics of an esm serve running two mappings whose
// streams both have shardId-0, a mapping's report takes the live state of its own only (u2's
// labels name stream b and function g by name, as esm serve's do).
func TestMappingPicksItsLiveMapping(t *testing.T) {
	kin := fakeKinesis{shards: map[string][]types.Shard{streamA: {shard("shardId-0")}, streamB: {shard("shardId-0")}}}
	dir := t.TempDir()
	r := status.New(kin, status.WithStateDir(dir), status.WithMetricsAddr(metricsServer(t, metricsText)))
	for range 20 { // the metrics' mappings come as a map: any order
		a, err := r.Mapping(context.Background(), streamA, "arn:aws:lambda:us-east-1:000000000000:function:f")
		if err != nil {
			t.Fatal(err)
		}
		if s := a.Shards[0]; s.ReadBy != "subscription" || *s.IteratorAgeMillis != 1500 {
			t.Fatalf("stream a's shardId-0: %+v, want u1's (read by subscription, 1500 ms)", s)
		}
		b, err := r.Mapping(context.Background(), streamB, "arn:aws:lambda:us-east-1:000000000000:function:g")
		if err != nil {
			t.Fatal(err)
		}
		if s := b.Shards[0]; s.ReadBy != "" || s.IteratorAgeMillis == nil || *s.IteratorAgeMillis != 7 {
			t.Fatalf("stream b's shardId-0: %+v, want u2's (7 ms)", s)
		}
	}
	other, err := r.Mapping(context.Background(), streamB, "arn:aws:lambda:us-east-1:000000000000:function:h")
	if err != nil || other.Shards[0].IteratorAgeMillis != nil {
		t.Fatalf("a mapping the metrics do not name: %+v, %v; want no live state", other, err)
	}
}

// TestParseMetricsBlocked: a shard whose esm_shard_blocked gauge is 1 is blocked, not reading
// (esm status printed it as reading).
func TestParseMetricsBlocked(t *testing.T) {
	text := `# TYPE esm_shard_state gauge
esm_shard_state{function="f",shard="shardId-0",state="reading",stream="a"} 1
esm_shard_state{function="f",shard="shardId-1",state="reading",stream="a"} 1
# TYPE esm_shard_blocked gauge
esm_shard_blocked{function="f",shard="shardId-0",stream="a"} 1
esm_shard_blocked{function="f",shard="shardId-1",stream="a"} 0
`
	live, err := status.ParseMetrics(strings.NewReader(text), now)
	if err != nil {
		t.Fatal(err)
	}
	if s := live[""].Shards; s["shardId-0"].State != "blocked" || s["shardId-1"].State != "reading" {
		t.Errorf("states %q and %q, want blocked and reading", s["shardId-0"].State, s["shardId-1"].State)
	}
}
