package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

var kinesisEndpoint string

func TestMain(m *testing.M) {
	endpoint, stop, err := testenv.KinesisEndpoint(context.Background())
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

// TestRunDeliversRecords: Run, configured by a template, its parameter overrides and options, polls
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
		done <- Run(runCtx, fn, WithStderr(&logs), WithTemplate(tpl), WithEndpointURL(kinesisEndpoint),
			WithParameterOverrides(map[string]string{"StreamName": stream}), WithStateDir(filepath.Join(dir, "state")), WithPollInterval(100*time.Millisecond))
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

// TestRunProvisionsTheStream: with WithProvision, Run creates the template's stream on the
// emulator before it polls it, and the records put then reach the handler.
func TestRunProvisionsTheStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	tpl := filepath.Join(dir, "template.yaml")
	if err := os.WriteFile(tpl, []byte(template), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Unsetenv("HANDLER_TEST_FROM_TEMPLATE") })
	stream := fmt.Sprintf("provisioned-%d", time.Now().UnixNano())
	got := make(chan string, 10)
	fn := func(_ context.Context, e events.KinesisEvent) error {
		for _, r := range e.Records {
			got <- string(r.Kinesis.Data)
		}
		return nil
	}
	ready := make(chan struct{})
	var logs testkit.SyncBuffer
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, fn, WithStderr(&logs), WithTemplate(tpl), WithEndpointURL(kinesisEndpoint), WithProvision(),
			WithParameterOverrides(map[string]string{"StreamName": stream}), WithStateDir(filepath.Join(dir, "state")),
			WithPollInterval(100*time.Millisecond), WithHooks(runner.Hooks{Ready: func() { close(ready) }}))
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run returned before the mapping ran: %v\n%s", err, logs.String())
	case <-ctx.Done():
		t.Fatalf("the mapping did not start\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "stream created") {
		t.Errorf("no \"stream created\" in the log:\n%s", logs.String())
	}
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := local.PutRecords(ctx, local.NewKinesisClient(cfg, kinesisEndpoint), stream, []local.Record{{PartitionKey: "k", Data: []byte("provisioned")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case data := <-got:
		if data != "provisioned" {
			t.Errorf("the handler got %q, want the record put", data)
		}
	case <-ctx.Done():
		t.Fatalf("the record did not reach the handler\n%s", logs.String())
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}

// TestRunRejectsBadConfiguration: a configuration that cannot run is an error that wraps
// poller.ErrInvalidConfig and says what to change, before anything is written.
func TestRunRejectsBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // no template.yaml here
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(template, "BatchSize: 2", "BatchSize: 10001", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context, events.KinesisEvent) error { return nil }
	for _, tt := range []struct {
		name string
		fn   any
		opts []Option
		want string
	}{
		{"template out of range", fn, []Option{WithTemplate(bad)}, "at 'batchSize' failed to satisfy constraint: Member must have value less than or equal to 10000"},
		{"no template, no stream", fn, nil, "no template.yaml here: give WithTemplate(FILE), or WithStream(NAME) to run without a template"},
		{"missing template", fn, []Option{WithTemplate(filepath.Join(dir, "nope.yaml"))}, "nope.yaml: no such file"},
		{"function without a template", fn, []Option{WithStream("s"), WithFunction("Fn")}, "WithFunction selects a mapping of a template, and there is none"},
		{"batch size out of range", fn, []Option{WithStream("s"), WithBatchSize(0)}, "at 'batchSize' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{"poll grid above the poll interval", fn, []Option{WithStream("s"), WithPollInterval(20 * time.Millisecond), WithPollGrid(50 * time.Millisecond)}, "PollGrid 50ms must be at most PollInterval 20ms"},
		{"negative lease duration", fn, []Option{WithStream("s"), WithLeaseTable("t"), WithLeaseDuration(-time.Second)}, "WithLeaseDuration -1s: must be positive"},
		{"no handler", nil, []Option{WithStream("s")}, "no function given"},
		{"provisioning a stream no template declares", fn, []Option{WithStream("s"), WithProvision()}, "provisioning creates the stream a template declares"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := append(tt.opts, WithEndpointURL("http://127.0.0.1:1"), WithStateDir(filepath.Join(dir, "state")), WithStderr(io.Discard))
			err := Run(context.Background(), tt.fn, opts...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run: %v; want an error containing %q", err, tt.want)
			}
			if !errors.Is(err, poller.ErrInvalidConfig) {
				t.Errorf("the error does not wrap poller.ErrInvalidConfig: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "state")); !os.IsNotExist(err) {
				t.Error("a state directory was created for a configuration that cannot run")
			}
		})
	}
	// Provisioning is for emulators only.
	err := Run(context.Background(), fn, WithTemplate(bad), WithProvision(), WithStderr(io.Discard))
	if err == nil || !strings.Contains(err.Error(), "at 'batchSize'") {
		t.Fatalf("Run: %v; want the template's error first", err)
	}
	err = Run(context.Background(), fn, WithStream("s"), WithProvision(), WithStderr(io.Discard))
	if err == nil || !strings.Contains(err.Error(), "WithProvision creates streams on emulators only: give WithEndpointURL") || !errors.Is(err, poller.ErrInvalidConfig) {
		t.Fatalf("Run: %v; want the emulators-only error", err)
	}
}
