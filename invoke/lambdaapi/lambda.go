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

	invoke "github.com/kinesis-esm/esm/internal/invokeapi"
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
// The client's own retryer runs first (the SDK retries throttles and 5xx by default); what is left
// is classified once by classifyLambda.
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
// and the request ID are Lambda's. TooManyRequestsException (429) wraps invoke.ErrThrottled; every other
// error from Lambda (ResourceNotFoundException, a KMS or ENI error, 5xx, a transport error) wraps
// invoke.ErrUnavailable, as Lambda counts none of them as an invocation; ctx's own end is returned
// wrapped as it is.
func (l *Invoker) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	var opts []func(*awslambda.Options)
	if invoke.HasStartCheck(ctx) {
		// A retry of the SDK's own would be sent without asking the check: the caller retries.
		opts = append(opts, func(o *awslambda.Options) { o.RetryMaxAttempts = 1 })
	}
	out, err := l.client.Invoke(ctx, &awslambda.InvokeInput{
		FunctionName:   aws.String(l.function),
		InvocationType: types.InvocationTypeRequestResponse,
		Payload:        payload,
	}, opts...)
	return classifyLambda(l.function, out, err, ctx.Err())
}

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
		if errors.As(err, &tooMany) || (errors.As(err, &re) && re.HTTPStatusCode() == http.StatusTooManyRequests) {
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
