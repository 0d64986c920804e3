package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

var exampleBootstrap struct {
	once sync.Once
	path string
	err  error
}

// buildExampleBootstrap builds the example function as a Lambda bootstrap, once per test binary.
func buildExampleBootstrap(t *testing.T) string {
	t.Helper()
	exampleBootstrap.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		exampleBootstrap.path = esmBin + "-bootstrap"
		exampleBootstrap.err = testenv.BuildBootstrap(ctx, "", exampleBootstrap.path, "github.com/kinesis-esm/esm/example/bootstrap", "")
	})
	if exampleBootstrap.err != nil {
		t.Fatal(exampleBootstrap.err)
	}
	return exampleBootstrap.path
}

// TestServeExecFunctionKnowsItsName: a function given only as --function NAME=exec:... (no
// template) is handed Lambda-Runtime-Invoked-Function-Arn with NAME, so its context names it;
// its records carry the documented default invokeIdentityArn.
func TestServeExecFunctionKnowsItsName(t *testing.T) {
	boot := buildExampleBootstrap(t)
	stream := newStream(t, 1)
	dir := t.TempDir()
	trace, dump := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "events.jsonl")
	_, endpoint := startServe(t, []string{"EXAMPLE_TRACE=" + trace, "EXAMPLE_EVENT_DUMP=" + dump}, "--state-dir", filepath.Join(dir, "state"),
		"--function", "orders=exec:"+boot, "--function-env-pass", "EXAMPLE_TRACE,EXAMPLE_EVENT_DUMP")
	if _, err := lambdaClient(endpoint).CreateEventSourceMapping(context.Background(), &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("orders"), StartingPosition: types.EventSourcePositionTrimHorizon,
		EventSourceArn: aws.String(fmt.Sprintf("arn:aws:kinesis:%s:000000000000:stream/%s", local.DefaultRegion, stream))}); err != nil {
		t.Fatal(err)
	}
	putRecords(t, stream, "r1")
	if got, want := invokedAs(t, trace), "arn:aws:lambda:"+local.DefaultRegion+":000000000000:function:orders"; got != want {
		t.Fatalf("the function's context names %q, want %q", got, want)
	}
	ev, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"invokeIdentityArn":"arn:aws:iam::000000000000:role/esm"`; !strings.Contains(string(ev), want) {
		t.Fatalf("event %s lacks the default %s", ev, want)
	}
}

// TestServeInvokesAsItReports: the function of a mapping is invoked as the FunctionArn the API
// reports for the mapping, whatever names it: a qualified name (orders:live), and an esm serve
// given its endpoint through AWS_ENDPOINT_URL rather than --endpoint-url (as LocalStack's suite
// runs it), whose functions were invoked as sam local's account 123456789012 while the API
// reported the stream's 000000000000.
func TestServeInvokesAsItReports(t *testing.T) {
	for _, c := range []struct {
		name, function string
		env            func(trace string) []string
		args           []string
	}{
		{"qualified name", "orders:live", func(trace string) []string { return []string{"EXAMPLE_TRACE=" + trace} }, []string{"--endpoint-url", kinesisEndpoint}},
		{"endpoint from the environment", "orders", func(trace string) []string {
			return []string{"EXAMPLE_TRACE=" + trace, "AWS_ENDPOINT_URL=" + kinesisEndpoint, "AWS_ACCESS_KEY_ID=AKIDLOCAL", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION=" + local.DefaultRegion}
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			stream := newStream(t, 1)
			dir := t.TempDir()
			trace := filepath.Join(dir, "trace.jsonl")
			addr := freeAddr(t)
			p := spawnESM(t, c.env(trace), append([]string{"serve", "--api-addr", addr, "--poll-interval", "100ms",
				"--state-dir", filepath.Join(dir, "state"), "--function", "orders=example"}, c.args...)...)
			testkit.WaitFor(t, "esm serve to listen", 20*time.Second, func() bool {
				select {
				case err := <-p.done:
					t.Fatalf("esm serve exited: %v\n%s", err, p.stderr.String())
				default:
				}
				return strings.Contains(p.stderr.String(), "esm serve:")
			})
			out, err := lambdaClient("http://"+addr).CreateEventSourceMapping(context.Background(), &lambda.CreateEventSourceMappingInput{
				FunctionName: aws.String(c.function), StartingPosition: types.EventSourcePositionTrimHorizon,
				EventSourceArn: aws.String(fmt.Sprintf("arn:aws:kinesis:%s:000000000000:stream/%s", local.DefaultRegion, stream))})
			if err != nil {
				t.Fatal(err)
			}
			putRecords(t, stream, "r1")
			if got, reported := invokedAs(t, trace), aws.ToString(out.FunctionArn); got != reported {
				t.Fatalf("the function is invoked as %q; the API reports the mapping's FunctionArn %q", got, reported)
			}
		})
	}
}

// invokedAs waits for the first invocation the example function traced to trace and returns the
// ARN it was invoked as (its context's InvokedFunctionArn).
func invokedAs(t *testing.T, trace string) string {
	t.Helper()
	testkit.WaitFor(t, "an invocation", 30*time.Second, func() bool { return testkit.LineCount(t, trace) > 0 })
	raw, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		FunctionARN string `json:"functionArn"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(string(raw), "\n", 2)[0]), &tr); err != nil {
		t.Fatal(err)
	}
	return tr.FunctionARN
}
