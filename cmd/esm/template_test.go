package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
	"github.com/kinesis-esm/esm/sam"
	"github.com/kinesis-esm/esm/status"
)

// repoTemplate is the template.yaml at the root of the repository: the one sam deploy uses.
const repoTemplate = "../../template.yaml"

// runESMOutput runs the esm binary to completion and returns its exit code, stdout and stderr.
func runESMOutput(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return runESMEnv(t, nil, stdin, args...)
}

// runESMEnv is runESMOutput with env added to this process's environment.
func runESMEnv(t *testing.T, env []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, esmBin, args...)
	// The built-in example, unless --invoke or env says otherwise.
	cmd.Env = append(append(os.Environ(), "ESM_INVOKE=example"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &stdout, &stderr
	_ = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("esm %v did not exit", args)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestValidateRepoTemplate runs "esm validate" on the repository's template.yaml, as CI must:
// the template that deploys the example is also one esm accepts, and resolves as documented.
func TestValidateRepoTemplate(t *testing.T) {
	code, out, stderr := runESMOutput(t, "", "validate", "--template", repoTemplate)
	if code != 0 {
		t.Fatalf("esm validate exit code %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"valid, 1 Kinesis mapping", "ExampleFunction/Stream", "arn:aws:kinesis:us-east-1:123456789012:stream/esm-example",
		"TRIM_HORIZON", "SQS arn:aws:sqs:us-east-1:123456789012:esm-example-failures"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output does not show %q:\n%s", want, out)
		}
	}

	code, out, stderr = runESMOutput(t, "", "validate", "--template", repoTemplate, "--json", "--endpoint-url", "http://127.0.0.1:14568",
		"--parameter-overrides", "StreamName=orders ShardCount=4")
	if code != 0 {
		t.Fatalf("esm validate --json exit code %d; stderr:\n%s", code, stderr)
	}
	var tpl sam.Template
	if err := json.Unmarshal([]byte(out), &tpl); err != nil {
		t.Fatalf("validate --json is not the mappings as JSON: %v\n%s", err, out)
	}
	if len(tpl.Mappings) != 1 {
		t.Fatalf("%d mappings, want 1", len(tpl.Mappings))
	}
	m := tpl.Mappings[0]
	if m.EventSourceArn != "arn:aws:kinesis:us-east-1:000000000000:stream/orders" || m.Stream.ShardCount != 4 ||
		m.DestinationConfig.OnFailure.QueueUrl != "http://127.0.0.1:14568/000000000000/orders-failures" ||
		m.Function.FunctionName != "orders-example" || m.Function.Timeout != 10 || m.BatchSize != 100 {
		t.Errorf("parameter overrides and the endpoint are not applied: %+v", m)
	}

	code, _, stderr = runESMOutput(t, "", "validate", "--template", repoTemplate, "--parameter-overrides", "ShardCount=0")
	if code != 2 || !strings.Contains(stderr, "Parameter 'ShardCount' must be a number not less than 1") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("an invalid override: exit code %d, stderr %q; want 2 and one line naming the parameter and its bound", code, stderr)
	}
}

// TestGenerateAndInvoke: generate-event builds a batch the example function (in-process, with
// the template's settings) accepts, and invoke prints the function's response.
func TestGenerateAndInvoke(t *testing.T) {
	code, event, stderr := runESMOutput(t, "", "generate-event", "--template", repoTemplate,
		"--data", "hello", "--data", "world", "--partition-key", "k1", "--partition-key", "k2", "--arrival-time", "1700000000")
	if code != 0 {
		t.Fatalf("generate-event exit code %d: %s", code, stderr)
	}
	var ev events.KinesisEvent
	if err := json.Unmarshal([]byte(event), &ev); err != nil || len(ev.Records) != 2 {
		t.Fatalf("generate-event printed %q (%v)", event, err)
	}
	r := ev.Records[1]
	if string(r.Kinesis.Data) != "world" || r.Kinesis.PartitionKey != "k2" || r.EventSourceArn != "arn:aws:kinesis:us-east-1:123456789012:stream/esm-example" ||
		r.InvokeIdentityArn != "arn:aws:iam::123456789012:role/ExampleFunctionRole" || r.AwsRegion != "us-east-1" ||
		r.EventID != "shardId-000000000000:"+r.Kinesis.SequenceNumber || len(r.Kinesis.SequenceNumber) != 56 ||
		r.Kinesis.ApproximateArrivalTimestamp.Unix() != 1700000000 {
		t.Errorf("generated record is not what esm sends for the template's mapping: %+v", r)
	}

	code, resp, stderr := runESMOutput(t, event, "invoke", "--template", repoTemplate, "--event", "-")
	if code != 0 || strings.TrimSpace(resp) != `{"batchItemFailures":null}` {
		t.Fatalf("invoke: exit code %d, response %q, stderr %s", code, resp, stderr)
	}
	if !strings.Contains(stderr, "received 2 records from shardId-000000000000") {
		t.Errorf("the function's output (its log) is not on stderr: %q", stderr)
	}

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
		io.WriteString(w, `{"errorMessage":"boom","errorType":"errorString"}`)
	}))
	defer failing.Close()
	code, resp, stderr = runESMOutput(t, event, "invoke", "--event", "-", "--invoke", failing.URL)
	if code != 1 || strings.TrimSpace(resp) != `{"errorMessage":"boom","errorType":"errorString"}` || !strings.Contains(stderr, "function error (Unhandled)") {
		t.Errorf("invoke of a failing function: exit code %d, stdout %q, stderr %q; want 1, the error document, and the reason", code, resp, stderr)
	}
}

// TestEveryFlagHasEnv: every flag of every command can also be set as ESM_<NAME>.
func TestEveryFlagHasEnv(t *testing.T) {
	parser, err := kong.New(&app{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cmd := range parser.Model.Children {
		for _, f := range cmd.Flags {
			n++
			want := "ESM_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
			if len(f.Envs) != 1 || f.Envs[0] != want {
				t.Errorf("esm %s --%s: environment variable %v, want %s", cmd.Name, f.Name, f.Envs, want)
			}
		}
	}
	if n < 30 {
		t.Fatalf("only %d flags found", n)
	}
}

var (
	rieOnce              sync.Once
	rieBin, bootstrapBin string
	rieBuildErr          error
)

// buildRIE builds aws-lambda-rie (the version pinned in go.mod) and the example bootstrap once.
func buildRIE(t *testing.T) {
	t.Helper()
	rieOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		dir, err := os.MkdirTemp("", "esm-template-rie-")
		if err != nil {
			rieBuildErr = err
			return
		}
		if rieBin, rieBuildErr = testenv.BuildRIE(ctx, dir, ""); rieBuildErr != nil {
			return
		}
		bootstrapBin = filepath.Join(dir, "bootstrap")
		rieBuildErr = testenv.BuildBootstrap(ctx, "", bootstrapBin, "github.com/kinesis-esm/esm/example/bootstrap", "")
	})
	if rieBuildErr != nil {
		t.Fatal(rieBuildErr)
	}
}

// TestTemplateInvokeTargets runs the built esm binary with the repository's template.yaml
// (stream name and shards from --parameter-overrides) against kinesis-local, invoking the
// function over HTTP: an unmodified example bootstrap under aws-lambda-rie, and a pool of two
// endpoints speaking Lambda's Invoke API. Every record arrives, in order per key; esm status
// explains that a running esm holds the state directory, and after a clean stop it shows each
// shard with the checkpoint of its last record.
func TestTemplateInvokeTargets(t *testing.T) {
	t.Run("aws-lambda-rie", func(t *testing.T) {
		buildRIE(t)
		out := filepath.Join(t.TempDir(), "deliveries.jsonl")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rie, err := local.StartRIE(ctx, local.RIEOptions{Binary: rieBin, Handler: []string{bootstrapBin},
			Env: []string{"EXAMPLE_OUTPUT=" + out}, Timeout: 10 * time.Second, FunctionName: "esm-example-example"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("aws-lambda-rie output:\n%s", tail(rie.Output(), 40))
			}
			_ = rie.Stop()
		})
		testTemplateRun(t, out, []string{rie.Endpoint()}, false)
	})
	t.Run("invoke-api-pool", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "deliveries.jsonl")
		t.Setenv("EXAMPLE_OUTPUT", out) // the endpoints run example.Handle in this process
		var urls []string
		for range 2 {
			srv := invokeAPIServer(t)
			urls = append(urls, srv.URL)
		}
		testTemplateRun(t, out, urls, true)
	})
}

// invokeAPIServer answers POST /2015-03-31/functions/function/invocations by running the example
// function on the event, and fails the test if it is ever sent two invocations at once.
func invokeAPIServer(t *testing.T) *httptest.Server {
	var inFlight atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/2015-03-31/functions/function/invocations" {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		if n := inFlight.Add(1); n > 1 {
			t.Errorf("endpoint sent %d invocations at once; esm allows one per endpoint", n)
		}
		defer inFlight.Add(-1)
		var ev events.KinesisEvent
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("invocation body is not a Kinesis event: %v", err)
		}
		resp, err := example.Handle(r.Context(), ev)
		if err != nil {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			fmt.Fprintf(w, `{"errorMessage":%q,"errorType":"Error"}`, err)
			return
		}
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// testTemplateRun runs esm on the repository's template with the given --invoke targets. With
// provision, esm creates the stream itself (--provision, the template's ShardCount).
func testTemplateRun(t *testing.T, out string, targets []string, provision bool) {
	const total, keys = 40, 4
	var stream string
	if provision {
		stream = fmt.Sprintf("e2e-%d-%d", os.Getpid(), streamSeq.Add(1))
	} else {
		stream = newStream(t, 2)
	}
	state := filepath.Join(t.TempDir(), "state")
	args := []string{"--template", repoTemplate, "--parameter-overrides", "StreamName=" + stream + " ShardCount=2",
		"--state-dir", state, "--poll-interval", "200ms", "--log-level", "debug"}
	for _, u := range targets {
		args = append(args, "--invoke", u)
	}
	if provision {
		args = append(args, "--provision")
	}
	proc := startESM(t, nil, args...)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if provision {
		testkit.WaitFor(t, "esm to create the stream and start", 30*time.Second, func() bool { return strings.Contains(proc.stderr.String(), "mapping started") })
		open, err := local.OpenShards(ctx, kin, stream)
		if err != nil || len(open) != 2 || !strings.Contains(proc.stderr.String(), "stream created") {
			t.Fatalf("--provision: %d open shards (%v), want the template's ShardCount of 2", len(open), err)
		}
	}
	perKey, err := produce(ctx, stream, keys, total, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "all records delivered", time.Minute, func() bool { return uniqueCount(readDeliveries(t, out)) >= total })

	statusArgs := []string{"status", "--template", repoTemplate, "--parameter-overrides", "StreamName=" + stream,
		"--endpoint-url", kinesisEndpoint, "--state-dir", state}
	code, _, stderr := runESMOutput(t, "", statusArgs...)
	if code != 1 || !strings.Contains(stderr, "state directory in use by another process") || !strings.Contains(stderr, "pid") {
		t.Errorf("esm status while esm runs: exit code %d, stderr %q; want 1 and an explanation", code, stderr)
	}

	if code := proc.stop(t); code != 0 {
		t.Fatalf("esm exited %d after SIGTERM, want 0", code)
	}
	if !strings.Contains(proc.stderr.String(), "mapping=ExampleFunction/Stream") {
		t.Errorf("esm did not log the template's mapping:\n%s", tail(proc.stderr.String(), 20))
	}
	got := readDeliveries(t, out)
	lineage, err := local.Lineage(ctx, kin, stream)
	if err != nil {
		t.Fatal(err)
	}
	if bad := verify.Failed(verify.Deliveries(got, perKey, lineage)); bad != "" {
		t.Fatal(bad)
	}

	code, js, stderr := runESMOutput(t, "", append(statusArgs, "--json")...)
	if code != 0 {
		t.Fatalf("esm status exit code %d: %s", code, stderr)
	}
	var rep status.Report
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, js)
	}
	last := map[string]string{}
	for _, d := range got {
		last[d.ShardID] = d.Sequence
	}
	if len(rep.Shards) != 2 {
		t.Fatalf("status shows %d shards, want 2: %s", len(rep.Shards), js)
	}
	for _, s := range rep.Shards {
		if s.State != status.Reading || s.Checkpoint != last[s.ShardID] {
			t.Errorf("status of %s: %s at %s; want reading at the last delivered record %s", s.ShardID, s.State, s.Checkpoint, last[s.ShardID])
		}
	}
	code, text, _ := runESMOutput(t, "", statusArgs...)
	if code != 0 || !strings.Contains(text, "shardId-000000000000") || !strings.Contains(text, "checkpoint "+last["shardId-000000000000"]) {
		t.Errorf("status text: exit code %d\n%s", code, text)
	}
}
