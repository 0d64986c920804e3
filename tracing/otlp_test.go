package tracing

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/httpinvoke"
)

// collector is an OTLP/HTTP trace receiver: it decodes each export's protobuf and keeps its spans
// with their resources' service.name.
type collector struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				c.services = append(c.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// TestBisectTraceOverOTLP: the bisected batch's trace reaches an OTLP/HTTP collector configured
// by OTEL_EXPORTER_OTLP_ENDPOINT alone, and a function behind Lambda's Invoke API sees each
// invocation's span in X-Amzn-Trace-Id.
func TestBisectTraceOverOTLP(t *testing.T) {
	col := &collector{}
	colSrv := httptest.NewServer(col)
	defer colSrv.Close()
	fn := &function{}
	lambda := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e events.KinesisEvent
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if fn.invoked(r.Header.Get(invoke.HeaderTraceID), e.Records) {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			_, _ = w.Write(invoke.ErrorDocument{ErrorMessage: "poison", ErrorType: "errorString"}.Marshal())
			return
		}
		_, _ = w.Write([]byte("null"))
	}))
	defer lambda.Close()
	inv, err := httpinvoke.New([]string{lambda.URL})
	if err != nil {
		t.Fatal(err)
	}

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", colSrv.URL)
	tp, err := FromEnvironment(context.Background(), slog.New(slog.DiscardHandler))
	if err != nil || tp == nil {
		t.Fatalf("FromEnvironment: %v, %v", tp, err)
	}
	const uuid = "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
	tr := NewTracer(tp, Mapping{FunctionName: "function"})
	tr.SetMappingUUID(uuid)
	bisectScenario(t, inv, tr)
	if err := tp.Shutdown(context.Background()); err != nil { // flushes the batcher
		t.Fatal(err)
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.services) == 0 || slices.ContainsFunc(col.services, func(s string) bool { return s != "esm" }) {
		t.Errorf("service names %q, want esm", col.services)
	}
	slices.SortFunc(col.spans, func(a, b *tracepb.Span) int { return cmp.Compare(a.GetStartTimeUnixNano(), b.GetStartTimeUnixNano()) })
	var spans []gotSpan
	for _, s := range col.spans {
		g := gotSpan{name: s.GetName(), traceID: hex.EncodeToString(s.GetTraceId()), spanID: hex.EncodeToString(s.GetSpanId()),
			parent: hex.EncodeToString(s.GetParentSpanId()), attrs: map[string]string{}}
		if s.GetKind() == tracepb.Span_SPAN_KIND_CONSUMER {
			g.kind = trace.SpanKindConsumer
		}
		if s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			g.status, g.message = codes.Error, s.GetStatus().GetMessage()
		}
		for _, kv := range s.GetAttributes() {
			g.attrs[kv.GetKey()] = anyValue(kv.GetValue())
		}
		spans = append(spans, g)
	}
	checkBisectTrace(t, spans, fn.seen(), uuid)
}

// anyValue renders an OTLP attribute value as attribute.Value.Emit does.
func anyValue(v *commonpb.AnyValue) string {
	if i, ok := v.GetValue().(*commonpb.AnyValue_IntValue); ok {
		return strconv.FormatInt(i.IntValue, 10)
	}
	return v.GetStringValue()
}
