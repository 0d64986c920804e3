package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

const shard = "shardId-000000000000"

// function is the traced function's view: the records and the trace header of each invocation.
// It fails every batch holding the poison record.
type function struct {
	mu    sync.Mutex
	calls []call
}

type call struct {
	data   string // the records' data, joined by commas
	header string
}

func (f *function) invoked(header string, recs []events.KinesisEventRecord) (failed bool) {
	var data []string
	for _, r := range recs {
		data = append(data, string(r.Kinesis.Data))
		failed = failed || string(r.Kinesis.Data) == "poison"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{data: strings.Join(data, ","), header: header})
	return failed
}

func (f *function) seen() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// memDest takes on-failure records.
type memDest struct {
	mu  sync.Mutex
	got []poller.FailureRecord
}

func (d *memDest) Deliver(_ context.Context, f poller.FailureRecord) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, f)
	return nil
}

// bisectScenario runs a mapping over one shard holding a, b, poison, d with BatchSize 4,
// BisectBatchOnFunctionError and one retry, until d is checkpointed: the batch is bisected twice,
// poison retried once and sent to the destination.
func bisectScenario(t *testing.T, inv poller.Invoker, tr poller.Tracer) {
	t.Helper()
	f := fakekinesis.New()
	arn := f.CreateStream("orders", 1)
	var last string
	for _, d := range []string{"a", "b", "poison", "d"} {
		last = f.PutToShard("orders", shard, "k", []byte(d))
	}
	one := 1
	store, dest := poller.NewMemoryStore(), &memDest{}
	p, err := poller.New(kinesissrc.MustNew(f, arn), poller.Config{StartingPosition: poller.TrimHorizon, BatchSize: 4,
		BisectBatchOnFunctionError: true, MaximumRetryAttempts: &one, PollInterval: 10 * time.Millisecond,
		MinPollSpacing: time.Millisecond}, store, inv, poller.WithDestination(dest), poller.WithTracer(tr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	testkit.WaitFor(t, "every record handled", 10*time.Second, func() bool {
		pr, _ := store.Load(context.Background())
		return pr[shard].Checkpoint == last
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(dest.got) != 1 || dest.got[0].BatchSize != 1 {
		t.Fatalf("destination got %+v, want the poison record alone", dest.got)
	}
}

// wantSpan is one expected span of the bisect scenario: its records, outcome and the index of
// its parent (-1: the root).
type wantSpan struct {
	data    string
	outcome string
	parent  int
	attempt int
}

// The bisect scenario's invocations in order: the batch, bisected; its first half, handled; its
// second half, bisected; poison, failed (the first of its batch); poison again, a child of its
// first invocation, sent to the destination; d, handled.
var bisectSpans = []wantSpan{
	{"a,b,poison,d", poller.OutcomeBisected, -1, 1},
	{"a,b", poller.OutcomeOK, 0, 1},
	{"poison,d", poller.OutcomeBisected, 0, 1},
	{"poison", poller.OutcomeFunctionError, 2, 1},
	{"poison", poller.OutcomeSentToDestination, 3, 2},
	{"d", poller.OutcomeOK, 2, 1},
}

// gotSpan is what the checks need of an exported span, from the SDK or from OTLP.
type gotSpan struct {
	name                    string
	kind                    trace.SpanKind
	traceID, spanID, parent string
	attrs                   map[string]string
	status                  codes.Code
	message                 string // the status' description
}

// checkBisectTrace checks the spans (in the order they started) against bisectSpans and the
// function's view of each invocation's trace header.
func checkBisectTrace(t *testing.T, spans []gotSpan, calls []call, uuid string) {
	t.Helper()
	if len(spans) != len(bisectSpans) || len(calls) != len(bisectSpans) {
		t.Fatalf("%d spans and %d invocations, want %d of each:\n%+v\n%+v", len(spans), len(calls), len(bisectSpans), spans, calls)
	}
	for i, w := range bisectSpans {
		s, c := spans[i], calls[i]
		t.Logf("span %d %s %s parent=%s attrs=%v; the function saw %q", i, s.name, s.spanID, s.parent, s.attrs, c.header)
		if c.data != w.data {
			t.Errorf("invocation %d had %s, want %s", i, c.data, w.data)
		}
		if s.traceID != spans[0].traceID {
			t.Errorf("span %d is in trace %s, not the batch's %s", i, s.traceID, spans[0].traceID)
		}
		wantParent := ""
		if w.parent >= 0 {
			wantParent = spans[w.parent].spanID
		}
		if s.parent != wantParent {
			t.Errorf("span %d (%s) has parent %q, want %q", i, w.data, s.parent, wantParent)
		}
		recs := strings.Split(w.data, ",")
		want := map[string]string{
			"aws.lambda.resource_mapping.id": uuid, "faas.trigger": "pubsub", "messaging.destination.name": "orders",
			"messaging.destination.partition.id": shard, "messaging.batch.message_count": fmt.Sprint(len(recs)),
			"esm.outcome": w.outcome, "messaging.system": "aws_kinesis", "messaging.operation.type": "process",
			"esm.invocation.attempt": fmt.Sprint(w.attempt),
		}
		for k, v := range want {
			if s.attrs[k] != v {
				t.Errorf("span %d: %s = %q, want %q", i, k, s.attrs[k], v)
			}
		}
		if s.attrs["esm.batch.first_sequence_number"] == "" || (len(recs) > 1) == (s.attrs["esm.batch.first_sequence_number"] == s.attrs["esm.batch.last_sequence_number"]) {
			t.Errorf("span %d: sequence numbers %q to %q for %d records", i, s.attrs["esm.batch.first_sequence_number"], s.attrs["esm.batch.last_sequence_number"], len(recs))
		}
		if wantErr := w.outcome != poller.OutcomeOK; (s.status == codes.Error) != wantErr {
			t.Errorf("span %d: status %v for outcome %s", i, s.status, w.outcome)
		}
		if w.outcome != poller.OutcomeOK && (!strings.Contains(s.message, "poison") || s.attrs["error.type"] != w.outcome) {
			t.Errorf("span %d: status message %q, error.type %q; want the function's error and the outcome", i, s.message, s.attrs["error.type"])
		}
		if age, err := strconv.Atoi(s.attrs["esm.batch.iterator_age_ms"]); err != nil || age < 0 || age > 60_000 {
			t.Errorf("span %d: esm.batch.iterator_age_ms %q", i, s.attrs["esm.batch.iterator_age_ms"])
		}
		if s.name != "process orders" || s.kind != trace.SpanKindConsumer {
			t.Errorf("span %d: %q of kind %v", i, s.name, s.kind)
		}
		header := fmt.Sprintf("Root=1-%s-%s;Parent=%s;Sampled=1", s.traceID[:8], s.traceID[8:], s.spanID)
		if c.header != header {
			t.Errorf("invocation %d: the function saw trace header %q, want %q", i, c.header, header)
		}
	}
}

// TestBisectTraceInMemory: a bisected batch as an in-memory exporter records it, with the trace
// header an in-process function finds where aws-lambda-go puts it.
func TestBisectTraceInMemory(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	fn := &function{}
	inv := inprocess.New(func(ctx context.Context, e events.KinesisEvent) (json.RawMessage, error) {
		header, _ := ctx.Value("x-amzn-trace-id").(string)
		if fn.invoked(header, e.Records) {
			return nil, errors.New("poison")
		}
		return nil, nil
	})
	const uuid = "8a4f3c2e-1b2d-4e5f-9a8b-7c6d5e4f3a2b"
	bisectScenario(t, inv, NewTracer(tp, Mapping{FunctionName: "fn", UUID: uuid}))
	stubs := exp.GetSpans()
	slices.SortFunc(stubs, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	var spans []gotSpan
	for _, s := range stubs {
		g := gotSpan{name: s.Name, kind: s.SpanKind, traceID: s.SpanContext.TraceID().String(), spanID: s.SpanContext.SpanID().String(),
			attrs: map[string]string{}, status: s.Status.Code, message: s.Status.Description}
		if s.Parent.IsValid() {
			g.parent = s.Parent.SpanID().String()
		}
		for _, kv := range s.Attributes {
			g.attrs[string(kv.Key)] = kv.Value.Emit()
		}
		spans = append(spans, g)
	}
	checkBisectTrace(t, spans, fn.seen(), uuid)
}
