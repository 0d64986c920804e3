// Package invokeapi holds what package invoke shares with its transports (invoke/execenv,
// invoke/httpinvoke, invoke/inprocess, invoke/lambdaapi): the Invoker interface, Response, the
// errors that classify an outcome, the context values and the defaults. Package invoke re-exports
// every identifier of it (type aliases, the same constants and error values), and its doc comments
// there are the ones users read; the transports import this package under the name invoke, since
// each identifier is invoke's. It exists so that invoke can build the transports (invoke.Open)
// without an import cycle, and it depends on the standard library only: a package of this module
// that needs only these definitions (the poller needs Response) may import it under the name
// invoke too, and then links no transport, which importing invoke does.
package invokeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DefaultTimeout is invoke.DefaultTimeout (documented there).
const DefaultTimeout = 3 * time.Second

// DefaultFunctionName is invoke.DefaultFunctionName (documented there).
const DefaultFunctionName = "function"

// DefaultFunctionARN is invoke.DefaultFunctionARN (documented there).
const DefaultFunctionARN = "arn:aws:lambda:us-east-1:000000000000:function:function"

// Invoker is invoke.Invoker (documented there).
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) (Response, error)
}

// InvokerFunc is invoke.InvokerFunc (documented there).
type InvokerFunc func(ctx context.Context, payload []byte) (Response, error)

// Invoke calls f.
func (f InvokerFunc) Invoke(ctx context.Context, payload []byte) (Response, error) {
	return f(ctx, payload)
}

var _ Invoker = InvokerFunc(nil)

// MaxPayloadBytes is invoke.MaxPayloadBytes (documented there).
const MaxPayloadBytes = 6 * 1024 * 1024

// ExecutedVersionLatest is invoke.ExecutedVersionLatest (documented there).
const ExecutedVersionLatest = "$LATEST"

// ErrThrottled is invoke.ErrThrottled (documented there).
var ErrThrottled = errors.New("invoke throttled")

// ErrUnavailable is invoke.ErrUnavailable (documented there).
var ErrUnavailable = errors.New("function unavailable")

// ErrAmbiguous is invoke.ErrAmbiguous (documented there).
var ErrAmbiguous = errors.New("invocation outcome unknown: the request was sent and no answer came, so the function may have run and may still run")

// FunctionErrorUnhandled is invoke.FunctionErrorUnhandled (documented there).
const FunctionErrorUnhandled = "Unhandled"

// Response is invoke.Response (documented there).
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

// ErrorDocument is invoke.ErrorDocument (documented there).
type ErrorDocument struct {
	ErrorMessage string       `json:"errorMessage"`
	ErrorType    string       `json:"errorType"`
	StackTrace   []StackFrame `json:"stackTrace,omitempty"`
}

// StackFrame is invoke.StackFrame (documented there).
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

// TimedOut is invoke.TimedOut (documented there).
func TimedOut(reqID string, timeout time.Duration) Response {
	return TimedOutAfter(reqID, fmt.Sprintf("%.2f", timeout.Seconds()))
}

// TimedOutAfter is invoke.TimedOutAfter (documented there).
func TimedOutAfter(reqID, seconds string) Response {
	doc := ErrorDocument{
		ErrorType:    "Sandbox.Timedout",
		ErrorMessage: fmt.Sprintf("RequestId: %s Error: Task timed out after %s seconds", reqID, seconds),
	}
	return Response{StatusCode: 200, ExecutedVersion: ExecutedVersionLatest, FunctionError: FunctionErrorUnhandled,
		Payload: doc.Marshal(), RequestID: reqID}
}

// ErrNotStarted is invoke.ErrNotStarted (documented there).
var ErrNotStarted = errors.New("invocation not started: the caller may no longer start it")

type startCheckKey struct{}

// WithStartCheck is invoke.WithStartCheck (documented there).
func WithStartCheck(ctx context.Context, ok func() bool) context.Context {
	return context.WithValue(ctx, startCheckKey{}, ok)
}

// CheckStart is invoke.CheckStart (documented there).
func CheckStart(ctx context.Context) error {
	if ok, _ := ctx.Value(startCheckKey{}).(func() bool); ok != nil && !ok() {
		return fmt.Errorf("%w: %w", ErrUnavailable, ErrNotStarted)
	}
	return nil
}

// HasStartCheck is invoke.HasStartCheck (documented there).
func HasStartCheck(ctx context.Context) bool {
	ok, _ := ctx.Value(startCheckKey{}).(func() bool)
	return ok != nil
}

// HeaderTraceID is invoke.HeaderTraceID (documented there).
const HeaderTraceID = "X-Amzn-Trace-Id"

type traceHeaderKey struct{}

// WithTraceHeader is invoke.WithTraceHeader (documented there).
func WithTraceHeader(ctx context.Context, h string) context.Context {
	return context.WithValue(ctx, traceHeaderKey{}, h)
}

// TraceHeader is invoke.TraceHeader (documented there).
func TraceHeader(ctx context.Context) string {
	h, _ := ctx.Value(traceHeaderKey{}).(string)
	return h
}
