package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// TestRetryChainTraceBounded (issue 40): a batch retried for ever does not grow one trace without
// limit: every poller.MaxTraceInvocations invocations its chain goes on in a new trace, whose
// first span links to the previous trace's first, and the retries follow it. Each span carries
// its attempt number.
func TestRetryChainTraceBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		f := fakekinesis.New()
		arn := f.CreateStream("orders", 1)
		f.PutToShard("orders", shard, "k", []byte("poison"))
		p, err := poller.New(kinesissrc.MustNew(f, arn), poller.Config{StartingPosition: poller.TrimHorizon, ShardSyncInterval: time.Hour}, poller.NewMemoryStore(), inprocess.New(func() error { return errors.New("poison") }), poller.WithTracer(NewTracer(tp, Mapping{FunctionName: "fn"})))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		const want = 2*poller.MaxTraceInvocations + 10
		for len(exp.GetSpans()) < want {
			time.Sleep(time.Minute)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		spans := exp.GetSpans()
		slices.SortFunc(spans, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
		for i, s := range spans[:want] {
			chain, first := i/poller.MaxTraceInvocations, spans[i/poller.MaxTraceInvocations*poller.MaxTraceInvocations]
			if s.SpanContext.TraceID() != first.SpanContext.TraceID() {
				t.Fatalf("span %d is in trace %s, want its chain's %d (%s)", i, s.SpanContext.TraceID(), chain, first.SpanContext.TraceID())
			}
			if got := attr(s, KeyAttempt); got != i+1 {
				t.Fatalf("span %d: attempt %d, want %d", i, got, i+1)
			}
			if i != chain*poller.MaxTraceInvocations {
				continue
			}
			if chain == 0 {
				if s.Parent.IsValid() || len(s.Links) != 0 {
					t.Fatalf("the batch's first span has a parent or links: %+v", s)
				}
				continue
			}
			prev := spans[(chain-1)*poller.MaxTraceInvocations]
			if s.SpanContext.TraceID() == prev.SpanContext.TraceID() || s.Parent.IsValid() || len(s.Links) != 1 ||
				s.Links[0].SpanContext.SpanID() != prev.SpanContext.SpanID() {
				t.Fatalf("chain %d's first span: trace %s, parent %v, links %+v; want a new trace linked to %s",
					chain, s.SpanContext.TraceID(), s.Parent.IsValid(), s.Links, prev.SpanContext.SpanID())
			}
		}
	})
}

// attr is an int attribute of s, or -1.
func attr(s tracetest.SpanStub, key attribute.Key) int {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return int(kv.Value.AsInt64())
		}
	}
	return -1
}

// TestExportErrorsLogged (issue 40): an export the collector refuses is logged through the logger
// FromEnvironment is given (JSON here, as --log-format json makes it), not in Go's plain log format.
func TestExportErrorsLogged(t *testing.T) {
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "refused", http.StatusBadRequest)
	}))
	defer col.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	var logs testkit.SyncBuffer
	tp, err := FromEnvironment(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil || tp == nil {
		t.Fatalf("FromEnvironment: %v, %v", tp, err)
	}
	defer func() { _ = tp.Shutdown(context.Background()) }()
	_, s := tp.Tracer("test").Start(context.Background(), "one")
	s.End()
	testkit.WaitFor(t, "the export error logged", 10*time.Second, func() bool { return strings.Contains(logs.String(), "trace export failed") })
	for line := range bytes.Lines([]byte(logs.String())) {
		var entry map[string]any
		if err := json.Unmarshal(line, &entry); err != nil || entry["level"] != "WARN" || entry["endpoint"] != col.URL+"/v1/traces" {
			t.Fatalf("log line %q: not the JSON warning naming the endpoint (%v)", line, err)
		}
	}
}
