package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// otlpCollector keeps the spans of the OTLP/HTTP protobuf exports it receives.
type otlpCollector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if r.URL.Path != "/v1/traces" || err != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// byOutcome indexes the spans' esm.outcome values, and the X-Ray headers their spans stand for.
func (c *otlpCollector) byOutcome() (outcomes map[string]int, headers map[string]bool, streams map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	outcomes, headers, streams = map[string]int{}, map[string]bool{}, map[string]bool{}
	for _, s := range c.spans {
		for _, kv := range s.GetAttributes() {
			switch kv.GetKey() {
			case "esm.outcome":
				outcomes[kv.GetValue().GetStringValue()]++
			case "messaging.destination.name":
				streams[kv.GetValue().GetStringValue()] = true
			}
		}
		id := hex.EncodeToString(s.GetTraceId())
		headers["Root=1-"+id[:8]+"-"+id[8:]+";Parent="+hex.EncodeToString(s.GetSpanId())+";Sampled=1"] = true
	}
	return outcomes, headers, streams
}

// TestTracesExported runs the binary with OTEL_EXPORTER_OTLP_ENDPOINT set: every invocation of a
// mapping that bisects a poison record reaches the collector as a span, and the function saw each
// invocation's span as its trace header.
func TestTracesExported(t *testing.T) {
	col := &otlpCollector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	stream := newStream(t, 1)
	dir := t.TempDir()
	tmpl := writeTemplate(t, dir, stream, "BatchSize: 10", "MaximumRetryAttempts: 0", "BisectBatchOnFunctionError: true")
	putKeepAndPoison(t, t.Context(), stream)
	traces := filepath.Join(dir, "trace.jsonl")
	proc := startESM(t, []string{"EXAMPLE_OUTPUT=" + filepath.Join(dir, "out.jsonl"), "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH=poison",
		"EXAMPLE_TRACE=" + traces, "OTEL_EXPORTER_OTLP_ENDPOINT=" + srv.URL, "OTEL_BSP_SCHEDULE_DELAY=100"},
		"--template", tmpl, "--state-dir", filepath.Join(dir, "state"), "--poll-interval", "100ms")
	testkit.WaitFor(t, "the poison record dropped and the rest handled", 60*time.Second, func() bool {
		outcomes, _, _ := col.byOutcome()
		return outcomes["dropped"] == 1 && outcomes["ok"] >= 4
	})
	if code := proc.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if !strings.Contains(proc.stderr.String(), "endpoint="+srv.URL+"/v1/traces") {
		t.Errorf("the start-up log does not name the trace endpoint %s/v1/traces", srv.URL)
	}
	outcomes, headers, streams := col.byOutcome()
	t.Logf("span outcomes %v", outcomes)
	if outcomes["bisected"] < 2 || !streams[stream] || len(streams) != 1 {
		t.Fatalf("outcomes %v, streams %v: want the poison record's batch bisected down to it, on stream %s", outcomes, streams, stream)
	}
	b, err := os.ReadFile(traces)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	total := 0
	for _, n := range outcomes {
		total += n
	}
	if len(lines) != total {
		t.Fatalf("%d invocations seen by the function, %d spans", len(lines), total)
	}
	for _, line := range lines {
		var tr example.Trace
		if err := json.Unmarshal([]byte(line), &tr); err != nil {
			t.Fatal(err)
		}
		if !headers[tr.TraceHeader] {
			t.Errorf("the function saw trace header %q, which is no exported span", tr.TraceHeader)
		}
	}
}

// mappingIDs are the aws.lambda.resource_mapping.id values of the spans received.
func (c *otlpCollector) mappingIDs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := map[string]int{}
	for _, s := range c.spans {
		for _, kv := range s.GetAttributes() {
			if kv.GetKey() == "aws.lambda.resource_mapping.id" {
				ids[kv.GetValue().GetStringValue()]++
			}
		}
	}
	return ids
}

// TestServeTracesExported: esm serve with OTEL_EXPORTER_OTLP_ENDPOINT set traces the invocations
// of a mapping created through its API, each span naming the mapping's UUID, and flushes them at
// the stop.
func TestServeTracesExported(t *testing.T) {
	col := &otlpCollector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	stream := newStream(t, 1)
	proc, endpoint := startServe(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + srv.URL, "OTEL_BSP_SCHEDULE_DELAY=100"},
		"--state-dir", t.TempDir(), "--function", "example=example")
	out, err := lambdaClient(endpoint).CreateEventSourceMapping(t.Context(), &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("example"), StartingPosition: types.EventSourcePositionTrimHorizon,
		EventSourceArn: aws.String(fmt.Sprintf("arn:aws:kinesis:%s:000000000000:stream/%s", local.DefaultRegion, stream))})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.UUID)
	putRecords(t, stream, "r1", "r2", "r3")
	testkit.WaitFor(t, "a span of the mapping", 60*time.Second, func() bool { return col.mappingIDs()[id] > 0 })
	if code := proc.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if ids := col.mappingIDs(); len(ids) != 1 {
		t.Fatalf("spans name the mappings %v, want only %s", ids, id)
	}
	outcomes, _, streams := col.byOutcome()
	if outcomes["ok"] == 0 || !streams[stream] {
		t.Fatalf("outcomes %v on streams %v: want the records handled on %s", outcomes, streams, stream)
	}
}
