package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"

	"github.com/kinesis-esm/esm/internal/fakekinesis"
)

// fakeKinesisHTTP serves an in-memory Kinesis over Kinesis's JSON protocol, for a benchmark of the
// esm binary at a rate kinesis-local cannot answer. It has only the calls "esm run" makes to
// read idle shards (DescribeStreamSummary, ListShards, GetShardIterator and GetRecords), it
// decodes inputs with encoding/json (the SDK's member names) and leaves out the one output
// timestamp (StreamCreationTimestamp: the SDK expects epoch seconds, encoding/json writes RFC
// 3339); records would need the same for ApproximateArrivalTimestamp, so it is for idle streams.
func fakeKinesisHTTP(f *fakekinesis.Fake) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var out any
		switch _, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), "."); op {
		case "DescribeStreamSummary":
			var o *kinesis.DescribeStreamSummaryOutput
			if o, err = serveCall(r.Context(), body, f.DescribeStreamSummary); err == nil {
				o.StreamDescriptionSummary.StreamCreationTimestamp = nil
			}
			out = o
		case "ListShards":
			out, err = serveCall(r.Context(), body, f.ListShards)
		case "GetShardIterator":
			out, err = serveCall(r.Context(), body, f.GetShardIterator)
		case "GetRecords":
			out, err = serveCall(r.Context(), body, f.GetRecords)
		default:
			err = &smithy.GenericAPIError{Code: "UnknownOperationException", Message: op}
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if err != nil {
			code, msg := "InternalFailure", err.Error()
			if api, ok := errors.AsType[smithy.APIError](err); ok {
				code, msg = api.ErrorCode(), api.ErrorMessage()
			}
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	})
}

// serveCall decodes one call's input from body and makes the call.
func serveCall[I, O any](ctx context.Context, body []byte, call func(context.Context, *I, ...func(*kinesis.Options)) (*O, error)) (*O, error) {
	in := new(I)
	if err := json.Unmarshal(body, in); err != nil {
		return nil, &smithy.GenericAPIError{Code: "SerializationException", Message: err.Error()}
	}
	return call(ctx, in)
}
