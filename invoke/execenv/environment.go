package execenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/invoke"
)

// The Runtime API's paths (version 2018-06-01) and headers.
const (
	apiPrefix        = "/2018-06-01/runtime"
	headerRequestID  = "Lambda-Runtime-Aws-Request-Id"
	headerDeadline   = "Lambda-Runtime-Deadline-Ms"
	headerARN        = "Lambda-Runtime-Invoked-Function-Arn"
	headerTraceID    = "Lambda-Runtime-Trace-Id"
	headerErrorType  = "Lambda-Runtime-Function-Error-Type"
	errorTypeInit    = "Runtime.InitError"
	errorTypeExit    = "Runtime.ExitError"
	errorTypeUnknown = "Runtime.Unknown"
	// errorTypeOutOfMemory is Lambda's error type for an environment killed at its memory limit.
	errorTypeOutOfMemory = "Runtime.OutOfMemory"
)

// environment is one execution environment: a process of the binary and its Runtime API.
type environment struct {
	cfg     *config
	out     *lineWriter
	name    string
	addr    string // the Runtime API's host:port
	ln      net.Listener
	srv     *http.Server
	cmd     *exec.Cmd
	sandbox *sandbox // what keeps the environment's processes together
	started time.Time
	readers sync.WaitGroup // the stdout and stderr forwarders
	outputs []*output      // the read ends of the process's stdout and stderr

	// next hands an invocation to the runtime's pending GET /next.
	next chan *invocation
	// initDone is closed at the runtime's first GET /next: init is over.
	initDone chan struct{}
	initOnce sync.Once
	initTook time.Duration // set before initDone is closed
	// initFailed receives what the runtime posted to /init/error.
	initFailed chan posted
	// exited is closed once the process has ended; state is then set.
	exited chan struct{}
	state  *os.ProcessState

	mu      sync.Mutex
	current *invocation // handed to the runtime, not yet answered
	lastID  string      // the latest invocation's request ID, for late log lines

	used     bool // only the invoking goroutine touches it
	stopOnce sync.Once
}

// invocation is one invocation handed to an environment.
type invocation struct {
	id       string
	payload  []byte
	deadline time.Time
	traceID  string
	arn      string      // the ARN the function is invoked as (Lambda-Runtime-Invoked-Function-Arn)
	result   chan posted // buffered: the runtime's answer
}

// posted is what the runtime posted for an invocation or for init.
type posted struct {
	body      []byte
	errorType string // the Lambda-Runtime-Function-Error-Type header
	failed    bool   // /error or /init/error
	tooLarge  bool   // the response passed Lambda's 6 MB limit
}

// startEnvironment starts the binary with a Runtime API of its own, in a sandbox of its own.
func startEnvironment(ctx context.Context, cfg *config, out *lineWriter, name string) (*environment, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("runtime API: %w", err)
	}
	e := &environment{
		cfg: cfg, out: out, name: name, addr: ln.Addr().String(), ln: ln,
		next:       make(chan *invocation),
		initDone:   make(chan struct{}),
		initFailed: make(chan posted, 1),
		exited:     make(chan struct{}),
	}
	sb, serr := newSandbox(cfg.containment, e.addr, cfg.memoryMB)
	if serr != nil {
		cfg.log.Warn("execution environment: not wholly contained", "environment", name, "error", serr)
	}
	e.sandbox = sb
	e.srv = &http.Server{Handler: e.routes(), ReadHeaderTimeout: 10 * time.Second}
	e.started = cfg.now() // before the Runtime API serves: init is measured from here
	go func() { _ = e.srv.Serve(ln) }()

	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		_ = e.srv.Close()
		sb.abandon()
		return nil, err
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		_ = e.srv.Close()
		sb.abandon()
		stdoutR.Close()
		stdoutW.Close()
		return nil, err
	}
	env := e.environ(ctx)
	start := func() error {
		e.cmd = exec.Command(cfg.command[0], cfg.command[1:]...)
		e.cmd.Env = env
		e.cmd.Stdout, e.cmd.Stderr = stdoutW, stderrW
		sb.setProcAttr(e.cmd)
		return e.cmd.Start()
	}
	err = start()
	if err != nil && sb.intoCgroup() {
		// The kernel would not start the process in its cgroup (no right to, an old kernel):
		// start it outside, then move it in, or contain it by sweeping.
		cfg.log.Debug("execution environment: starting in its cgroup failed; starting it outside", "environment", name, "error", err)
		sb.startOutside()
		if err = start(); err == nil {
			if aerr := sb.adopt(e.cmd.Process.Pid); aerr != nil {
				cfg.log.Warn("execution environment: not in a cgroup; its processes are swept instead", "environment", name, "error", aerr)
			}
		}
	}
	stdoutW.Close() // the child holds its own copies
	stderrW.Close()
	if err != nil {
		stdoutR.Close()
		stderrR.Close()
		_ = e.srv.Close()
		sb.abandon()
		return nil, err
	}
	sb.started(e.cmd.Process.Pid)
	e.outputs = []*output{{f: stdoutR}, {f: stderrR}}
	e.readers.Add(len(e.outputs))
	for _, o := range e.outputs {
		go e.forward(o)
	}
	go func() {
		_ = e.cmd.Wait()
		e.state = e.cmd.ProcessState
		close(e.exited)
	}()
	return e, nil
}

func (e *environment) pid() int { return e.cmd.Process.Pid }

// routes is the Runtime API.
func (e *environment) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+apiPrefix+"/invocation/next", e.handleNext)
	mux.HandleFunc("POST "+apiPrefix+"/invocation/{id}/response", func(w http.ResponseWriter, r *http.Request) {
		e.handleResult(w, r, false)
	})
	mux.HandleFunc("POST "+apiPrefix+"/invocation/{id}/error", func(w http.ResponseWriter, r *http.Request) {
		e.handleResult(w, r, true)
	})
	mux.HandleFunc("POST "+apiPrefix+"/init/error", e.handleInitError)
	return mux
}

// apiError answers as the Runtime API answers a request it refuses.
func apiError(w http.ResponseWriter, status int, errorType, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(invoke.ErrorDocument{ErrorMessage: message, ErrorType: errorType}.Marshal())
}

func accepted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"status":"OK"}`)
}

// handleNext ends init on its first call, then waits for the next invocation.
func (e *environment) handleNext(w http.ResponseWriter, r *http.Request) {
	e.initOnce.Do(func() {
		e.initTook = e.cfg.now().Sub(e.started)
		close(e.initDone)
	})
	var inv *invocation
	select {
	case inv = <-e.next:
	case <-r.Context().Done():
		return
	}
	e.mu.Lock()
	e.current, e.lastID = inv, inv.id
	e.mu.Unlock()
	// Before the runtime has the event, so that nothing it logs for it comes first.
	e.out.line(fmt.Sprintf("START RequestId: %s Version: %s", inv.id, e.cfg.version))
	h := w.Header()
	h.Set(headerRequestID, inv.id)
	h.Set(headerDeadline, strconv.FormatInt(inv.deadline.UnixMilli(), 10))
	h.Set(headerARN, inv.arn)
	h.Set(headerTraceID, inv.traceID)
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(inv.payload)
}

// handleResult takes the runtime's response or error for the invocation in flight.
func (e *environment) handleResult(w http.ResponseWriter, r *http.Request, failed bool) {
	id := r.PathValue("id")
	body, err := io.ReadAll(io.LimitReader(r.Body, invoke.MaxPayloadBytes+1))
	if err != nil {
		apiError(w, http.StatusBadRequest, "InvalidRequest", "read body: "+err.Error())
		return
	}
	e.mu.Lock()
	inv := e.current
	if inv == nil || inv.id != id {
		e.mu.Unlock()
		apiError(w, http.StatusBadRequest, "InvalidRequestID", "Invalid request ID")
		return
	}
	e.current = nil
	e.mu.Unlock()
	p := posted{body: body, failed: failed, errorType: r.Header.Get(headerErrorType)}
	if len(body) > invoke.MaxPayloadBytes {
		p = posted{tooLarge: true}
		inv.result <- p
		apiError(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge",
			fmt.Sprintf("Exceeded maximum allowed payload size (%d bytes).", invoke.MaxPayloadBytes))
		return
	}
	inv.result <- p
	accepted(w)
}

// handleInitError takes an init error; after init it is refused, as Lambda refuses it.
func (e *environment) handleInitError(w http.ResponseWriter, r *http.Request) {
	select {
	case <-e.initDone:
		apiError(w, http.StatusForbidden, "InvalidStateTransition", "State transition from Ready to InitError failed for runtime.")
		return
	default:
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, invoke.MaxPayloadBytes))
	select {
	case e.initFailed <- posted{body: body, failed: true, errorType: r.Header.Get(headerErrorType)}:
	default: // a second report: the first stands
	}
	accepted(w)
}

// invoke runs one invocation. reusable reports whether the environment stays warm for the next;
// err is errGone when the process had ended before the invocation was handed to it, or ctx's.
func (e *environment) invoke(ctx context.Context, payload []byte) (resp invoke.Response, reusable bool, err error) {
	th := invoke.TraceHeader(ctx)
	if th == "" {
		th = traceID(e.cfg.now())
	}
	inv := &invocation{id: uuid.NewString(), payload: payload, traceID: th, arn: invoke.FunctionARN(ctx, e.cfg.functionARN),
		result: make(chan posted, 1)}
	cold := !e.used
	e.used = true
	if cold {
		if resp, ok, err := e.awaitInit(ctx, inv); !ok {
			return resp, false, err
		}
	}

	start := e.cfg.now()
	inv.deadline = start.Add(e.cfg.timeout)
	select {
	case e.next <- inv:
	case <-e.exited:
		return invoke.Response{}, false, errGone
	case <-ctx.Done():
		return invoke.Response{}, true, fmt.Errorf("invoke: %w", ctx.Err())
	}
	timer := time.NewTimer(inv.deadline.Sub(e.cfg.now()))
	defer timer.Stop()

	resp = invoke.Response{StatusCode: http.StatusOK, ExecutedVersion: e.cfg.version, RequestID: inv.id}
	reusable = true
	var status string // what the REPORT line adds for an invocation that ended the environment
	select {
	case p := <-inv.result:
		switch {
		case p.tooLarge:
			resp.FunctionError = invoke.FunctionErrorUnhandled
			resp.Payload = invoke.ErrorDocument{ErrorType: "Function.ResponseSizeTooLarge",
				ErrorMessage: fmt.Sprintf("Response payload size exceeded maximum allowed payload size (%d bytes).", invoke.MaxPayloadBytes)}.Marshal()
		case p.failed:
			resp.FunctionError = invoke.FunctionErrorUnhandled
			resp.Payload = errorDocument(p, errorTypeUnknown)
		default:
			resp.Payload = p.body
		}
	case <-e.exited:
		resp.FunctionError = invoke.FunctionErrorUnhandled
		resp.Payload = e.exitDocument(inv.id)
		if e.sandbox.outOfMemory() {
			resp.Payload = invoke.ErrorDocument{ErrorType: errorTypeOutOfMemory,
				ErrorMessage: fmt.Sprintf("RequestId: %s Error: Runtime exited with error: %s", inv.id, e.state)}.Marshal()
			status = "\tStatus: error\tError Type: " + errorTypeOutOfMemory
		}
		reusable = false
	case <-timer.C:
		e.out.line(fmt.Sprintf("%s %s Task timed out after %.2f seconds", e.cfg.now().UTC().Format(time.RFC3339Nano), inv.id, e.cfg.timeout.Seconds()))
		resp = invoke.TimedOut(inv.id, e.cfg.timeout)
		resp.ExecutedVersion = e.cfg.version
		reusable = false
	case <-ctx.Done():
		e.kill()
		return invoke.Response{}, false, fmt.Errorf("invoke, request %s: %w", inv.id, ctx.Err())
	}
	took := e.cfg.now().Sub(start)
	maxRSS := e.maxMemoryMB()
	if !reusable {
		e.kill()
	}
	var initTook time.Duration
	if cold {
		initTook = e.initTook // written before initDone was closed
	}
	e.report(inv.id, took, initTook, maxRSS, status)
	return resp, reusable, nil
}

// awaitInit waits for a cold environment's init to end before its first invocation. ok is false
// when the invocation ends there: with resp (Lambda's init error, the environment killed) or with
// err (ctx ended first).
func (e *environment) awaitInit(ctx context.Context, inv *invocation) (resp invoke.Response, ok bool, err error) {
	initTimer := time.NewTimer(e.cfg.initTimeout)
	defer initTimer.Stop()
	select {
	case <-e.initDone:
		return invoke.Response{}, true, nil
	case p := <-e.initFailed:
		e.kill()
		return e.initError(inv, p), false, nil
	case <-e.exited:
		select { // it may have reported an init error before exiting
		case p := <-e.initFailed:
			return e.initError(inv, p), false, nil
		default:
		}
		return e.initError(inv, posted{failed: true, errorType: errorTypeExit, body: e.exitDocument(inv.id)}), false, nil
	case <-initTimer.C:
		e.kill()
		return e.initError(inv, posted{failed: true, errorType: errorTypeInit,
			body: invoke.ErrorDocument{ErrorType: errorTypeInit, ErrorMessage: fmt.Sprintf("RequestId: %s Error: init did not finish within %v", inv.id, e.cfg.initTimeout)}.Marshal()}), false, nil
	case <-ctx.Done():
		return invoke.Response{}, false, fmt.Errorf("invoke: waiting for init: %w", ctx.Err())
	}
}

// initError is the response to an invocation whose environment failed to init; the log has its
// START, END and REPORT lines with the init duration.
func (e *environment) initError(inv *invocation, p posted) invoke.Response {
	took := e.cfg.now().Sub(e.started)
	e.out.line(fmt.Sprintf("START RequestId: %s Version: %s", inv.id, e.cfg.version))
	typ := errorTypeInit
	if p.errorType != "" {
		typ = p.errorType
	}
	e.out.line(fmt.Sprintf("INIT_REPORT Init Duration: %s ms\tPhase: init\tStatus: error\tError Type: %s", ms(took), typ))
	e.report(inv.id, 0, took, e.maxMemoryMB(), "")
	return invoke.Response{StatusCode: http.StatusOK, ExecutedVersion: e.cfg.version, RequestID: inv.id,
		FunctionError: invoke.FunctionErrorUnhandled, Payload: errorDocument(p, errorTypeInit)}
}

// errorDocument is the payload of a failure the runtime posted: its own JSON document when it
// posted one (Lambda hands it on as it is), else a document of the given type holding the body.
func errorDocument(p posted, defaultType string) []byte {
	body := bytes.TrimSpace(p.body)
	if len(body) > 0 && body[0] == '{' && json.Valid(body) {
		var doc map[string]json.RawMessage
		if json.Unmarshal(body, &doc) == nil {
			if _, typed := doc["errorType"]; typed {
				return p.body
			}
			typ := defaultType
			if p.errorType != "" {
				typ = p.errorType
			}
			t, _ := json.Marshal(typ)
			doc["errorType"] = t
			if out, err := json.Marshal(doc); err == nil {
				return out
			}
		}
	}
	typ := defaultType
	if p.errorType != "" {
		typ = p.errorType
	}
	return invoke.ErrorDocument{ErrorType: typ, ErrorMessage: string(body)}.Marshal()
}

// exitDocument is Lambda's document for a runtime that exited during invocation id.
func (e *environment) exitDocument(id string) []byte {
	<-e.exited
	msg := fmt.Sprintf("RequestId: %s Error: Runtime exited without providing a reason", id)
	if !e.state.Success() {
		msg = fmt.Sprintf("RequestId: %s Error: Runtime exited with error: %s", id, e.state)
	}
	return invoke.ErrorDocument{ErrorType: errorTypeExit, ErrorMessage: msg}.Marshal()
}

// report writes the END and REPORT lines of an invocation, once what the function wrote before
// it answered has been forwarded (for up to 50 ms); initTook is the init's duration for the
// first invocation of an environment, 0 for a warm one; status ends the REPORT line (Lambda's
// "\tStatus: error\tError Type: …" for an environment that ran out of memory), or is empty.
func (e *environment) report(id string, took, initTook time.Duration, maxMB int, status string) {
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline) && !e.drained(); {
		time.Sleep(time.Millisecond)
	}
	e.out.line("END RequestId: " + id)
	billed := math.Ceil(float64(took) / float64(time.Millisecond))
	line := fmt.Sprintf("REPORT RequestId: %s\tDuration: %s ms\tBilled Duration: %d ms\tMemory Size: %d MB\tMax Memory Used: %d MB",
		id, ms(took), int64(billed), e.cfg.memoryMB, maxMB)
	if initTook > 0 {
		line += fmt.Sprintf("\tInit Duration: %s ms", ms(initTook))
	}
	e.out.line(line + status)
}

// ms renders a duration in milliseconds with two decimals, as the REPORT line does.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

// traceID is an X-Ray trace header for one invocation, not sampled.
func traceID(now time.Time) string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("Root=1-%08x-%s;Parent=%s;Sampled=0", now.Unix(), hex.EncodeToString(b[:12]), hex.EncodeToString(b[12:]))
}

// kill ends every process of the environment at once, as Lambda ends a sandbox: the process, its
// process group, and whatever it started that left them (see sandbox). It returns once they are
// gone.
func (e *environment) kill() {
	reaped := false
	select {
	case <-e.exited:
		reaped = true
	default:
	}
	e.sandbox.killAll(reaped)
}

// stop kills the process and waits for it, its log and its Runtime API to end.
func (e *environment) stop() {
	e.stopOnce.Do(func() {
		e.kill()
		<-e.exited
		// A process that escaped the sandbox may hold the output open: its log is cut after a
		// second.
		done := make(chan struct{})
		go func() { e.readers.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second):
			for _, o := range e.outputs {
				_ = o.f.Close()
			}
			<-done
		}
		e.sandbox.remove()
		_ = e.srv.Close()
	})
}

// output is one of the process's output streams as esm reads it.
type output struct {
	f *os.File
	// busy: the forwarder holds bytes it has not written yet.
	busy atomic.Bool
}

// drained reports whether everything the process wrote so far has been forwarded.
func (e *environment) drained() bool {
	for _, o := range e.outputs {
		if o.busy.Load() || unread(o.f) > 0 {
			return false
		}
	}
	return true
}

// forward copies one of the process's output streams to the log, line by line, each with the
// request ID of the invocation in flight (or of the latest one, for lines that come after it). A
// line longer than the buffer is written in pieces.
func (e *environment) forward(o *output) {
	defer e.readers.Done()
	defer o.f.Close()
	br := bufio.NewReaderSize(readerFunc(func(p []byte) (int, error) {
		n, err := o.f.Read(p)
		if n > 0 {
			o.busy.Store(true)
		}
		return n, err
	}), 64*1024)
	for {
		o.busy.Store(br.Buffered() > 0)
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			e.logLine(bytes.TrimSuffix(line, []byte("\n")))
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF), errors.Is(err, os.ErrClosed):
			o.busy.Store(false)
			return
		default:
			o.busy.Store(false)
			e.cfg.log.Debug("function output", "environment", e.name, "error", err)
			return
		}
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// logLine writes one line of the function's output: time, request ID, line.
func (e *environment) logLine(line []byte) {
	e.mu.Lock()
	id := e.lastID
	e.mu.Unlock()
	if id == "" {
		id = "-" // init
	}
	e.out.line(fmt.Sprintf("%s\t%s\t%s", e.cfg.now().UTC().Format("2006-01-02T15:04:05.000Z"), id, bytes.TrimRight(line, "\r")))
}

// lineWriter writes whole lines to w, one at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, s+"\n")
}
