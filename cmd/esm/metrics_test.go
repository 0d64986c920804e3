package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/metrics/live"
)

// scrape reads the samples of /metrics: metric name → summed value over the given labels' series.
func scrape(t testing.TB, addr string) map[string]float64 {
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

// getJSON decodes the JSON at path into v.
func getJSON(addr, path string, v any) error {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// get returns the body at path.
func get(t testing.TB, addr, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", path, resp.Status, err)
	}
	return string(b)
}

func httpStatus(addr, path string) int {
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
	tmpl := writeTemplate(t, dir, stream, "BatchSize: 5", "MaximumRetryAttempts: 0", keepFilter)
	addr := freeAddr(t)
	putKeepAndPoison(t, context.Background(), stream)
	proc := startESM(t, []string{"EXAMPLE_OUTPUT=" + filepath.Join(dir, "out.jsonl"), "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH=poison"},
		"--template", tmpl, "--state-dir", filepath.Join(dir, "state"), "--metrics-addr", addr, "--poll-interval", "100ms")
	testkit.WaitFor(t, "/healthz", 30*time.Second, func() bool { return httpStatus(addr, "/healthz") == http.StatusOK })
	testkit.WaitFor(t, "/readyz", 30*time.Second, func() bool { return httpStatus(addr, "/readyz") == http.StatusOK })
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
	// The live page: the shard, its checkpoint, and the poison record's batch as its last error.
	var state live.State // its shards are a table of columns and rows, which State reads
	if err := getJSON(addr, "/live/state.json", &state); err != nil {
		t.Fatal(err)
	}
	views := state.Mappings
	if len(views) != 1 || views[0].UUID == "" || views[0].Dropped < 1 || len(views[0].Shards) != 1 ||
		views[0].Shards[0].State != "reading" || views[0].Shards[0].Checkpoint == "" || !strings.Contains(views[0].Shards[0].LastError, "function error") {
		t.Fatalf("/live/state.json: %+v", views)
	}
	if page := get(t, addr, "/live"); !strings.Contains(page, `data-shard="shardId-000000000000"`) || !strings.Contains(page, `class="node reading"`) {
		t.Fatalf("/live does not draw the shard:\n%s", page)
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

// TestMetricsAddUpWithRetriesAndDestination: the same bookkeeping with retries, bisection and an
// on-failure queue. A poison record among 20 kept records fails its batch, which is retried and
// bisected down to the record, whose failure record reaches goaws. Every polled record is then
// handled (InvokedEventCount − FailedInvokeEventCount), filtered out, dropped or delivered, and the
// retries show in Errors and FailedInvokeEventCount.
func TestMetricsAddUpWithRetriesAndDestination(t *testing.T) {
	srv, sqsC := goaws(t)
	ctx := context.Background()
	stream := newStream(t, 1)
	url, arn, err := local.CreateQueue(ctx, sqsC, "metrics-"+stream)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tmpl := writeTemplate(t, dir, stream, "BatchSize: 5", "MaximumRetryAttempts: 2", "BisectBatchOnFunctionError: true",
		"DestinationConfig:\n  OnFailure:\n    Type: SQS\n    Destination: "+arn, keepFilter)
	addr := freeAddr(t)
	putKeepAndPoison(t, ctx, stream)
	env := append(endpoints(srv.Endpoint(), ""), "EXAMPLE_OUTPUT="+filepath.Join(dir, "out.jsonl"), "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH=poison")
	// No --endpoint-url: each service has its own emulator (endpoints sets them).
	proc := spawnESM(t, append([]string{"ESM_INVOKE=example"}, env...), "run", "--template", tmpl, "--state-dir", filepath.Join(dir, "state"),
		"--metrics-addr", addr, "--poll-interval", "100ms", "--sqs-protocol", "query")
	testkit.WaitFor(t, "/readyz", 30*time.Second, func() bool { return httpStatus(addr, "/readyz") == http.StatusOK })
	var m map[string]float64
	testkit.WaitFor(t, "all 30 records accounted for", 60*time.Second, func() bool {
		m = scrape(t, addr)
		return m["PolledEventCount"] == 30 && m["InvokedEventCount"]-m["FailedInvokeEventCount"]+m["FilteredOutEventCount"]+
			m["DroppedEventCount"]+m["OnFailureDestinationDeliveredEventCount"] == 30
	})
	// Bisection isolates the poison record: 19 kept records handled, 10 filtered out, the poison
	// record delivered alone after its retries, nothing dropped and no failed delivery.
	if m["FilteredOutEventCount"] != 10 || m["OnFailureDestinationDeliveredEventCount"] != 1 || m["DroppedEventCount"] != 0 ||
		m["InvokedEventCount"]-m["FailedInvokeEventCount"] != 19 || m["DestinationDeliveryFailures"] != 0 {
		t.Fatalf("filtered %v, handled %v, delivered %v, dropped %v, delivery failures %v: want 10, 19, 1, 0, 0",
			m["FilteredOutEventCount"], m["InvokedEventCount"]-m["FailedInvokeEventCount"], m["OnFailureDestinationDeliveredEventCount"],
			m["DroppedEventCount"], m["DestinationDeliveryFailures"])
	}
	// Retries happened: the poison record alone failed 1 + MaximumRetryAttempts times, after the
	// larger batches that held it failed.
	if m["Errors"] < 4 || m["FailedInvokeEventCount"] < 4 || m["Invocations"] <= m["Errors"] {
		t.Fatalf("invocations %v, errors %v, failed records %v: want the poison record's retries (at least 4 failed invocations)",
			m["Invocations"], m["Errors"], m["FailedInvokeEventCount"])
	}
	t.Logf("invocations %v, errors %v, invoked %v, failed %v, filtered %v, delivered %v", m["Invocations"], m["Errors"],
		m["InvokedEventCount"], m["FailedInvokeEventCount"], m["FilteredOutEventCount"], m["OnFailureDestinationDeliveredEventCount"])
	if v, _ := queueCounts(t, sqsC, url); v != "1" {
		t.Fatalf("the queue holds %s messages; want the poison record's one", v)
	}
	if code := proc.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
