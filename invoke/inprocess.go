package invoke

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/google/uuid"
)

// DefaultTimeout is the function timeout when none is configured: SAM's default of 3 s.
const DefaultTimeout = 3 * time.Second

// InProcess invokes a Go handler in this process through aws-lambda-go's lambda.NewHandler, so
// the handler decodes exactly the JSON bytes it would receive under Lambda and its response is
// encoded exactly as the Lambda runtime would encode it.
type InProcess struct {
	h           lambda.Handler
	functionARN string
	timeout     time.Duration
}

// InProcessOption configures NewInProcess.
type InProcessOption func(*InProcess)

// WithFunctionARN sets the ARN handed to the handler as lambdacontext InvokedFunctionArn.
func WithFunctionARN(arn string) InProcessOption { return func(p *InProcess) { p.functionARN = arn } }

// WithTimeout sets the function timeout (default DefaultTimeout). The handler's context carries the
// deadline; a handler still running at the deadline is reported as Lambda reports a timeout.
func WithTimeout(d time.Duration) InProcessOption {
	return func(p *InProcess) {
		if d > 0 {
			p.timeout = d
		}
	}
}

// NewInProcess wraps handler, any function signature lambda.Start accepts, for example
// func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error).
func NewInProcess(handler any, opts ...InProcessOption) *InProcess {
	p := &InProcess{h: lambda.NewHandler(handler), timeout: DefaultTimeout}
	for _, o := range opts {
		o(p)
	}
	return p
}

type handlerResult struct {
	payload []byte
	err     error
	panic   any
	stack   []byte
}

// Invoke runs the handler once. It never returns a non-nil error: an in-process function is always
// reachable. A handler that is still running when the timeout passes is abandoned (its context is
// cancelled) and the invocation is reported as timed out; its goroutine ends when the handler
// returns.
func (p *InProcess) Invoke(ctx context.Context, payload []byte) (Response, error) {
	reqID := uuid.NewString()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
		AwsRequestID:       reqID,
		InvokedFunctionArn: p.functionARN,
	})

	done := make(chan handlerResult, 1)
	go func() {
		var res handlerResult
		defer func() {
			if v := recover(); v != nil {
				res = handlerResult{panic: v, stack: debug.Stack()}
			}
			done <- res
		}()
		res.payload, res.err = p.h.Invoke(ctx, payload)
	}()

	select {
	case res := <-done:
		return p.classify(res), nil
	case <-ctx.Done():
		select { // a handler that returned at the very deadline still counts
		case res := <-done:
			return p.classify(res), nil
		default:
		}
		doc := ErrorDocument{
			ErrorType:    "Sandbox.Timedout",
			ErrorMessage: fmt.Sprintf("RequestId: %s Error: Task timed out after %.2f seconds", reqID, p.timeout.Seconds()),
		}
		return Response{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: FunctionErrorUnhandled, Payload: doc.Marshal()}, nil
	}
}

func (p *InProcess) classify(res handlerResult) Response {
	r := Response{StatusCode: 200, ExecutedVersion: "$LATEST"}
	switch {
	case res.panic != nil:
		r.FunctionError = FunctionErrorUnhandled
		r.Payload = ErrorDocument{
			ErrorMessage: fmt.Sprint(res.panic),
			ErrorType:    typeName(res.panic),
			StackTrace:   stackLines(res.stack),
		}.Marshal()
	case res.err != nil:
		r.FunctionError = FunctionErrorUnhandled
		r.Payload = ErrorDocument{ErrorMessage: res.err.Error(), ErrorType: typeName(res.err)}.Marshal()
	default:
		r.Payload = res.payload
	}
	return r
}

// typeName names a value's type the way the Go runtime for Lambda does in errorType.
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

func stackLines(stack []byte) []string {
	lines := strings.Split(strings.TrimSpace(string(stack)), "\n")
	out := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
