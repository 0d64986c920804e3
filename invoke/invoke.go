// Package invoke turns a batch (an already-marshalled event) into one invocation of the user's
// function and classifies the outcome exactly once:
//
//   - success: the function ran and returned; Response.Payload holds what it returned;
//   - function error: the function ran and failed (returned an error, panicked, timed out);
//     Response.FunctionError is "Unhandled" and Response.Payload holds Lambda's error document;
//   - not invoked: the function could not be reached (throttled, unavailable, misconfigured);
//     Invoke returns a non-nil error wrapping ErrThrottled or ErrUnavailable;
//   - unknown: the request was written and no answer came (a reset, an EOF, a timeout waiting
//     for it); the function may have run and may still run. Invoke returns an error wrapping
//     ErrAmbiguous, and the caller must not send the batch again before the invocation bound.
//
// Lambda counts function errors toward MaximumRetryAttempts and does not count the third kind;
// keeping the three apart at this boundary is what lets the poller apply Lambda's rules.
//
// Each transport lives in a package of its own, with its dependencies:
//
//   - invoke/inprocess: a Go handler in this process, through aws-lambda-go's lambda.NewHandler;
//   - invoke/httpinvoke: Lambda-Invoke-compatible HTTP endpoints, such as aws-lambda-rie running
//     an unmodified bootstrap, one invocation in flight per endpoint (go-retryablehttp);
//   - invoke/lambdaapi: the real Lambda Invoke API through aws-sdk-go-v2;
//   - invoke/execenv: unmodified function binaries run by esm itself in execution environments
//     that speak the Lambda Runtime API, with Lambda's lifecycle.
//
// invoke/target picks and builds one of them from a target, as "esm run --invoke" and "esm serve
// --function" take it: exec:PATH [ARGS], http(s) URLs, lambda:NAME_OR_ARN, or a Go handler in
// this process (target.Open). [Limit] caps how many invocations run at once across shards, as
// reserved concurrency does.
//
// This package declares what they share (Invoker, Response, the errors, the context values, the
// defaults) and depends on the standard library only: the transports import it, and a package
// that needs only these definitions (the poller) links no transport.
package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DefaultTimeout is the function timeout when none is configured: SAM's default of 3 s.
const DefaultTimeout = 3 * time.Second

// DefaultFunctionName is the function's name when none is configured: "function", the one name
// aws-lambda-rie answers to.
const DefaultFunctionName = "function"

// DefaultFunctionARN is the InvokedFunctionArn a function sees when none is configured: function
// "function" (the name aws-lambda-rie answers to) in the local emulators' region and account,
// arn:aws:lambda:us-east-1:000000000000:function:function.
const DefaultFunctionARN = "arn:aws:lambda:us-east-1:000000000000:function:function"

// Invoker runs the function once with an event payload. It is the interface the poller consumes
// (poller.Invoker has the same method set); every invoker in this package and its subpackages
// implements it:
//
//	Invoke(ctx context.Context, payload []byte) (Response, error)
//
// A nil error means the function was reached: Response.FunctionError tells a success from a
// function error. A non-nil error means it was not reached, or may have been without an answer:
// it wraps ErrThrottled, ErrUnavailable or ErrAmbiguous, or it is the caller's ctx error when ctx
// ended first (then it may still run too).
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) (Response, error)
}

// InvokerFunc adapts a function to Invoker: InvokerFunc(f).Invoke calls f.
type InvokerFunc func(ctx context.Context, payload []byte) (Response, error)

// Invoke calls f.
func (f InvokerFunc) Invoke(ctx context.Context, payload []byte) (Response, error) {
	return f(ctx, payload)
}

var _ Invoker = InvokerFunc(nil)

// MaxPayloadBytes is Lambda's limit for a synchronous invocation's request and its response:
// 6 MB (6,291,456 bytes).
const MaxPayloadBytes = 6 * 1024 * 1024

// ExecutedVersionLatest is the version Lambda reports for an unqualified invocation.
const ExecutedVersionLatest = "$LATEST"

// ErrThrottled is wrapped by Invoke errors when the function was not invoked because of a
// concurrency limit (Lambda's 429 TooManyRequestsException). Retried, never counted.
var ErrThrottled = errors.New("invoke throttled")

// ErrUnavailable is wrapped by Invoke errors when the function could not be reached at all:
// transport failures, 5xx from the invoke endpoint, missing function. Retried, never counted.
var ErrUnavailable = errors.New("function unavailable")

// ErrAmbiguous is wrapped by Invoke errors when the request was written (all of it) and then the
// answer did not come: a connection reset, an EOF, a timeout waiting for the answer. The function
// may have run, and may still be running: Lambda and aws-lambda-rie run an invocation to its end
// whatever happens to the client's connection. It is not safe to send the same batch again until
// the invocation bound has passed (the poller waits; the invokers never retry it themselves).
// Errors before the request was written (a refused or failed dial, DNS, a TLS handshake) wrap
// ErrUnavailable instead: the function was not reached. See ClassifyTransport.
var ErrAmbiguous = errors.New("invocation outcome unknown: the request was sent and no answer came, so the function may have run and may still run")

// FunctionErrorUnhandled is the value Lambda puts in X-Amz-Function-Error (and in the on-failure
// record's responseContext.functionError) when the function threw, crashed or timed out.
const FunctionErrorUnhandled = "Unhandled"

// Response is the outcome of an invocation that reached the function:
//
//   - StatusCode is the HTTP status Lambda's Invoke API would have answered: 200 for anything the
//     function itself returned, function errors included;
//   - ExecutedVersion is the function version that ran ("$LATEST" unless an alias or version
//     was invoked);
//   - FunctionError is "" on success and FunctionErrorUnhandled when the function failed
//     (Failed reports it);
//   - Payload is the function's JSON response, or Lambda's error document when FunctionError is
//     set;
//   - RequestID is the invocation's request ID (the handler's lambdacontext AwsRequestID, the
//     requestContext.requestId of an on-failure record); empty when the endpoint reported none.
type Response struct {
	// StatusCode is the HTTP status Lambda's Invoke API would have answered: 200 for anything the
	// function itself returned, function errors included.
	StatusCode int
	// ExecutedVersion is the function version that ran ("$LATEST" unless an alias or version was
	// invoked).
	ExecutedVersion string
	// FunctionError is "" on success and FunctionErrorUnhandled when the function failed.
	FunctionError string
	// Payload is the function's JSON response, or Lambda's error document when FunctionError is set.
	Payload []byte
	// RequestID is the invocation's request ID (the handler's lambdacontext AwsRequestID, the
	// requestContext.requestId of an on-failure record). Empty when the endpoint reported none.
	RequestID string
}

// Failed reports whether the function ran and failed.
func (r Response) Failed() bool { return r.FunctionError != "" }

// ErrorDocument is the JSON body Lambda returns for a function error of a Go function: what the
// Go runtime (aws-lambda-go) posts when the handler returns an error or panics, or what Lambda
// writes itself for a timeout ("Sandbox.Timedout"): errorMessage, errorType and, for a panic,
// stackTrace. Other runtimes put other shapes in stackTrace (Python and Node.js: strings);
// invokers hand such payloads on unchanged. Its Marshal renders it as Lambda does.
type ErrorDocument struct {
	ErrorMessage string       `json:"errorMessage"`
	ErrorType    string       `json:"errorType"`
	StackTrace   []StackFrame `json:"stackTrace,omitempty"`
}

// StackFrame is one frame of a Go panic's stack trace in an ErrorDocument, as aws-lambda-go
// reports it: Path is the file relative to its module path, Label the function without its
// package path.
type StackFrame struct {
	Path  string `json:"path"`
	Line  int32  `json:"line"`
	Label string `json:"label"`
}

// Marshal renders the document as Lambda does.
func (d ErrorDocument) Marshal() []byte {
	b, err := json.Marshal(d)
	if err != nil { // only strings: cannot happen
		return []byte(`{"errorMessage":"error document","errorType":"Runtime.MarshalError"}`)
	}
	return b
}

// TimedOut is Lambda's response to invocation reqID that passed the function timeout: a function
// error with the Sandbox.Timedout document Lambda writes itself ("RequestId: <id> Error: Task
// timed out after 3.00 seconds").
func TimedOut(reqID string, timeout time.Duration) Response {
	return TimedOutAfter(reqID, fmt.Sprintf("%.2f", timeout.Seconds()))
}

// TimedOutAfter is TimedOut with the seconds already rendered, as an endpoint reported them.
func TimedOutAfter(reqID, seconds string) Response {
	doc := ErrorDocument{
		ErrorType:    "Sandbox.Timedout",
		ErrorMessage: fmt.Sprintf("RequestId: %s Error: Task timed out after %s seconds", reqID, seconds),
	}
	return Response{StatusCode: 200, ExecutedVersion: ExecutedVersionLatest, FunctionError: FunctionErrorUnhandled,
		Payload: doc.Marshal(), RequestID: reqID}
}

// ErrNotStarted is wrapped (with ErrUnavailable) by Invoke errors when the invocation was not
// sent because the context's start check (WithStartCheck) said no.
var ErrNotStarted = errors.New("invocation not started: the caller may no longer start it")

type startCheckKey struct{}

// WithStartCheck returns a context under which an invocation may be sent only while ok says so.
// An invoker asks it (through CheckStart) just before each send that may come later than the
// call: after waiting for a concurrency slot, an endpoint or an execution environment, and
// before a retry of its own. The poller gives the lease's Held: an invocation sent after the
// worker's lease may have ended could outlast the wait of the worker that takes it over.
func WithStartCheck(ctx context.Context, ok func() bool) context.Context {
	return context.WithValue(ctx, startCheckKey{}, ok)
}

// CheckStart returns nil when ctx has no start check or its check says yes, and otherwise an
// error wrapping ErrUnavailable and ErrNotStarted: not invoked, retried without counting.
func CheckStart(ctx context.Context) error {
	if ok, _ := ctx.Value(startCheckKey{}).(func() bool); ok != nil && !ok() {
		return fmt.Errorf("%w: %w", ErrUnavailable, ErrNotStarted)
	}
	return nil
}

// HasStartCheck reports whether ctx carries a start check: an invoker whose client retries on
// its own (the Lambda SDK's retryer) then leaves the retries to the caller.
func HasStartCheck(ctx context.Context) bool {
	ok, _ := ctx.Value(startCheckKey{}).(func() bool)
	return ok != nil
}

// HeaderTraceID is the HTTP header in which Lambda's Invoke API takes the invocation's X-Ray
// trace header (Root=1-…;Parent=…;Sampled=…); the Runtime API hands the same value to the
// function as Lambda-Runtime-Trace-Id.
const HeaderTraceID = "X-Amzn-Trace-Id"

type traceHeaderKey struct{}

// WithTraceHeader returns ctx carrying h, the X-Ray trace header (the X-Amzn-Trace-Id value) that
// an invocation made with ctx passes to the function: the HTTP invoker sends it as X-Amzn-Trace-Id,
// execution environments hand it over as Lambda-Runtime-Trace-Id, the in-process invoker puts it
// where aws-lambda-go puts it. Without one each invoker makes its own, not sampled, as before.
func WithTraceHeader(ctx context.Context, h string) context.Context {
	return context.WithValue(ctx, traceHeaderKey{}, h)
}

// TraceHeader is the trace header ctx carries (WithTraceHeader), or "".
func TraceHeader(ctx context.Context) string {
	h, _ := ctx.Value(traceHeaderKey{}).(string)
	return h
}

type functionARNKey struct{}

// WithFunctionARN returns ctx carrying arn, the ARN the function is invoked as: its
// InvokedFunctionArn. An in-process handler finds it in its lambdacontext, an exec: function in
// Lambda-Runtime-Invoked-Function-Arn, each instead of the ARN the invoker was opened with
// (target.WithFunction). The poller gives every invocation its mapping's function ARN, so that
// what a mapping reports as its FunctionArn is what its function is invoked as. An HTTP endpoint
// and a lambda: function know their own.
func WithFunctionARN(ctx context.Context, arn string) context.Context {
	return context.WithValue(ctx, functionARNKey{}, arn)
}

// FunctionARN is the function ARN ctx carries (WithFunctionARN), or fallback.
func FunctionARN(ctx context.Context, fallback string) string {
	if arn, _ := ctx.Value(functionARNKey{}).(string); arn != "" {
		return arn
	}
	return fallback
}
