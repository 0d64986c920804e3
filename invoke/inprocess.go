package invoke

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/google/uuid"
)

// DefaultTimeout is the function timeout when none is configured: SAM's default of 3 s.
const DefaultTimeout = 3 * time.Second

// DefaultFunctionARN is the InvokedFunctionArn an in-process handler sees when WithFunctionARN is
// not given: function "function" (the name aws-lambda-rie answers to) in the local emulators'
// region and account.
const DefaultFunctionARN = "arn:aws:lambda:us-east-1:000000000000:function:function"

// maxPanicFrames bounds the stack trace of a panic's error document, as the Go runtime does.
const maxPanicFrames = 32

// InProcess invokes a Go handler in this process through aws-lambda-go's lambda.NewHandler, so
// the handler decodes exactly the JSON bytes it would receive under Lambda and its response is
// encoded exactly as the Lambda runtime would encode it. Its Invoke is safe for concurrent use
// (as many invocations at once as callers; wrap it in Limit to cap them).
type InProcess struct {
	h           lambda.Handler
	functionARN string
	timeout     time.Duration
	newID       func() string
}

// InProcessOption configures NewInProcess.
type InProcessOption func(*InProcess)

// WithFunctionARN sets the ARN handed to the handler as lambdacontext InvokedFunctionArn
// (default DefaultFunctionARN).
func WithFunctionARN(arn string) InProcessOption {
	return func(p *InProcess) {
		if arn != "" {
			p.functionARN = arn
		}
	}
}

// WithTimeout sets the function timeout (default DefaultTimeout; zero or negative keeps it). The
// handler's context carries the deadline; a handler still running at the deadline is reported as
// Lambda reports a timeout.
func WithTimeout(d time.Duration) InProcessOption {
	return func(p *InProcess) {
		if d > 0 {
			p.timeout = d
		}
	}
}

// NewInProcess wraps handler, any function signature lambda.Start accepts, for example
// func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error). A handler of an
// invalid signature fails every invocation with a function error, as it would under Lambda.
func NewInProcess(handler any, opts ...InProcessOption) *InProcess {
	p := &InProcess{h: lambda.NewHandler(handler), functionARN: DefaultFunctionARN, timeout: DefaultTimeout, newID: uuid.NewString}
	for _, o := range opts {
		o(p)
	}
	return p
}

type handlerResult struct {
	payload  []byte
	err      error
	panic    any
	stack    []StackFrame
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
//     "RequestId: <id> Error: Task timed out after <t> seconds". Lambda would stop the sandbox;
//     here the handler's goroutine is left to finish on its own (its context is cancelled).
//
// The error is non-nil only when ctx ended before the handler succeeded: the outcome is then the
// caller's doing, not the function's, and the error wraps ctx's.
func (p *InProcess) Invoke(ctx context.Context, payload []byte) (Response, error) {
	reqID := p.newID()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
		AwsRequestID:       reqID,
		InvokedFunctionArn: p.functionARN,
	})

	// Buffered so that a handler that outlives the timeout can still hand its result over and end.
	done := make(chan handlerResult, 1)
	go func() {
		var res handlerResult
		defer func() {
			if v := recover(); v != nil {
				res = handlerResult{panic: v, panicked: true, stack: panicStack(3)}
			}
			done <- res
		}()
		res.payload, res.err = p.h.Invoke(ctx, payload)
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
		if err := parent.Err(); err != nil {
			return Response{}, fmt.Errorf("invoke in process, request %s: %w", reqID, err)
		}
		return timedOut(reqID, p.timeout), nil
	}
}

// finish turns the handler's result into Invoke's. A failure once the caller's ctx has ended is
// the caller's doing (the handler saw its context cancelled), not a function error to count: it
// is returned as ctx's error. A success stands.
func (p *InProcess) finish(parent context.Context, reqID string, res handlerResult) (Response, error) {
	r := p.response(reqID, res)
	if err := parent.Err(); err != nil && r.Failed() {
		return Response{}, fmt.Errorf("invoke in process, request %s: %w", reqID, err)
	}
	return r, nil
}

// timedOut is Lambda's response to an invocation that passed the function timeout.
func timedOut(reqID string, timeout time.Duration) Response {
	doc := ErrorDocument{
		ErrorType:    "Sandbox.Timedout",
		ErrorMessage: fmt.Sprintf("RequestId: %s Error: Task timed out after %.2f seconds", reqID, timeout.Seconds()),
	}
	return Response{StatusCode: 200, ExecutedVersion: ExecutedVersionLatest, FunctionError: FunctionErrorUnhandled, Payload: doc.Marshal(), RequestID: reqID}
}

// response turns what the handler did into the Response Lambda's Invoke API would give.
func (p *InProcess) response(reqID string, res handlerResult) Response {
	r := Response{StatusCode: 200, ExecutedVersion: ExecutedVersionLatest, RequestID: reqID}
	switch {
	case res.panicked:
		r.FunctionError = FunctionErrorUnhandled
		if ive, ok := res.panic.(messages.InvokeResponse_Error); ok {
			r.Payload = ErrorDocument{ErrorMessage: ive.Message, ErrorType: ive.Type}.Marshal()
			break
		}
		r.Payload = ErrorDocument{
			ErrorMessage: fmt.Sprintf("%v", res.panic),
			ErrorType:    typeName(res.panic),
			StackTrace:   res.stack,
		}.Marshal()
	case res.err != nil:
		r.FunctionError = FunctionErrorUnhandled
		if ive, ok := res.err.(messages.InvokeResponse_Error); ok {
			r.Payload = ErrorDocument{ErrorMessage: ive.Message, ErrorType: ive.Type}.Marshal()
			break
		}
		r.Payload = ErrorDocument{ErrorMessage: res.err.Error(), ErrorType: typeName(res.err)}.Marshal()
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
func panicStack(skip int) []StackFrame {
	pcs := make([]uintptr, maxPanicFrames)
	n := runtime.Callers(skip, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	out := make([]StackFrame, 0, n)
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
func stackFrame(function, file string, line int) StackFrame {
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
	return StackFrame{Path: path, Line: int32(line), Label: label}
}
