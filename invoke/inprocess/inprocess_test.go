package inprocess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.uber.org/goleak"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type customErr struct{}

func (customErr) Error() string { return "custom" }

func panicsHere(context.Context, events.KinesisEvent) error { panic("kaboom") }

func TestInProcessOutcomes(t *testing.T) {
	event := []byte(`{"Records":[{"kinesis":{"partitionKey":"k","sequenceNumber":"1","data":"aGk=","approximateArrivalTimestamp":1.5,"kinesisSchemaVersion":"1.0"},"eventID":"shardId-000000000000:1"}]}`)
	tests := []struct {
		name      string
		handler   any
		failed    bool
		errorType string
		message   string
		payload   string
	}{
		{name: "success", handler: func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
			if string(e.Records[0].Kinesis.Data) != "hi" {
				return events.KinesisEventResponse{}, errors.New("bad decode")
			}
			return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{{ItemIdentifier: "1"}}}, nil
		}, payload: `{"batchItemFailures":[{"itemIdentifier":"1"}]}`},
		{name: "empty response", handler: func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
			return events.KinesisEventResponse{}, nil
		}, payload: `{"batchItemFailures":null}`},
		{name: "error", handler: func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
			return events.KinesisEventResponse{}, errors.New("boom")
		}, failed: true, errorType: "errorString", message: "boom"},
		{name: "typed error", handler: func(context.Context, events.KinesisEvent) error { return customErr{} },
			failed: true, errorType: "customErr", message: "custom"},
		{name: "runtime error document", handler: func(context.Context, events.KinesisEvent) error {
			return messages.InvokeResponse_Error{Type: "Custom.Type", Message: "as given"}
		}, failed: true, errorType: "Custom.Type", message: "as given"},
		{name: "undecodable event", handler: func(context.Context, struct{ Records int }) error { return nil },
			failed: true, errorType: "UnmarshalTypeError", message: "cannot unmarshal"},
		{name: "panic", handler: panicsHere, failed: true, errorType: "string", message: "kaboom"},
		{name: "timeout", handler: func(ctx context.Context, _ events.KinesisEvent) error {
			<-ctx.Done()
			time.Sleep(10 * time.Millisecond)
			return nil
		}, failed: true, errorType: "Sandbox.Timedout", message: "Task timed out after 0.05 seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(tt.handler, WithTimeout(50*time.Millisecond), WithFunctionARN("arn:aws:lambda:us-east-1:1:function:f"))
			resp, err := p.Invoke(context.Background(), event)
			if err != nil {
				t.Fatalf("in-process invoke returned %v", err)
			}
			if resp.Failed() != tt.failed || resp.StatusCode != 200 || resp.ExecutedVersion != "$LATEST" || resp.RequestID == "" {
				t.Fatalf("failed=%v status=%d version=%q id=%q, want failed=%v status 200 $LATEST and an id (%s)",
					resp.Failed(), resp.StatusCode, resp.ExecutedVersion, resp.RequestID, tt.failed, resp.Payload)
			}
			if !tt.failed {
				if strings.TrimSpace(string(resp.Payload)) != tt.payload {
					t.Fatalf("payload %s, want %s", resp.Payload, tt.payload)
				}
				return
			}
			if resp.FunctionError != invoke.FunctionErrorUnhandled {
				t.Fatalf("FunctionError %q", resp.FunctionError)
			}
			var doc invoke.ErrorDocument
			if err := json.Unmarshal(resp.Payload, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.ErrorType != tt.errorType || !strings.Contains(doc.ErrorMessage, tt.message) {
				t.Fatalf("error document %+v, want type %q message containing %q", doc, tt.errorType, tt.message)
			}
		})
	}
}

func TestInProcessPanicStackTrace(t *testing.T) {
	resp, err := New(panicsHere).Invoke(context.Background(), []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var doc invoke.ErrorDocument
	if err := json.Unmarshal(resp.Payload, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.StackTrace) == 0 || doc.StackTrace[0].Label != "gopanic" || doc.StackTrace[0].Path != "runtime/panic.go" {
		t.Fatalf("stack %+v: want the Go runtime's frames, from the panic down", doc.StackTrace)
	}
	found := false
	for _, f := range doc.StackTrace {
		// The path is relative to the module path only in -trimpath builds (as Lambda bootstraps are).
		if f.Label == "panicsHere" && strings.HasSuffix(f.Path, "invoke/inprocess/inprocess_test.go") && f.Line > 0 {
			found = true
		}
	}
	if !found {
		t.Fatalf("stack %+v: no frame for the panicking handler", doc.StackTrace)
	}
}

func TestStackFrame(t *testing.T) {
	tests := []struct {
		function, file string
		want           invoke.StackFrame
	}{
		{"github.com/x/y/pkg.(*T).M", "/home/u/go/pkg/mod/github.com/x/y/pkg/f.go", invoke.StackFrame{Path: "github.com/x/y/pkg/f.go", Line: 7, Label: "(*T).M"}},
		{"main.main", "/src/app/main.go", invoke.StackFrame{Path: "app/main.go", Line: 7, Label: "main"}},
		{"runtime.gopanic", "/usr/local/go/src/runtime/panic.go", invoke.StackFrame{Path: "runtime/panic.go", Line: 7, Label: "gopanic"}},
		{"github.com/x/y.F.func1", "f.go", invoke.StackFrame{Path: "f.go", Line: 7, Label: "F.func1"}},
	}
	for _, tt := range tests {
		if got := stackFrame(tt.function, tt.file, 7); got != tt.want {
			t.Errorf("stackFrame(%q, %q) = %+v, want %+v", tt.function, tt.file, got, tt.want)
		}
	}
}

func TestInProcessLambdaContext(t *testing.T) {
	var lc *lambdacontext.LambdaContext
	var deadline time.Time
	handler := func(ctx context.Context, _ events.KinesisEvent) error {
		lc, _ = lambdacontext.FromContext(ctx)
		deadline, _ = ctx.Deadline()
		return nil
	}
	tests := []struct {
		name    string
		opts    []Option
		arn     string
		timeout time.Duration
	}{
		{name: "defaults", arn: invoke.DefaultFunctionARN, timeout: 3 * time.Second},
		{name: "configured", opts: []Option{WithFunctionARN("arn:aws:lambda:us-east-1:1:function:f"), WithTimeout(7 * time.Second)},
			arn: "arn:aws:lambda:us-east-1:1:function:f", timeout: 7 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			resp, err := New(handler, tt.opts...).Invoke(context.Background(), []byte(`{"Records":[]}`))
			if err != nil {
				t.Fatal(err)
			}
			if lc == nil || lc.AwsRequestID != resp.RequestID || lc.InvokedFunctionArn != tt.arn {
				t.Fatalf("lambda context %+v (response request ID %q), want ARN %q", lc, resp.RequestID, tt.arn)
			}
			if d := deadline.Sub(start); d < tt.timeout-100*time.Millisecond || d > tt.timeout+100*time.Millisecond {
				t.Fatalf("deadline %s after start, want the %v timeout", d, tt.timeout)
			}
		})
	}
}

func TestInProcessCallerCancel(t *testing.T) {
	entered := make(chan struct{})
	p := New(func(ctx context.Context, _ events.KinesisEvent) error {
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel()
	}()
	_, err := p.Invoke(ctx, []byte(`{}`))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v: a caller that gave up gets its context's error, not a timeout", err)
	}
}

// TestTimedOutHandlerDoesNotOverlapItsRetry: Invoke reports a timeout only once the timed-out
// handler returned (Lambda kills the environment; a goroutine is waited for), so the retry the
// caller sends next never runs alongside it.
func TestTimedOutHandlerDoesNotOverlapItsRetry(t *testing.T) {
	var running, overlapped atomic.Int32
	p := New(func(ctx context.Context, _ events.KinesisEvent) error {
		if running.Add(1) > 1 {
			overlapped.Add(1)
		}
		defer running.Add(-1)
		<-ctx.Done()
		time.Sleep(150 * time.Millisecond) // ignores its cancelled context for a while
		return nil
	}, WithTimeout(50*time.Millisecond))
	for i := 0; i < 2; i++ { // the invocation and its retry
		resp, err := p.Invoke(context.Background(), []byte(`{"Records":[]}`))
		if err != nil || !strings.Contains(string(resp.Payload), "Sandbox.Timedout") {
			t.Fatalf("attempt %d: %s, %v: want a timeout", i, resp.Payload, err)
		}
		if n := running.Load(); n != 0 {
			t.Fatalf("attempt %d: Invoke returned with the timed-out handler still running", i)
		}
	}
	if overlapped.Load() != 0 {
		t.Fatal("a retry ran alongside the timed-out invocation")
	}
}

// TestHandlerOverrunningTheWaitIsLeftWithAWarning: a handler that ignores its context past the
// overrun wait cannot be stopped; the timeout is reported then, with a warning.
func TestHandlerOverrunningTheWaitIsLeftWithAWarning(t *testing.T) {
	release := make(chan struct{})
	ended := make(chan struct{})
	var log testkit.SyncBuffer
	p := New(func(ctx context.Context, _ events.KinesisEvent) error {
		defer close(ended)
		<-release
		return nil
	}, WithTimeout(20*time.Millisecond), WithOverrunWait(50*time.Millisecond), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	start := time.Now()
	resp, err := p.Invoke(context.Background(), []byte(`{"Records":[]}`))
	took := time.Since(start)
	close(release)
	<-ended
	if err != nil || !strings.Contains(string(resp.Payload), "Sandbox.Timedout") {
		t.Fatalf("%s, %v: want a timeout", resp.Payload, err)
	}
	if took < 70*time.Millisecond {
		t.Fatalf("returned after %v: want the timeout plus the overrun wait", took)
	}
	if !strings.Contains(log.String(), "still running after its timeout") {
		t.Fatalf("log %q: want the overrun warning", log.String())
	}
}

// TestResponseOutlivesTheNextInvocation keeps each response while later and concurrent
// invocations run: a lambda.Handler hands out the bytes of a pooled buffer that its next
// invocation reuses, so a response kept without a copy changes under its holder, and two
// invocations at once share the buffer (TestDirectPathThroughThePoller raced on it).
func TestResponseOutlivesTheNextInvocation(t *testing.T) {
	type answer struct{ N int }
	inv := New(func(_ context.Context, in answer) (answer, error) { return in, nil })
	const workers, each = 8, 50
	kept := make([][]invoke.Response, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for n := range each {
				resp, err := inv.Invoke(context.Background(), fmt.Appendf(nil, `{"N":%d}`, w*each+n))
				if err != nil || resp.Failed() {
					t.Errorf("invocation %d: %v %+v", w*each+n, err, resp)
					return
				}
				kept[w] = append(kept[w], resp)
			}
		})
	}
	wg.Wait()
	for w := range workers {
		for n, resp := range kept[w] {
			if want := fmt.Sprintf(`{"N":%d}`, w*each+n); strings.TrimSpace(string(resp.Payload)) != want {
				t.Fatalf("response %d reads %q once other invocations ran, want %q", w*each+n, resp.Payload, want)
			}
		}
	}
}
