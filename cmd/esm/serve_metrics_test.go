package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
	"github.com/kinesis-esm/esm/metrics/live"
)

// lambdaClient is aws-sdk-go-v2's Lambda client on an esm serve's API.
func lambdaClient(endpoint string) *lambda.Client {
	return lambda.New(lambda.Options{Region: local.DefaultRegion, BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local", "")})
}

// metricsText returns an esm's /metrics as it is.
func metricsText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestServeMetricsAndStatus: esm serve --metrics-addr --emf with two mappings (two functions, two
// streams): /metrics has each mapping's series, labelled with its uuid and function, esm status
// --all shows both mappings' shards, and each mapping writes its EMF lines.
func TestServeMetricsAndStatus(t *testing.T) {
	ctx := context.Background()
	streams := []string{newStream(t, 2), newStream(t, 1)}
	out := filepath.Join(t.TempDir(), "deliveries.jsonl")
	metricsAddr := freeAddr(t)
	proc, endpoint := startServe(t, []string{"EXAMPLE_OUTPUT=" + out}, "--state-dir", t.TempDir(),
		"--function", "alpha=example", "--function", "beta=example", "--metrics-addr", metricsAddr, "--emf")
	client := lambdaClient(endpoint)
	ids := make([]string, 2)
	for i, fn := range []string{"alpha", "beta"} {
		m, err := client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{FunctionName: aws.String(fn),
			EventSourceArn:   aws.String(fmt.Sprintf("arn:aws:kinesis:%s:000000000000:stream/%s", local.DefaultRegion, streams[i])),
			StartingPosition: types.EventSourcePositionTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = aws.ToString(m.UUID)
	}
	putRecords(t, streams[0], "a-1", "a-2", "a-3")
	putRecords(t, streams[1], "b-1", "b-2")
	testkit.WaitFor(t, "5 records", 30*time.Second, func() bool {
		ds, _ := verify.ReadDeliveries(out)
		return len(ds) >= 5
	})

	text := metricsText(t, metricsAddr)
	for i, fn := range []string{"alpha", "beta"} {
		for _, want := range []string{
			fmt.Sprintf(`Invocations{function=%q,stream=%q,uuid=%q}`, fn, streams[i], ids[i]),
			fmt.Sprintf(`esm_shard_state{function=%q,shard="shardId-000000000000",state="reading",stream=%q,uuid=%q} 1`, fn, streams[i], ids[i]),
		} {
			if !strings.Contains(text, want) {
				t.Fatalf("/metrics lacks %s:\n%s", want, grepLines(text, "uuid="))
			}
		}
	}
	if want := fmt.Sprintf(`esm_shard_state{function="alpha",shard="shardId-000000000001",state="reading",stream=%q,uuid=%q} 1`, streams[0], ids[0]); !strings.Contains(text, want) {
		t.Fatalf("/metrics lacks the second shard of alpha's stream: %s", want)
	}

	// The live page has both mappings, each with its UUID and its stream's shards.
	var state live.State // its shards are a table of columns and rows, which State reads
	if err := getJSON(metricsAddr, "/live/state.json", &state); err != nil {
		t.Fatal(err)
	}
	views := state.Mappings
	byUUID := map[string]int{}
	for _, v := range views {
		byUUID[v.UUID] = len(v.Shards)
	}
	if len(views) != 2 || byUUID[ids[0]] != 2 || byUUID[ids[1]] != 1 {
		t.Fatalf("/live/state.json: %+v; want alpha's two shards and beta's one, by UUID", views)
	}

	code, status, stderr := runESMOutput(t, "", "status", "--all", "--metrics-addr", metricsAddr, "--endpoint-url", kinesisEndpoint)
	if code != 0 {
		t.Fatalf("esm status --all: exit %d\n%s%s", code, status, stderr)
	}
	t.Logf("esm status --all:\n%s", status)
	for i, fn := range []string{"alpha", "beta"} {
		for _, want := range []string{"mapping   " + ids[i], "stream/" + streams[i], "function  " + fn} {
			if !strings.Contains(status, want) {
				t.Fatalf("esm status --all lacks %q:\n%s", want, status)
			}
		}
	}
	if n := strings.Count(status, "read by polling"); n != 3 {
		t.Fatalf("esm status --all shows %d shards read by polling, want 3:\n%s", n, status)
	}
	if n := strings.Count(status, "shardId-"); n != 3 {
		t.Fatalf("esm status --all shows %d shards, want 3 (2 + 1):\n%s", n, status)
	}
	if code := proc.stop(t); code != 0 {
		t.Fatalf("esm serve exited %d", code)
	}
	// --emf: each mapping's lines, flushed at the stop, carry its UUID and function.
	for i, fn := range []string{"alpha", "beta"} {
		want := fmt.Sprintf(`"EventSourceMappingUUID":%q`, ids[i])
		if lines := grepLines(proc.stderr.String(), want); !strings.Contains(lines, `"FunctionName":"`+fn+`"`) {
			t.Fatalf("no EMF line of mapping %s (%s):\n%s", ids[i], fn, grepLines(proc.stderr.String(), "_aws"))
		}
	}
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(slices.Clip(out), "")
}
