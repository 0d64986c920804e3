package execenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
)

// goBootstrap is the example function built as a Lambda bootstrap (plain lambda.Start).
var goBootstrap string

// bashBootstrap is a custom runtime written in bash with curl, in the shape of AWS's tutorial.
var bashBootstrap string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "esm-execenv-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	goBootstrap = filepath.Join(dir, "bootstrap")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := testenv.BuildBootstrap(ctx, "", goBootstrap, "github.com/kinesis-esm/esm/example/bootstrap", ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if bashBootstrap, err = filepath.Abs("testdata/bash-runtime/bootstrap"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			return 1
		}
	}
	return code
}

// oneRecord is a Kinesis event of one record, as esm's poller writes it.
var oneRecord = []byte(`{"Records":[{"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":"k","sequenceNumber":"1","data":"aGk=","approximateArrivalTimestamp":1700000000.5},"eventSource":"aws:kinesis","eventVersion":"1.0","eventID":"shardId-000000000000:1","eventName":"aws:kinesis:record","invokeIdentityArn":"arn:aws:iam::000000000000:role/r","awsRegion":"us-east-1","eventSourceARN":"arn:aws:kinesis:us-east-1:000000000000:stream/s"}]}`)

// harness is a pool under test with its function log and esm's debug log.
type harness struct {
	pool *Pool
	out  *testkit.SyncBuffer // the function's log
	log  *testkit.SyncBuffer // esm's log (JSON)
}

func newHarness(t *testing.T, command string, env map[string]string, opts ...Option) *harness {
	t.Helper()
	h := &harness{out: &testkit.SyncBuffer{}, log: &testkit.SyncBuffer{}}
	opts = append([]Option{WithEnvironment(env), WithOutput(h.out), WithTimeout(2 * time.Second),
		WithLogger(slog.New(slog.NewJSONHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		WithFunction("fn", "arn:aws:lambda:us-east-1:000000000000:function:fn")}, opts...)
	p, err := New([]string{command}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h.pool = p
	t.Cleanup(func() { _ = p.Close() })
	return h
}

func (h *harness) invoke(t *testing.T) invoke.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := h.pool.Invoke(ctx, oneRecord)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if resp.StatusCode != 200 || resp.RequestID == "" || resp.ExecutedVersion != "$LATEST" {
		t.Fatalf("response %+v: want status 200, a request ID, $LATEST", resp)
	}
	return resp
}

// startedPIDs are the processes the pool started, in order.
func (h *harness) startedPIDs(t *testing.T) []int {
	t.Helper()
	var pids []int
	for _, line := range strings.Split(strings.TrimSpace(h.log.String()), "\n") {
		var rec struct {
			Msg string `json:"msg"`
			PID int    `json:"pid"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "execution environment started" {
			pids = append(pids, rec.PID)
		}
	}
	return pids
}

func errorType(t *testing.T, resp invoke.Response) (string, string) {
	t.Helper()
	if !resp.Failed() {
		t.Fatalf("response %s: want a function error", resp.Payload)
	}
	var doc struct{ ErrorType, ErrorMessage string }
	if err := json.Unmarshal(resp.Payload, &doc); err != nil {
		t.Fatalf("error document %s: %v", resp.Payload, err)
	}
	return doc.ErrorType, doc.ErrorMessage
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// reportLine is the REPORT line Lambda writes for an invocation (tabs between the fields).
var reportLine = regexp.MustCompile(`^REPORT RequestId: ([0-9a-f-]{36})\tDuration: [0-9]+\.[0-9]{2} ms\tBilled Duration: [0-9]+ ms\tMemory Size: 128 MB\tMax Memory Used: [0-9]+ MB(\tInit Duration: [0-9]+\.[0-9]{2} ms)?$`)

// framed checks the log frames invocation id with START, END and REPORT, in that order, and that
// the REPORT line has an Init Duration exactly when cold.
func framed(t *testing.T, out, id string, cold bool) {
	t.Helper()
	lines := strings.Split(out, "\n")
	start, end, report := -1, -1, -1
	for i, l := range lines {
		switch {
		case l == "START RequestId: "+id+" Version: $LATEST":
			start = i
		case l == "END RequestId: "+id:
			end = i
		case strings.HasPrefix(l, "REPORT RequestId: "+id):
			report = i
			m := reportLine.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("REPORT line %q is not Lambda's", l)
			}
			if (m[2] != "") != cold {
				t.Fatalf("REPORT line %q: Init Duration present=%v, want %v", l, m[2] != "", cold)
			}
		}
	}
	if start < 0 || end <= start || report <= end {
		t.Fatalf("invocation %s: START at %d, END at %d, REPORT at %d; want them in that order in\n%s", id, start, end, report, out)
	}
}

// TestGoBootstrap runs the example function's bootstrap (aws-lambda-go, unmodified) in execution
// environments: success and warm reuse, a handler error, a panic, a timeout, an init error.
func TestGoBootstrap(t *testing.T) {
	t.Parallel()
	t.Run("success and warm reuse", func(t *testing.T) {
		t.Parallel()
		trace := filepath.Join(t.TempDir(), "trace.jsonl")
		h := newHarness(t, goBootstrap, map[string]string{"EXAMPLE_TRACE": trace, "EXAMPLE_OUTPUT": os.DevNull})
		first, second := h.invoke(t), h.invoke(t)
		for _, r := range []invoke.Response{first, second} {
			if r.Failed() || string(r.Payload) != `{"batchItemFailures":null}` {
				t.Fatalf("payload %s failed=%v: want the handler's response", r.Payload, r.Failed())
			}
		}
		traces := readTraces(t, trace)
		if len(traces) != 2 || traces[0].PID != traces[1].PID || traces[0].RequestID != first.RequestID ||
			traces[0].FunctionARN != "arn:aws:lambda:us-east-1:000000000000:function:fn" {
			t.Fatalf("traces %+v: want both invocations in one warm process, with the request ID and ARN", traces)
		}
		if traces[0].Deadline == 0 || time.Duration(traces[0].Deadline-traces[0].Start) > 2*time.Second {
			t.Fatalf("deadline %d for a start at %d: want the 2 s timeout", traces[0].Deadline, traces[0].Start)
		}
		framed(t, h.out.String(), first.RequestID, true)
		framed(t, h.out.String(), second.RequestID, false)
		if n := h.pool.Environments(); n != 1 {
			t.Fatalf("%d environments for invocations one after the other, want 1", n)
		}
	})
	t.Run("the caller's trace header reaches the function", func(t *testing.T) {
		t.Parallel()
		trace := filepath.Join(t.TempDir(), "trace.jsonl")
		h := newHarness(t, goBootstrap, map[string]string{"EXAMPLE_TRACE": trace})
		const header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
		ctx, cancel := context.WithTimeout(invoke.WithTraceHeader(context.Background(), header), 30*time.Second)
		defer cancel()
		if _, err := h.pool.Invoke(ctx, oneRecord); err != nil {
			t.Fatal(err)
		}
		h.invoke(t) // without one: a header of its own, not sampled
		tr := readTraces(t, trace)
		if len(tr) != 2 || tr[0].TraceHeader != header || !strings.HasSuffix(tr[1].TraceHeader, ";Sampled=0") {
			t.Fatalf("traces %+v: want the caller's header as Lambda-Runtime-Trace-Id, then one of esm's", tr)
		}
	})
	t.Run("handler error keeps the environment", func(t *testing.T) {
		t.Parallel()
		trace := filepath.Join(t.TempDir(), "trace.jsonl")
		h := newHarness(t, goBootstrap, map[string]string{"EXAMPLE_FAIL": example.FailError, "EXAMPLE_TRACE": trace})
		typ, msg := errorType(t, h.invoke(t))
		if typ != "errorString" || !strings.Contains(msg, "example") {
			t.Fatalf("error %s: %s; want the handler's error as aws-lambda-go reports it", typ, msg)
		}
		h.invoke(t)
		if tr := readTraces(t, trace); len(tr) != 2 || tr[0].PID != tr[1].PID {
			t.Fatalf("traces %+v: want both in the same warm process", tr)
		}
	})
	t.Run("panic replaces the environment", func(t *testing.T) {
		t.Parallel()
		trace := filepath.Join(t.TempDir(), "trace.jsonl")
		h := newHarness(t, goBootstrap, map[string]string{"EXAMPLE_FAIL": example.FailPanic, "EXAMPLE_TRACE": trace})
		if typ, _ := errorType(t, h.invoke(t)); typ == "" {
			t.Fatal("no errorType for a panic")
		}
		h.invoke(t)
		tr := readTraces(t, trace)
		if len(tr) != 2 || tr[0].PID == tr[1].PID {
			t.Fatalf("traces %+v: aws-lambda-go exits after a panic, so the next invocation runs in a fresh process", tr)
		}
	})
	t.Run("timeout kills the environment and the retry runs in a fresh one", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		trace := filepath.Join(dir, "trace.jsonl")
		h := newHarness(t, goBootstrap, map[string]string{"EXAMPLE_FAIL": example.FailTimeout, "EXAMPLE_FAIL_TIMES": "1",
			"EXAMPLE_FAIL_COUNTER": filepath.Join(dir, "counter"), "EXAMPLE_TRACE": trace}, WithTimeout(time.Second))
		resp := h.invoke(t)
		typ, msg := errorType(t, resp)
		if typ != "Sandbox.Timedout" || msg != "RequestId: "+resp.RequestID+" Error: Task timed out after 1.00 seconds" {
			t.Fatalf("error %s: %s; want Lambda's timeout", typ, msg)
		}
		pids := h.startedPIDs(t)
		if len(pids) != 1 || alive(pids[0]) {
			t.Fatalf("started %v: want the timed-out environment's process killed", pids)
		}
		if !strings.Contains(h.out.String(), resp.RequestID+" Task timed out after 1.00 seconds") {
			t.Fatalf("log %q: want the timeout line", h.out.String())
		}
		retry := h.invoke(t)
		if retry.Failed() {
			t.Fatalf("retry failed: %s", retry.Payload)
		}
		tr := readTraces(t, trace)
		if len(tr) != 1 || tr[0].PID == pids[0] || tr[0].RequestID != retry.RequestID {
			t.Fatalf("traces %+v, first process %d: want the retry in a fresh process", tr, pids[0])
		}
	})
	t.Run("init error", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, goBootstrap, map[string]string{"EXAMPLE_INIT_FAIL": "exit"})
		resp := h.invoke(t)
		typ, msg := errorType(t, resp)
		if typ != "Runtime.ExitError" || msg != "RequestId: "+resp.RequestID+" Error: Runtime exited with error: exit status 1" {
			t.Fatalf("error %s: %s; want Runtime.ExitError for a runtime that exits during init", typ, msg)
		}
		out := h.out.String()
		if !strings.Contains(out, "INIT_REPORT Init Duration: ") || !strings.Contains(out, "Error Type: Runtime.ExitError") ||
			!strings.Contains(out, "exiting during init") {
			t.Fatalf("log %q: want the init report and the runtime's own output", out)
		}
		framed(t, out, resp.RequestID, true)
		h.invoke(t) // init again, in a new environment
		if pids := h.startedPIDs(t); len(pids) != 2 || h.pool.Environments() != 0 {
			t.Fatalf("started %v, %d alive: want a fresh environment for each invocation, none kept", pids, h.pool.Environments())
		}
	})
}

// TestBashRuntime runs a custom runtime that no Go code is part of: bash and curl, in the shape
// of AWS's custom-runtime tutorial.
func TestBashRuntime(t *testing.T) {
	t.Parallel()
	pidsOf := func(t *testing.T, path string) []string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(b))
	}
	t.Run("success, warm reuse and the reserved variables", func(t *testing.T) {
		t.Parallel()
		pids := filepath.Join(t.TempDir(), "pids")
		h := newHarness(t, bashBootstrap, map[string]string{"BASH_PIDS": pids}, WithHandler("function.handler"))
		first, second := h.invoke(t), h.invoke(t)
		if first.Failed() || string(first.Payload) != `{"batchItemFailures":[]}` {
			t.Fatalf("payload %s", first.Payload)
		}
		if p := pidsOf(t, pids); len(p) != 2 || p[0] != p[1] {
			t.Fatalf("runtime PIDs %v: want one warm process", p)
		}
		out := h.out.String()
		framed(t, out, first.RequestID, true)
		framed(t, out, second.RequestID, false)
		if !regexp.MustCompile(`\t` + first.RequestID + `\thandling 1 records in [0-9]+`).MatchString(out) {
			t.Fatalf("log %q: want the runtime's stderr with the request ID", out)
		}
	})
	t.Run("handler error", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, bashBootstrap, map[string]string{"BASH_FAIL": "error"}, WithHandler("function.handler"))
		typ, msg := errorType(t, h.invoke(t))
		if typ != "HandlerError" || msg != "handler failed: bad batch" {
			t.Fatalf("error %s: %s; want the document the runtime posted to /error", typ, msg)
		}
		if h.pool.Environments() != 1 {
			t.Fatal("the environment did not stay warm after an invocation error")
		}
	})
	t.Run("exit mid-invocation", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		once := filepath.Join(dir, "once")
		writeFile(t, once)
		pids := filepath.Join(dir, "pids")
		h := newHarness(t, bashBootstrap, map[string]string{"BASH_FAIL": "exit", "BASH_FAIL_ONCE": once, "BASH_PIDS": pids},
			WithHandler("function.handler"))
		resp := h.invoke(t)
		typ, msg := errorType(t, resp)
		if typ != "Runtime.ExitError" || msg != "RequestId: "+resp.RequestID+" Error: Runtime exited with error: signal: killed" {
			t.Fatalf("error %s: %s; want Runtime.ExitError", typ, msg)
		}
		if ok := h.invoke(t); ok.Failed() {
			t.Fatalf("next invocation: %s", ok.Payload)
		}
		if p := pidsOf(t, pids); len(p) != 2 || p[0] == p[1] {
			t.Fatalf("runtime PIDs %v: want the next invocation in a fresh process", p)
		}
	})
	t.Run("timeout kills the environment and the retry runs in a fresh one", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		once := filepath.Join(dir, "once")
		writeFile(t, once)
		pids := filepath.Join(dir, "pids")
		h := newHarness(t, bashBootstrap, map[string]string{"BASH_FAIL": "sleep", "BASH_FAIL_ONCE": once, "BASH_PIDS": pids},
			WithHandler("function.handler"), WithTimeout(time.Second))
		if typ, _ := errorType(t, h.invoke(t)); typ != "Sandbox.Timedout" {
			t.Fatalf("error type %s, want Sandbox.Timedout", typ)
		}
		first := pidsOf(t, pids)
		pid, _ := strconv.Atoi(first[0])
		if alive(pid) {
			t.Fatalf("runtime %d still alive after the timeout", pid)
		}
		if ok := h.invoke(t); ok.Failed() {
			t.Fatalf("retry: %s", ok.Payload)
		}
		if p := pidsOf(t, pids); len(p) != 2 || p[0] == p[1] {
			t.Fatalf("runtime PIDs %v: want the retry in a fresh process", p)
		}
	})
	t.Run("init error", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, bashBootstrap, nil, WithHandler("missing.handler"))
		resp := h.invoke(t)
		typ, msg := errorType(t, resp)
		if typ != "Runtime.InitError" || msg != "handler script missing.sh not found" {
			t.Fatalf("error %s: %s; want the runtime's /init/error as Runtime.InitError", typ, msg)
		}
		if !strings.Contains(h.out.String(), "Error Type: Runtime.InitError") {
			t.Fatalf("log %q: want the init report", h.out.String())
		}
	})
}

// TestRuntimeAPIRefusesWhatLambdaRefuses: a response for another request ID is refused, and so is
// an init error after init.
func TestRuntimeAPIRefusesWhatLambdaRefuses(t *testing.T) {
	t.Parallel()
	e := &environment{cfg: &config{now: time.Now}, initDone: make(chan struct{}), initFailed: make(chan posted, 1)}
	close(e.initDone)
	srv := e.routes()
	for _, tt := range []struct{ path, errorType string }{
		{apiPrefix + "/invocation/nope/response", "InvalidRequestID"},
		{apiPrefix + "/init/error", "InvalidStateTransition"},
	} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("POST", tt.path, bytes.NewReader([]byte(`{}`))))
		if rec.Code/100 != 4 || !strings.Contains(rec.Body.String(), tt.errorType) {
			t.Fatalf("POST %s: %d %s, want a 4xx %s", tt.path, rec.Code, rec.Body, tt.errorType)
		}
	}
}

// TestPoolWaitsWhenFull: with one environment, a second invocation waits for it, as long as its
// context allows.
func TestPoolWaitsWhenFull(t *testing.T) {
	t.Parallel()
	// The function's timeout is well past its 1 s of work, so that a loaded machine cannot make
	// the first invocation time out (which ends its environment).
	h := newHarness(t, bashBootstrap, map[string]string{"BASH_DELAY": "1"}, WithHandler("function.handler"), WithMaxEnvironments(1),
		WithTimeout(20*time.Second))
	done := make(chan error, 1)
	go func() {
		resp, err := h.pool.Invoke(context.Background(), oneRecord)
		if err == nil && resp.Failed() {
			err = fmt.Errorf("the first invocation failed: %s %s", resp.FunctionError, resp.Payload)
		}
		done <- err
	}()
	testkit.WaitFor(t, "the first invocation to start", 10*time.Second, func() bool { return strings.Contains(h.out.String(), "START") })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := h.pool.Invoke(ctx, oneRecord); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v: want the wait for the busy environment to end with the context", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h.pool.Environments() != 1 {
		t.Fatalf("%d environments, want the one", h.pool.Environments())
	}
}

func readTraces(t *testing.T, path string) []example.Trace {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []example.Trace
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var tr example.Trace
		if err := json.Unmarshal(line, &tr); err != nil {
			t.Fatal(err)
		}
		out = append(out, tr)
	}
	return out
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNewFindsTheBinary: a missing binary fails at once; a bare name is looked up in PATH, with a
// hint when the file is in the working directory.
func TestNewFindsTheBinary(t *testing.T) {
	if _, err := New([]string{filepath.Join(t.TempDir(), "nope")}); err == nil {
		t.Fatal("a missing binary was accepted")
	}
	if _, err := New(nil); err == nil {
		t.Fatal("no binary was accepted")
	}
	t.Chdir(filepath.Dir(bashBootstrap))
	_, err := New([]string{"bootstrap"})
	if err == nil || !strings.Contains(err.Error(), "./bootstrap") {
		t.Fatalf("err %v: want the hint to write ./bootstrap", err)
	}
	if p, err := New([]string{"./bootstrap"}); err != nil || p.cfg.command[0] != bashBootstrap {
		t.Fatalf("./bootstrap: %v", err)
	}
}

// TestPoolWaitAsksTheStartCheck: an invocation that waited for the busy environment is not
// started when the caller's start check says no by then (the poller's lease may have ended
// during the wait).
func TestPoolWaitAsksTheStartCheck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, bashBootstrap, map[string]string{"BASH_DELAY": "1"}, WithHandler("function.handler"), WithMaxEnvironments(1),
		WithTimeout(20*time.Second))
	done := make(chan error, 1)
	go func() {
		_, err := h.pool.Invoke(context.Background(), oneRecord)
		done <- err
	}()
	testkit.WaitFor(t, "the first invocation to start", 10*time.Second, func() bool { return strings.Contains(h.out.String(), "START") })
	var allowed atomic.Bool
	allowed.Store(true)
	second := make(chan error, 1)
	go func() {
		_, err := h.pool.Invoke(invoke.WithStartCheck(context.Background(), allowed.Load), oneRecord)
		second <- err
	}()
	allowed.Store(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-second; !errors.Is(err, invoke.ErrNotStarted) {
		t.Fatalf("err %v: want invoke.ErrNotStarted", err)
	}
	if n := strings.Count(h.out.String(), "START"); n != 1 {
		t.Fatalf("%d invocations started, want the first only", n)
	}
}
