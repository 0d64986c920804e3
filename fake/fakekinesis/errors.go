package fakekinesis

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// fakeRequestID is the request id carried by every error the fake returns.
const fakeRequestID = "fakekinesis-request"

// ErrThrottled returns a *types.ProvisionedThroughputExceededException, the
// error Kinesis returns when a shard's read limits are exceeded. Return it
// from an Inject callback; the fake wraps it as the SDK would (HTTP 400).
func ErrThrottled() error {
	return &types.ProvisionedThroughputExceededException{
		Message: aws.String("Rate exceeded for shard in stream under account."),
	}
}

// ErrExpired returns a *types.ExpiredIteratorException, as for an iterator
// older than the iterator TTL. Return it from an Inject callback.
func ErrExpired() error {
	return &types.ExpiredIteratorException{Message: aws.String("Iterator expired.")}
}

// ErrInternal returns the error the SDK produces for an HTTP 500 that Kinesis
// does not model for the read calls: a *smithy.GenericAPIError with code
// "InternalFailure" and fault smithy.FaultServer. Returned from an Inject
// callback it reaches the caller inside an *awshttp.ResponseError whose
// HTTPStatusCode is 500.
func ErrInternal() error {
	return &smithy.GenericAPIError{
		Code:    "InternalFailure",
		Message: "Internal service failure.",
		Fault:   smithy.FaultServer,
	}
}

// wrapSDK puts err in the envelope the SDK puts around every operation
// error: OperationError, then (for service errors) ResponseError with the
// HTTP status. An error already in an OperationError is returned unchanged.
func wrapSDK(op string, err error) error {
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		return err
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		status := http.StatusBadRequest
		if ae.ErrorFault() == smithy.FaultServer {
			status = http.StatusInternalServerError
		}
		err = &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}},
				Err:      err,
			},
			RequestID: fakeRequestID,
		}
	}
	return &smithy.OperationError{ServiceID: "Kinesis", OperationName: op, Err: err}
}

func invalidArg(format string, args ...any) error {
	return &types.InvalidArgumentException{Message: aws.String(fmt.Sprintf(format, args...))}
}

func (f *Fake) streamNotFound(name string) error {
	return &types.ResourceNotFoundException{
		Message: aws.String(fmt.Sprintf("Stream %s under account %s not found.", name, f.cfg.account)),
	}
}

func (f *Fake) shardNotFound(shardID, stream string) error {
	return &types.ResourceNotFoundException{
		Message: aws.String(fmt.Sprintf("Shard %s in stream %s under account %s does not exist",
			shardID, stream, f.cfg.account)),
	}
}
