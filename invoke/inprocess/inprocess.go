// Package inprocess invokes a Go handler in this process through aws-lambda-go, so the handler
// decodes exactly the JSON it would receive under Lambda and its response is encoded exactly as
// the Lambda runtime for Go would encode it. Its dependencies (aws-lambda-go, uuid) stay here.
package inprocess

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/invoke"
)

// DefaultOverrunWait is how long Invoke waits, after the function timeout, for a handler that is
// still running before it reports the timeout (see WithOverrunWait).
const DefaultOverrunWait = 2 * time.Second

// maxPanicFrames bounds the stack trace of a panic's error document, as the Go runtime does.
const maxPanicFrames = 32

// Invoker runs a Go handler in this process. Its Invoke is safe for concurrent use (as many
// invocations at once as callers; wrap it in invoke.Limit to cap them).
//
// A handler of the Kinesis signatures (func(context.Context, events.KinesisEvent)
// (events.KinesisEventResponse, error) and func(context.Context, events.KinesisEvent) error) is
// called directly, with the event decoded by a decoder for the JSON esm's poller writes, which
// gives the very struct aws-lambda-go's encoding/json decoding gives; any other payload, and
// every other signature, goes through lambda.NewHandler.
type Invoker struct {
	handlers    sync.Pool      // of lambda.Handler, each used by one invocation at a time (see call)
	fast        kinesisHandler // nil: not a Kinesis signature
	functionARN string
	timeout     time.Duration
	overrun     time.Duration
	log         *slog.Logger
	newID       func() string
}

// Option configures New. A nil Option is ignored.
type Option func(*Invoker)

// WithFunctionARN sets the ARN handed to the handler as lambdacontext InvokedFunctionArn
// (default invoke.DefaultFunctionARN).
func WithFunctionARN(arn string) Option {
	return func(p *Invoker) {
		if arn != "" {
			p.functionARN = arn
		}
	}
}

// WithTimeout sets the function timeout (default invoke.DefaultTimeout; zero or negative keeps
// it). The handler's context carries the deadline; a handler still running at the deadline is
// reported as Lambda reports a timeout.
func WithTimeout(d time.Duration) Option {
	return func(p *Invoker) {
		if d > 0 {
			p.timeout = d
		}
	}
}

// WithOverrunWait sets how long Invoke waits past the timeout for the handler to return (its
// context is cancelled at the deadline) before it reports the timeout (default
// DefaultOverrunWait; zero or negative keeps it). Lambda destroys the environment of a timed-out
// invocation, so its retry never overlaps it; a goroutine cannot be killed, so Invoke waits
// instead, and the retry starts only after the handler returned. A handler that ignores its
// context for longer than this is left running, with a warning: its retry may then overlap it.
// Run the binary under exec: (invoke/execenv) to get Lambda's kill.
func WithOverrunWait(d time.Duration) Option {
	return func(p *Invoker) {
		if d > 0 {
			p.overrun = d
		}
	}
}

// WithLogger sets the logger for handlers that overran their timeout (default, or nil: discard).
func WithLogger(l *slog.Logger) Option {
	return func(p *Invoker) {
		if l != nil {
			p.log = l
		}
	}
}

// New wraps handler, any function signature lambda.Start accepts, for example
// func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error). A handler of an
// invalid signature fails every invocation with a function error, as it would under Lambda.
func New(handler any, opts ...Option) *Invoker {
	p := &Invoker{
		fast:        kinesisHandlerOf(handler),
		functionARN: invoke.DefaultFunctionARN,
		timeout:     invoke.DefaultTimeout,
		overrun:     DefaultOverrunWait,
		log:         slog.New(slog.DiscardHandler),
		newID:       uuid.NewString,
	}
	p.handlers.New = func() any { return lambda.NewHandler(handler) }
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	return p
}

var _ invoke.Invoker = (*Invoker)(nil)

type handlerResult struct {
	payload  []byte
	err      error
	panic    any
	stack    []invoke.StackFrame
	panicked bool
}

// Invoke runs the handler once, with a lambdacontext (a fresh AwsRequestID, InvokedFunctionArn)
// and a context deadline of the function timeout. The outcome:
//
//   - the handler returned: Response with its payload, or with FunctionErrorUnhandled and the
//     error document the Go runtime would post (errorType is the error's type name);
//   - the handler panicked: FunctionErrorUnhandled, the panic value as errorMessage, its type as
//     errorType and the stack as stackTrace, as the Go runtime reports a panic;
//   - the timeout passed first: FunctionErrorUnhandled with errorType "Sandbox.Timedout" and
//     "RequestId: <id> Error: Task timed out after <t> seconds", once the handler returned (its
//     context is cancelled) or the overrun wait passed (see WithOverrunWait).
//
// The error is non-nil only when ctx ended before the handler succeeded: the outcome is then the
// caller's doing, not the function's, and the error wraps ctx's.
func (p *Invoker) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	return p.run(ctx, func(ctx context.Context) ([]byte, error) { return p.call(ctx, payload) })
}

// run is Invoke with call as the handler's invocation: it gets the invocation's context and
// returns the handler's encoded response.
func (p *Invoker) run(ctx context.Context, call func(context.Context) ([]byte, error)) (invoke.Response, error) {
	reqID := p.newID()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
		AwsRequestID:       reqID,
		InvokedFunctionArn: invoke.FunctionARN(parent, p.functionARN),
	})
	if th := invoke.TraceHeader(ctx); th != "" {
		// Where aws-lambda-go's runtime loop puts Lambda-Runtime-Trace-Id (a string key, its own).
		ctx = context.WithValue(ctx, "x-amzn-trace-id", th) //nolint:staticcheck // aws-lambda-go's key
	}

	// Buffered so that a handler that outlives the overrun wait can still hand its result over
	// and end.
	done := make(chan handlerResult, 1)
	go func() {
		var res handlerResult
		defer func() {
			if v := recover(); v != nil {
				res = handlerResult{panic: v, panicked: true, stack: panicStack(3)}
			}
			done <- res
		}()
		res.payload, res.err = call(ctx)
	}()

	select {
	case res := <-done:
		return p.finish(parent, reqID, res)
	case <-ctx.Done():
		select { // a handler that returned at the very deadline still counts
		case res := <-done:
			return p.finish(parent, reqID, res)
		default:
		}
	}
	// The handler is still running, with its context cancelled: wait for it (bounded), so that
	// the retry the caller may send next does not run alongside it.
	overran := time.NewTimer(p.overrun)
	defer overran.Stop()
	select {
	case <-done:
	case <-overran.C:
		p.log.Warn("in-process handler still running after its timeout; its retry may overlap it (exec: kills the environment instead)",
			"request_id", reqID, "timeout", p.timeout, "waited", p.overrun)
	}
	if err := parent.Err(); err != nil {
		return invoke.Response{}, fmt.Errorf("invoke in process, request %s: %w", reqID, err)
	}
	return invoke.TimedOut(reqID, p.timeout), nil
}

// call runs the handler: directly for a Kinesis handler given an event in esm's own encoding,
// through aws-lambda-go otherwise.
func (p *Invoker) call(ctx context.Context, payload []byte) ([]byte, error) {
	if p.fast != nil {
		if e, ok := decodeKinesisEvent(payload); ok {
			return p.fast(ctx, e)
		}
	}
	// A lambda.Handler returns the bytes of an output buffer it has already put back in its own
	// pool: the next invocation of the same Handler overwrites them, and one running alongside
	// may take the buffer before they are read. The Go runtime invokes one at a time and copies
	// the bytes onto the wire at once. esm runs many at a time, so each invocation borrows a
	// Handler of its own and copies the bytes before handing it back.
	h := p.handlers.Get().(lambda.Handler)
	out, err := h.Invoke(ctx, payload)
	out = bytes.Clone(out)
	p.handlers.Put(h)
	return out, err
}

// finish turns the handler's result into Invoke's. A failure once the caller's ctx has ended is
// the caller's doing (the handler saw its context cancelled), not a function error to count: it
// is returned as ctx's error. A success stands.
func (p *Invoker) finish(parent context.Context, reqID string, res handlerResult) (invoke.Response, error) {
	r := response(reqID, res)
	if err := parent.Err(); err != nil && r.Failed() {
		return invoke.Response{}, fmt.Errorf("invoke in process, request %s: %w", reqID, err)
	}
	return r, nil
}

// response turns what the handler did into the Response Lambda's Invoke API would give.
func response(reqID string, res handlerResult) invoke.Response {
	r := invoke.Response{StatusCode: 200, ExecutedVersion: invoke.ExecutedVersionLatest, RequestID: reqID}
	switch {
	case res.panicked:
		r.FunctionError = invoke.FunctionErrorUnhandled
		if ive, ok := res.panic.(messages.InvokeResponse_Error); ok {
			r.Payload = invoke.ErrorDocument{ErrorMessage: ive.Message, ErrorType: ive.Type}.Marshal()
			break
		}
		r.Payload = invoke.ErrorDocument{
			ErrorMessage: fmt.Sprintf("%v", res.panic),
			ErrorType:    typeName(res.panic),
			StackTrace:   res.stack,
		}.Marshal()
	case res.err != nil:
		r.FunctionError = invoke.FunctionErrorUnhandled
		if ive, ok := res.err.(messages.InvokeResponse_Error); ok {
			r.Payload = invoke.ErrorDocument{ErrorMessage: ive.Message, ErrorType: ive.Type}.Marshal()
			break
		}
		r.Payload = invoke.ErrorDocument{ErrorMessage: res.err.Error(), ErrorType: typeName(res.err)}.Marshal()
	default:
		r.Payload = res.payload
	}
	return r
}

// typeName names a value's type the way the Go runtime for Lambda does in errorType: the type's
// name, through one pointer.
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return "nil"
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// panicStack is the stack of a panicking goroutine as the Go runtime for Lambda reports it,
// called from the deferred recover; skip drops runtime.Callers, panicStack and the deferred
// function.
func panicStack(skip int) []invoke.StackFrame {
	pcs := make([]uintptr, maxPanicFrames)
	n := runtime.Callers(skip, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	out := make([]invoke.StackFrame, 0, n)
	for {
		f, more := frames.Next()
		out = append(out, stackFrame(f.Function, f.File, f.Line))
		if !more {
			return out
		}
	}
}

// stackFrame shortens a frame as the Go runtime for Lambda does: the label drops the package
// path ("github.com/x/y/pkg.(*T).M" → "(*T).M"), the path keeps only the part of the file path
// that the package path names ("/home/u/go/src/github.com/x/y/pkg/f.go" → "github.com/x/y/pkg/f.go").
func stackFrame(function, file string, line int) invoke.StackFrame {
	label := function
	keep := strings.Count(function, "/") + 2 // the package path's elements, and the file
	if i := strings.LastIndex(label, "/"); i >= 0 {
		label = label[i+1:]
	}
	if i := strings.Index(label, "."); i >= 0 {
		label = label[i+1:]
	}
	path := file
	cut := len(path)
	for i := 0; i < keep; i++ {
		j := strings.LastIndex(path[:cut], "/")
		if j < 0 {
			cut = -1
			break
		}
		cut = j
	}
	if cut >= 0 {
		path = path[cut+1:]
	}
	return invoke.StackFrame{Path: path, Line: int32(line), Label: label}
}
