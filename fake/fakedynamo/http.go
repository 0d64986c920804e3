package fakedynamo

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/aws/smithy-go"
)

// maxRequestBody bounds a request body (DynamoDB's own limit is 16 MB).
const maxRequestBody = 16 << 20

// Target prefixes of the two APIs Handler serves.
const (
	targetDynamoDB = "DynamoDB_20120810."
	targetStreams  = "DynamoDBStreams_20120810."
)

// call runs one operation from its JSON request body.
type call func(ctx context.Context, body []byte) (any, error)

// op adapts a method of the DB (an SDK client's signature) to a call.
func op[I, O, P any](method func(context.Context, *I, ...P) (*O, error)) call {
	return func(ctx context.Context, body []byte) (any, error) {
		in, err := decodeWire[I](body)
		var api smithy.APIError
		if errors.As(err, &api) {
			return nil, err // a value DynamoDB refuses (a ValidationException)
		}
		if err != nil {
			return nil, &smithy.GenericAPIError{Code: "SerializationException", Message: err.Error(), Fault: smithy.FaultClient}
		}
		return method(ctx, in)
	}
}

// calls maps each X-Amz-Target to its operation.
func (d *DB) calls() map[string]call {
	return map[string]call{
		targetDynamoDB + "CreateTable":        op(d.CreateTable),
		targetDynamoDB + "DescribeTable":      op(d.DescribeTable),
		targetDynamoDB + "UpdateTable":        op(d.UpdateTable),
		targetDynamoDB + "DeleteTable":        op(d.DeleteTable),
		targetDynamoDB + "ListTables":         op(d.ListTables),
		targetDynamoDB + "GetItem":            op(d.GetItem),
		targetDynamoDB + "BatchGetItem":       op(d.BatchGetItem),
		targetDynamoDB + "PutItem":            op(d.PutItem),
		targetDynamoDB + "UpdateItem":         op(d.UpdateItem),
		targetDynamoDB + "DeleteItem":         op(d.DeleteItem),
		targetDynamoDB + "BatchWriteItem":     op(d.BatchWriteItem),
		targetDynamoDB + "TransactWriteItems": op(d.TransactWriteItems),
		targetDynamoDB + "Query":              op(d.Query),
		targetDynamoDB + "Scan":               op(d.Scan),
		targetStreams + "ListStreams":         op(d.ListStreams),
		targetStreams + "DescribeStream":      op(d.DescribeStream),
		targetStreams + "GetShardIterator":    op(d.GetShardIterator),
		targetStreams + "GetRecords":          op(d.GetRecords),
	}
}

// Handler serves the DB over HTTP with DynamoDB's JSON 1.0 protocol: the DynamoDB API
// (X-Amz-Target DynamoDB_20120810.*: tables, items, batches, transactions, queries and scans)
// and the DynamoDB Streams API (DynamoDBStreams_20120810.*), so that the SDK's dynamodb and
// dynamodbstreams clients, the AWS CLI or any other client can use it as an endpoint.
// Requests are not authenticated. Errors are answered as DynamoDB answers them: HTTP 400 (500
// for a server fault) and {"__type": "com.amazonaws.dynamodb.v20120810#Code", "message": …}
// with the error's other members.
func (d *DB) Handler() http.Handler {
	calls := d.calls()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("x-amzn-RequestId", "fakedynamo")
		c, ok := calls[r.Header.Get("X-Amz-Target")]
		if r.Method != http.MethodPost || !ok {
			writeError(w, &smithy.GenericAPIError{Code: "UnknownOperationException", Fault: smithy.FaultClient})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
		if err != nil {
			writeError(w, &smithy.GenericAPIError{Code: "SerializationException", Message: err.Error(), Fault: smithy.FaultClient})
			return
		}
		out, err := c(r.Context(), body)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, encodeWire(reflect.ValueOf(out)))
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"encoding the response failed"}`)
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeError answers an error as DynamoDB does; one that is not an API error (a lost
// response, a cancelled request) is an InternalServerError.
func writeError(w http.ResponseWriter, err error) {
	var api smithy.APIError
	if !errors.As(err, &api) {
		api = &smithy.GenericAPIError{Code: "InternalServerError", Message: err.Error(), Fault: smithy.FaultServer}
	}
	body := map[string]any{}
	if _, generic := api.(*smithy.GenericAPIError); !generic {
		if m, ok := encodeWire(reflect.ValueOf(api), "Message", "ErrorCodeOverride").(map[string]any); ok {
			body = m
		}
	}
	body["__type"] = "com.amazonaws.dynamodb.v20120810#" + api.ErrorCode()
	if msg := api.ErrorMessage(); msg != "" {
		body["message"] = msg
	}
	status := http.StatusBadRequest
	if api.ErrorFault() == smithy.FaultServer || strings.HasPrefix(api.ErrorCode(), "InternalServer") {
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, body)
}
