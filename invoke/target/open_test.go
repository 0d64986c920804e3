package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
)

// invokeOnce invokes inv with an empty event within 30 s.
func invokeOnce(t *testing.T, inv invoke.Invoker) invoke.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := inv.Invoke(ctx, []byte(`{"Records":[]}`))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	return resp
}

// recorder is an httptest server that records the paths it was sent and answers "ok".
type recorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	paths []string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.paths = append(r.paths, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		_, _ = io.WriteString(w, `"ok"`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

// TestOpenURLs: "url1 url2" in one value is a pool of both endpoints; the same endpoint twice is
// an invalid target that names the pool.
func TestOpenURLs(t *testing.T) {
	a, b := newRecorder(t), newRecorder(t)
	inv, closeFn, err := Open(a.srv.URL + " " + b.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	// The endpoints take turns: a free endpoint goes to the back of the queue.
	for range 2 {
		if resp := invokeOnce(t, inv); string(resp.Payload) != `"ok"` {
			t.Fatalf("response %q", resp.Payload)
		}
	}
	want := []string{"POST /2015-03-31/functions/function/invocations"}
	if !slices.Equal(a.seen(), want) || !slices.Equal(b.seen(), want) {
		t.Fatalf("the endpoints saw %q and %q, want one invocation each", a.seen(), b.seen())
	}
	_, closeFn, err = Open(a.srv.URL + " " + a.srv.URL)
	if !errors.Is(err, ErrInvalidTarget) || !strings.HasPrefix(err.Error(), a.srv.URL+" "+a.srv.URL+": invoke: endpoints") || closeFn == nil {
		t.Fatalf("the same endpoint twice: %v", err)
	}
}

// TestOpenLambda: a lambda: target invokes through the Lambda API of WithEndpoint, with the
// SDK configuration of WithAWS.
func TestOpenLambda(t *testing.T) {
	api := newRecorder(t)
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")}
	inv, closeFn, err := Open("lambda:orders:live", WithAWS(cfg), WithEndpoint(api.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if resp := invokeOnce(t, inv); resp.StatusCode != 200 || string(resp.Payload) != `"ok"` {
		t.Fatalf("response %+v", resp)
	}
	if got := api.seen(); len(got) != 1 || got[0] != "POST /2015-03-31/functions/orders:live/invocations" {
		t.Fatalf("the Lambda API saw %q", got)
	}
}

// TestOpenInProcess: example, and no target at all, run the WithHandler handler in this process
// with the function's ARN; the invoker is the in-process one itself, so that the poller sees
// that a Kinesis handler takes records without JSON. Without a handler both are invalid.
func TestOpenInProcess(t *testing.T) {
	const arn = "arn:aws:lambda:eu-west-1:123456789012:function:orders"
	handler := func(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		lc, _ := lambdacontext.FromContext(ctx)
		return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{{ItemIdentifier: lc.InvokedFunctionArn}}}, nil
	}
	for _, target := range []string{"example", ""} {
		inv, closeFn, err := Open(target, WithHandler(handler), WithFunction("orders", arn))
		if err != nil {
			t.Fatalf("%q: %v", target, err)
		}
		if resp := invokeOnce(t, inv); !strings.Contains(string(resp.Payload), arn) {
			t.Fatalf("%q: response %s, want the ARN the handler saw, %s", target, resp.Payload, arn)
		}
		if r, ok := inv.(interface{ TakesRecords() bool }); !ok || !r.TakesRecords() {
			t.Fatalf("%q: invoker %T does not take records", target, inv)
		}
		if err := closeFn(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := Open(target); !errors.Is(err, ErrInvalidTarget) || !strings.Contains(err.Error(), "no Go handler to run in process (WithHandler)") {
			t.Fatalf("%q without a handler: %v", target, err)
		}
	}
}

// TestOpenReservedConcurrency: WithReservedConcurrency caps the invoker as Limit does; 0
// throttles every invocation.
func TestOpenReservedConcurrency(t *testing.T) {
	inv, _, err := Open("example", WithHandler(func() {}), WithReservedConcurrency(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inv.Invoke(context.Background(), []byte(`{}`)); !errors.Is(err, invoke.ErrThrottled) {
		t.Fatalf("reserved concurrency 0: %v, want throttled", err)
	}
	inv, _, err = Open("example", WithHandler(func() {}), WithReservedConcurrency(1))
	if err != nil || fmt.Sprintf("%T", inv) != "*invoke.limited" {
		t.Fatalf("reserved concurrency 1: %T, %v", inv, err)
	}
}

// bashRuntime is the custom runtime of execenv's tests (bash and curl); its handler
// function.handler answers with its environment when BASH_FAIL is env.
func bashRuntime(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../execenv/testdata/bash-runtime/bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenExecGivesTheOptions: an exec: target (a binary and its arguments) runs with what the
// options say: the function's name, region, memory, handler, environment, the variables passed
// on and the credentials; nothing else of this process's environment.
func TestOpenExecGivesTheOptions(t *testing.T) {
	t.Setenv("PASSED_ON", "yes")
	t.Setenv("KEPT_BACK", "secret")
	out := &testkit.SyncBuffer{}
	inv, closeFn, err := Open("exec:"+bashRuntime(t)+" --an-argument",
		WithFunction("orders", "arn:aws:lambda:eu-west-1:123456789012:function:orders"), WithRegion("eu-west-1"),
		WithMemorySize(256), WithHandlerName("function.handler"), WithEnvironment(map[string]string{"BASH_FAIL": "env"}),
		WithEnvironment(map[string]string{"FROM_TEMPLATE": "1"}), WithPassEnv("PASSED_ON"), WithOutput(out), WithTimeout(10*time.Second),
		WithCredentials(credentials.NewStaticCredentialsProvider("AKIDFUNCTION", "fn-secret", "fn-token")))
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	env := testkit.Environ(t, invokeOnce(t, inv).Payload)
	for k, want := range map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME": "orders", "AWS_REGION": "eu-west-1", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
		"_HANDLER": "function.handler", "BASH_FAIL": "env", "FROM_TEMPLATE": "1", "PASSED_ON": "yes",
		"AWS_ACCESS_KEY_ID": "AKIDFUNCTION", "AWS_SECRET_ACCESS_KEY": "fn-secret", "AWS_SESSION_TOKEN": "fn-token",
	} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	if v, ok := env["KEPT_BACK"]; ok {
		t.Errorf("KEPT_BACK=%q reached the function", v)
	}
	if err := closeFn(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "REPORT RequestId:") {
		t.Fatalf("the function's log went elsewhere than WithOutput: %q", out.String())
	}
}

// TestOpenExecRefusals: a binary that cannot be found and a variable that cannot be passed are
// invalid targets, named in the error.
func TestOpenExecRefusals(t *testing.T) {
	_, closeFn, err := Open("exec:./no-such-bootstrap")
	if !errors.Is(err, ErrInvalidTarget) || !strings.HasPrefix(err.Error(), "exec:./no-such-bootstrap: exec: ") || closeFn == nil {
		t.Fatalf("a missing binary: %v", err)
	}
	_, _, err = Open("exec:"+bashRuntime(t), WithPassEnv("A=B"))
	if !errors.Is(err, ErrInvalidTarget) || err.Error() != `pass-env "A=B": want the name of a variable` {
		t.Fatalf("a variable A=B: %v", err)
	}
}

// TestLeastBusy: an invocation goes to the invoker with the fewest in flight, the first on a tie.
func TestLeastBusy(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var got []int
	invoker := func(i int, block bool) invoke.Invoker {
		return invoke.InvokerFunc(func(context.Context, []byte) (invoke.Response, error) {
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
			if block {
				entered <- struct{}{}
				<-release
			}
			return invoke.Response{StatusCode: 200}, nil
		})
	}
	l := newLeastBusy([]invoke.Invoker{invoker(0, true), invoker(1, false)})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = l.Invoke(context.Background(), nil)
	}()
	<-entered // 0 has one in flight: the next goes to 1
	if _, err := l.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-done
	l.pools[0] = invoker(0, false) // none in flight: the first
	if _, err := l.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("invoked %v, want %v", got, want)
	}
}
