package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
)

// fakeKinesisHTTP serves an in-memory Kinesis over Kinesis's JSON protocol, for a benchmark of the
// esm binary at a rate kinesis-local cannot answer. It has only the calls "esm run" makes to
// read idle shards (DescribeStreamSummary, ListShards, GetShardIterator and GetRecords; with a
// consumer, DescribeStreamConsumer and SubscribeToShard, whose event stream it relays), it
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
			var o *kinesis.GetRecordsOutput
			if o, err = serveCall(r.Context(), body, f.GetRecords); err == nil {
				out = getRecordsWire(o)
			}
		case "DescribeStreamConsumer":
			var o *kinesis.DescribeStreamConsumerOutput
			if o, err = serveCall(r.Context(), body, f.DescribeStreamConsumer); err == nil {
				o.ConsumerDescription.ConsumerCreationTimestamp = nil
			}
			out = o
		case "SubscribeToShard":
			r.Body = io.NopCloser(bytes.NewReader(body))
			serveStream(w, f.ServeSubscribeToShard(r))
			return
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

// serveStream writes resp, an event stream, to w as it comes, and closes it (which ends the
// subscription) when the stream ends or the client goes.
func serveStream(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// serveCall decodes one call's input from body and makes the call.
func serveCall[I, O any](ctx context.Context, body []byte, call func(context.Context, *I, ...func(*kinesis.Options)) (*O, error)) (*O, error) {
	in := new(I)
	if err := json.Unmarshal(body, in); err != nil {
		return nil, &smithy.GenericAPIError{Code: "SerializationException", Message: err.Error()}
	}
	return call(ctx, in)
}

// wireRecord is a record as Kinesis' JSON protocol sends it: its arrival time in epoch seconds
// (encoding/json would write the SDK type's time.Time as RFC 3339, which the SDK cannot read).
type wireRecord struct {
	ApproximateArrivalTimestamp float64              `json:",omitempty"`
	Data                        []byte               `json:",omitempty"`
	PartitionKey                *string              `json:",omitempty"`
	SequenceNumber              *string              `json:",omitempty"`
	EncryptionType              types.EncryptionType `json:",omitempty"`
}

type wireGetRecords struct {
	ChildShards        []types.ChildShard `json:",omitempty"`
	MillisBehindLatest *int64             `json:",omitempty"`
	NextShardIterator  *string            `json:",omitempty"`
	Records            []wireRecord
}

// getRecordsWire is o as Kinesis sends it.
func getRecordsWire(o *kinesis.GetRecordsOutput) wireGetRecords {
	w := wireGetRecords{ChildShards: o.ChildShards, MillisBehindLatest: o.MillisBehindLatest, NextShardIterator: o.NextShardIterator,
		Records: make([]wireRecord, 0, len(o.Records))}
	for _, r := range o.Records {
		wr := wireRecord{Data: r.Data, PartitionKey: r.PartitionKey, SequenceNumber: r.SequenceNumber, EncryptionType: r.EncryptionType}
		if r.ApproximateArrivalTimestamp != nil {
			wr.ApproximateArrivalTimestamp = float64(r.ApproximateArrivalTimestamp.UnixMilli()) / 1e3
		}
		w.Records = append(w.Records, wr)
	}
	return w
}
