package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/kinesis-esm/esm/internal/cli"
	"github.com/kinesis-esm/esm/internal/testkit"
	"github.com/kinesis-esm/esm/local"
	"github.com/kinesis-esm/esm/poller"
)

var kinesisEndpoint string

const childEnv = "HANDLER_TEST_START_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" { // the child of TestStartInsideLambda
		Start(func(_ context.Context, e events.KinesisEvent) (string, error) {
			return fmt.Sprintf("handled %d records of %s", len(e.Records), e.Records[0].EventSourceArn), nil
		})
	}
	endpoint, stop, err := local.TestKinesisEndpoint(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "kinesis emulator:", err)
		os.Exit(1)
	}
	kinesisEndpoint = endpoint
	code := m.Run()
	stop()
	os.Exit(code)
}

const template = `Transform: AWS::Serverless-2016-10-31
Parameters:
  StreamName: {Type: String, Default: not-this-one}
Resources:
  Stream:
    Type: AWS::Kinesis::Stream
    Properties: {Name: !Ref StreamName, ShardCount: 1}
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Handler: bootstrap
      Runtime: provided.al2023
      CodeUri: .
      Timeout: 7
      Environment:
        Variables:
          HANDLER_TEST_FROM_TEMPLATE: !Sub "stream ${StreamName}"
      Events:
        K:
          Type: Kinesis
          Properties:
            Stream: !GetAtt Stream.Arn
            StartingPosition: TRIM_HORIZON
            BatchSize: 2
`

// TestRunDeliversRecords: Run, configured by a template, its parameter overrides and flags, polls
// kinesis-local and hands the records to the function in-process, with the template's environment
// and timeout; a cancelled context is a clean stop.
func TestRunDeliversRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	kin := local.NewKinesisClient(cfg, kinesisEndpoint)
	stream := fmt.Sprintf("handler-%d", time.Now().UnixNano())
	if _, err := local.CreateStream(ctx, kin, stream, 1); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tpl := filepath.Join(dir, "template.yaml")
	if err := os.WriteFile(tpl, []byte(template), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Unsetenv("HANDLER_TEST_FROM_TEMPLATE") })

	type seen struct {
		data, env, arn string
		deadline       time.Duration
		batch          int
	}
	got := make(chan seen, 10)
	fn := func(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		lc, _ := lambdacontext.FromContext(ctx)
		dl, _ := ctx.Deadline()
		for _, r := range e.Records {
			got <- seen{string(r.Kinesis.Data), os.Getenv("HANDLER_TEST_FROM_TEMPLATE"), lc.InvokedFunctionArn, time.Until(dl), len(e.Records)}
		}
		return events.KinesisEventResponse{}, nil
	}
	if _, err := local.PutRecords(ctx, kin, stream, []local.Record{{PartitionKey: "k", Data: []byte("a")}, {PartitionKey: "k", Data: []byte("b")}, {PartitionKey: "k", Data: []byte("c")}}); err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, fn, WithStderr(&logs), WithArgs("--template", tpl, "--endpoint-url", kinesisEndpoint,
			"--parameter-overrides", "StreamName="+stream, "--state-dir", filepath.Join(dir, "state"), "--poll-interval", "100ms"))
	}()
	var all []string
	for len(all) < 3 {
		select {
		case s := <-got:
			all = append(all, s.data)
			if s.env != "stream "+stream {
				t.Errorf("the function saw HANDLER_TEST_FROM_TEMPLATE=%q, want the template's %q", s.env, "stream "+stream)
			}
			if !strings.HasSuffix(s.arn, ":function:Fn") {
				t.Errorf("InvokedFunctionArn %q, want the template function's", s.arn)
			}
			if s.deadline < 5*time.Second || s.deadline > 7*time.Second {
				t.Errorf("the function had %s left, want the template's Timeout of 7s", s.deadline)
			}
			if s.batch > 2 {
				t.Errorf("batch of %d records; the template's BatchSize is 2", s.batch)
			}
		case err := <-done:
			t.Fatalf("Run returned early: %v\n%s", err, logs.String())
		case <-ctx.Done():
			t.Fatalf("records not delivered; got %v\n%s", all, logs.String())
		}
	}
	if strings.Join(all, ",") != "a,b,c" {
		t.Errorf("delivered %v, want a,b,c in order", all)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}

func TestRunRejectsBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(template, "BatchSize: 2", "BatchSize: 10001", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context, events.KinesisEvent) error { return nil }
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"template out of range", []string{"--template", bad}, "at 'batchSize' failed to satisfy constraint: Member must have value less than or equal to 10000"},
		{"no template, no stream", []string{"--template-missing-flag"}, "unknown flag --template-missing-flag"},
		{"missing template", []string{"--template", filepath.Join(dir, "nope.yaml")}, "nope.yaml: no such file"},
		{"invoke targets", []string{"--invoke", "http://127.0.0.1:1"}, "invoked in-process"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(context.Background(), fn, WithArgs(append(tt.args, "--state-dir", filepath.Join(dir, "state"))...), WithStderr(io.Discard))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run: %v; want an error containing %q", err, tt.want)
			}
			if code := cli.ExitCode(err); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if _, err := os.Stat(filepath.Join(dir, "state")); !os.IsNotExist(err) {
				t.Error("a state directory was created for a configuration that cannot run")
			}
		})
	}
	err := Run(context.Background(), fn, WithArgs("--template", bad), WithStderr(io.Discard))
	if !errors.Is(err, poller.ErrInvalidConfig) {
		t.Errorf("a template error does not wrap poller.ErrInvalidConfig: %v", err)
	}
}

// TestStartInsideLambda runs Start in a child process whose environment says it is inside Lambda
// (AWS_LAMBDA_RUNTIME_API): it must serve the Runtime API as lambda.Start does, not poll anything.
func TestStartInsideLambda(t *testing.T) {
	event := `{"Records":[{"eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/s","kinesis":{"data":"eA==","partitionKey":"k","sequenceNumber":"1"}}]}`
	response := make(chan string, 1)
	served := false
	var mu sync.Mutex
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/2018-06-01/runtime/invocation/next":
			mu.Lock()
			first := !served
			served = true
			mu.Unlock()
			if !first { // one invocation only: hold the runtime until the test ends
				<-r.Context().Done()
				return
			}
			w.Header().Set("Lambda-Runtime-Aws-Request-Id", "req-1")
			w.Header().Set("Lambda-Runtime-Deadline-Ms", fmt.Sprint(time.Now().Add(time.Minute).UnixMilli()))
			w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:f")
			io.WriteString(w, event)
		case r.Method == http.MethodPost && r.URL.Path == "/2018-06-01/runtime/invocation/req-1/response":
			b, _ := io.ReadAll(r.Body)
			response <- string(b)
			w.WriteHeader(http.StatusAccepted)
		default:
			t.Errorf("unexpected runtime API call %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer api.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(api.URL, "http://"))
	var out testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	select {
	case got := <-response:
		if want := `"handled 1 records of arn:aws:kinesis:us-east-1:123456789012:stream/s"`; got != want {
			t.Fatalf("response %s, want %s", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no response through the Runtime API; child output:\n%s", out.String())
	}
}
