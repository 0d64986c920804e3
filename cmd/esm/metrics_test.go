package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testkit"
	"github.com/kinesis-esm/esm/local"
)

// scrape reads the samples of /metrics: metric name → summed value over the given labels' series.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			name, rest, _ = strings.Cut(line, " ")
		} else {
			_, rest, _ = strings.Cut(rest, "} ")
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
			out[name] += v
		}
	}
	return out
}

func status(addr, path string) int {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestMetricsAddUp scrapes /metrics while esm runs a mapping with a filter and a poison record
// sent to nowhere (no destination: dropped): every polled record is accounted for exactly once as
// handled (invoked minus failed invocations' records), filtered out, or dropped.
func TestMetricsAddUp(t *testing.T) {
	stream := newStream(t, 1)
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "template.yaml")
	if err := os.WriteFile(tmpl, []byte(`Transform: AWS::Serverless-2016-10-31
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: provided.al2023
      Handler: bootstrap
      CodeUri: .
      Events:
        S:
          Type: Kinesis
          Properties:
            Stream: arn:aws:kinesis:us-east-1:000000000000:stream/`+stream+`
            StartingPosition: TRIM_HORIZON
            BatchSize: 5
            MaximumRetryAttempts: 0
            FilterCriteria:
              Filters:
                - Pattern: '{"data":{"keep":[true]}}'
`), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var recs []local.Record
	for i := range 30 {
		data := fmt.Sprintf(`{"keep":%t,"n":%d}`, i%3 != 0, i)
		if i == 7 {
			data = `{"keep":true,"poison":true}`
		}
		recs = append(recs, local.Record{PartitionKey: "k", Data: []byte(data)})
	}
	if _, err := local.PutRecords(context.Background(), kin, stream, recs); err != nil {
		t.Fatal(err)
	}
	proc := startESM(t, []string{"EXAMPLE_OUTPUT=" + filepath.Join(dir, "out.jsonl"), "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH=poison"},
		"--template", tmpl, "--state-dir", filepath.Join(dir, "state"), "--metrics-addr", addr, "--poll-interval", "100ms")
	testkit.WaitFor(t, "/healthz", 30*time.Second, func() bool { return status(addr, "/healthz") == http.StatusOK })
	testkit.WaitFor(t, "/readyz", 30*time.Second, func() bool { return status(addr, "/readyz") == http.StatusOK })
	if _, err := os.Stat(filepath.Join(dir, "state", "state.db")); err != nil {
		t.Fatalf("ready before the store was opened: %v", err)
	}
	var m map[string]float64
	testkit.WaitFor(t, "all 30 records accounted for", 30*time.Second, func() bool {
		m = scrape(t, addr)
		return m["PolledEventCount"] == 30 && m["InvokedEventCount"]-m["FailedInvokeEventCount"]+m["FilteredOutEventCount"]+m["DroppedEventCount"] == 30
	})
	// MaximumRetryAttempts 0 and no destination: the poison record's batch failed once and was dropped.
	if m["FilteredOutEventCount"] != 10 || m["DroppedEventCount"] < 1 || m["DroppedEventCount"] != m["FailedInvokeEventCount"] ||
		m["OnFailureDestinationDeliveredEventCount"] != 0 {
		t.Fatalf("filtered %v, failed %v, dropped %v, delivered %v: want 10 filtered and the poison record's batch failed once and dropped",
			m["FilteredOutEventCount"], m["FailedInvokeEventCount"], m["DroppedEventCount"], m["OnFailureDestinationDeliveredEventCount"])
	}
	// esm status while esm runs: the state directory is held, the live view comes from /metrics.
	code, stdout, stderr := runESMOutput(t, "", "status", "--endpoint-url", kinesisEndpoint, "--template", tmpl,
		"--state-dir", filepath.Join(dir, "state"), "--metrics-addr", addr)
	if code != 0 || !strings.Contains(stdout, "shardId-000000000000") || !strings.Contains(stdout, "reading") || !strings.Contains(stdout, "iterator age") {
		t.Fatalf("status while running: exit %d\n%s%s", code, stdout, stderr)
	}
	if code := proc.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
