// Package example is the function esm ships for demos and tests: a plain aws-lambda-go Kinesis
// handler that records what it receives. It is deployed unchanged to Lambda (see bootstrap/).
//
// Settings come from the environment, as a Lambda function's would:
//
//	EXAMPLE_OUTPUT  file to append one JSON line per record to (default: a summary line on stdout)
//	EXAMPLE_DELAY   time to spend on each invocation, e.g. 20ms (default 0)
package example

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Delivery is one line of EXAMPLE_OUTPUT: one record as the function saw it.
type Delivery struct {
	RequestID    string `json:"requestId"`
	ShardID      string `json:"shardId"`
	Sequence     string `json:"sequenceNumber"`
	PartitionKey string `json:"partitionKey"`
	Data         string `json:"data"`
	BatchSize    int    `json:"batchSize"`
	// ReceivedAt is when the invocation started, in Unix milliseconds.
	ReceivedAt int64 `json:"receivedAt"`
}

// Handle records every record of the batch and reports no failures.
func Handle(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
	received := time.Now().UnixMilli()
	if d, err := time.ParseDuration(os.Getenv("EXAMPLE_DELAY")); err == nil && d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return events.KinesisEventResponse{}, ctx.Err()
		}
	}
	reqID := ""
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		reqID = lc.AwsRequestID
	}
	path := os.Getenv("EXAMPLE_OUTPUT")
	if path == "" {
		if n := len(e.Records); n > 0 {
			fmt.Printf("received %d records from %s (%s … %s)\n", n, shardOf(e.Records[0].EventID),
				e.Records[0].Kinesis.SequenceNumber, e.Records[n-1].Kinesis.SequenceNumber)
		}
		return events.KinesisEventResponse{}, nil
	}
	var buf []byte
	for _, r := range e.Records {
		line, err := json.Marshal(Delivery{
			RequestID: reqID, ShardID: shardOf(r.EventID), Sequence: r.Kinesis.SequenceNumber,
			PartitionKey: r.Kinesis.PartitionKey, Data: string(r.Kinesis.Data), BatchSize: len(e.Records), ReceivedAt: received,
		})
		if err != nil {
			return events.KinesisEventResponse{}, err
		}
		buf = append(append(buf, line...), '\n')
	}
	// One append per batch: concurrent shards never interleave within a line.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return events.KinesisEventResponse{}, err
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return events.KinesisEventResponse{}, err
	}
	return events.KinesisEventResponse{}, f.Close()
}

// shardOf takes the shard id from an eventID ("shardId-000000000000:<sequence number>").
func shardOf(eventID string) string {
	for i := 0; i < len(eventID); i++ {
		if eventID[i] == ':' {
			return eventID[:i]
		}
	}
	return eventID
}
