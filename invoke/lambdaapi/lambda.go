package lambdaapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/kinesis-esm/esm/invoke"
)

// Client is the part of the Lambda client (*lambda.Client of aws-sdk-go-v2's service/lambda)
// that Lambda invokes through.
type Client interface {
	Invoke(ctx context.Context, in *awslambda.InvokeInput, optFns ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error)
}

var _ Client = (*awslambda.Client)(nil)

// Lambda invokes a function through the real Lambda Invoke API, synchronously (RequestResponse),
// as the event source mapping does. Its Invoke is safe for concurrent use; concurrency is Lambda's
// to limit (reserved concurrency answers with throttles).
//
// The client's own retryer runs first (the SDK retries throttles, 5xx and errors before the
// request was written, by default), every attempt under the start check; what is left is
// classified once by classifyLambda, a transport failure by invoke's SendTrace.
type Invoker struct {
	client   Client
	function string
}

// New returns an invoker of function (a name, a name with ":alias" or ":version", or an
// ARN) through client.
func New(client Client, function string) *Invoker {
	return &Invoker{client: client, function: function}
}

// Invoke calls the Invoke API once. A nil error means the function ran: FunctionError is
// invoke.FunctionErrorUnhandled when Lambda reported a function error, and StatusCode, ExecutedVersion
// and the request ID are Lambda's. TooManyRequestsException (429) wraps invoke.ErrThrottled; a
// transport error after the request was written (a reset, an EOF, a timeout waiting for the
// answer) wraps invoke.ErrAmbiguous, since Lambda runs the invocation to its end whatever happens
// to the connection; every other error (ResourceNotFoundException, a KMS or ENI error, 5xx, a
// transport error before the request was written) wraps invoke.ErrUnavailable, as Lambda counts
// none of them as an invocation; ctx's own end is returned wrapped as it is.
//
// The client's own retries stay its owner's choice, with two rules (sendGuard): every attempt asks
// ctx's start check just before it is sent (after signing, so after a credential refresh and the
// retryer's back-off), and an attempt whose request was written is never sent again without an
// answer.
func (l *Invoker) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	tctx, st := invoke.TraceSend(ctx)
	out, err := l.client.Invoke(tctx, &awslambda.InvokeInput{
		FunctionName:   aws.String(l.function),
		InvocationType: types.InvocationTypeRequestResponse,
		Payload:        payload,
	}, func(o *awslambda.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Finalize.Add(sendGuard{st}, middleware.After)
		})
	})
	return classifyLambda(l.function, out, err, ctx.Err())
}

// sendGuard is the last Finalize middleware of an Invoke call, so it runs for each attempt of the
// SDK's retry loop, after signing, just before the request goes to the transport.
type sendGuard struct{ st *invoke.SendTrace }

func (sendGuard) ID() string { return "esm.SendGuard" }

// HandleFinalize asks the start check, then sends the attempt; a failure without an answer is
// classified once (SendTrace.Failed), and one after the request was written is made final.
func (g sendGuard) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if err := invoke.CheckStart(ctx); err != nil {
		return middleware.FinalizeOutput{}, middleware.Metadata{}, final{err}
	}
	g.st.Attempt()
	out, md, err := next.HandleFinalize(ctx, in)
	// A send that failed comes back as a ResponseError too, with no status: no answer.
	var answered *smithyhttp.ResponseError
	if err == nil || (errors.As(err, &answered) && answered.HTTPStatusCode() != 0) || ctx.Err() != nil {
		return out, md, err
	}
	if err = g.st.Failed(err); errors.Is(err, invoke.ErrAmbiguous) {
		return out, md, final{err}
	}
	return out, md, err
}

// final is an error the SDK's retryer does not retry (aws/retry's RetryableError rule comes
// before its rules for connection errors).
type final struct{ error }

func (final) RetryableError() bool { return false }
func (e final) Unwrap() error      { return e.error }

// classifyLambda classifies the result of one Invoke API call; ctxErr is the caller's context
// error at the time the call returned.
func classifyLambda(function string, out *awslambda.InvokeOutput, err, ctxErr error) (invoke.Response, error) {
	if err != nil {
		if ctxErr != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return invoke.Response{}, fmt.Errorf("invoke %s: %w", function, ctxErr)
		}
		var (
			tooMany *types.TooManyRequestsException
			re      *awshttp.ResponseError
		)
		switch {
		case errors.Is(err, invoke.ErrAmbiguous) || errors.Is(err, invoke.ErrUnavailable):
			return invoke.Response{}, fmt.Errorf("invoke %s: %w", function, err) // classified by sendGuard
		case errors.As(err, &tooMany) || (errors.As(err, &re) && re.HTTPStatusCode() == http.StatusTooManyRequests):
			return invoke.Response{}, fmt.Errorf("%w: invoke %s: %w", invoke.ErrThrottled, function, err)
		}
		return invoke.Response{}, fmt.Errorf("%w: invoke %s: %w", invoke.ErrUnavailable, function, err)
	}
	if out == nil {
		return invoke.Response{}, fmt.Errorf("%w: invoke %s: no output", invoke.ErrUnavailable, function)
	}
	r := invoke.Response{
		StatusCode:      int(out.StatusCode),
		ExecutedVersion: aws.ToString(out.ExecutedVersion),
		Payload:         out.Payload,
	}
	if id, ok := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata); ok {
		r.RequestID = id
	}
	if aws.ToString(out.FunctionError) != "" {
		r.FunctionError = invoke.FunctionErrorUnhandled
	}
	return r, nil
}
