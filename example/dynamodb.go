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

// DDBDelivery is one line of EXAMPLE_OUTPUT written by the DynamoDB handler: one record as the
// function saw it, with the invocation it came in. A DynamoDB Streams event does not name the
// shard a record was read from: a judge finds it from the record's SequenceNumber and the shards'
// sequence number ranges (DescribeStream).
type DDBDelivery struct {
	RequestID string                     `json:"requestId"`
	BatchSize int                        `json:"batchSize"`
	Record    events.DynamoDBEventRecord `json:"record"`
	// InvokedAt and DoneAt are when the invocation started and when it had handled its records,
	// in Unix nanoseconds: lineage is judged on them.
	InvokedAt int64 `json:"invokedAt"`
	DoneAt    int64 `json:"doneAt"`
}

// HandleDynamoDB is the example function for a DynamoDB stream, with the settings in the
// environment (ConfigFromEnv): EXAMPLE_OUTPUT, EXAMPLE_DELAY, EXAMPLE_EVENT_DUMP and the failure
// switches, whose EXAMPLE_FAIL_MATCH is looked for in each record's keys and images.
func HandleDynamoDB(ctx context.Context, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return ConfigFromEnv().HandleDynamoDB(ctx, e)
}

// HandleDynamoDB records every record of the batch and reports no failures, unless c asks it to
// fail.
func (c Config) HandleDynamoDB(ctx context.Context, e events.DynamoDBEvent) (resp events.DynamoDBEventResponse, err error) {
	start := time.Now()
	if err := c.dump(e); err != nil {
		return resp, err
	}
	texts := make([]string, len(e.Records))
	for i, r := range e.Records {
		b, err := json.Marshal(r.Change)
		if err != nil {
			return resp, err
		}
		texts[i] = string(b)
	}
	if err := c.failOn(ctx, texts); err != nil {
		return resp, err
	}
	if err := c.delay(ctx); err != nil {
		return resp, err
	}
	var reqID string
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		reqID = lc.AwsRequestID
	}
	return resp, c.recordDynamoDB(reqID, start, e)
}

// recordDynamoDB writes one DDBDelivery per record to c.Output, or a summary line to c.Stdout.
func (c Config) recordDynamoDB(reqID string, start time.Time, e events.DynamoDBEvent) error {
	n := len(e.Records)
	if c.Output == "" {
		if n > 0 {
			out := c.Stdout
			if out == nil {
				out = os.Stdout
			}
			fmt.Fprintf(out, "received %d records from %s (%s … %s)\n", n, e.Records[0].EventSourceArn,
				e.Records[0].Change.SequenceNumber, e.Records[n-1].Change.SequenceNumber)
		}
		return nil
	}
	var buf []byte
	done := time.Now().UnixNano()
	for _, r := range e.Records {
		line, err := json.Marshal(DDBDelivery{RequestID: reqID, BatchSize: n, Record: r, InvokedAt: start.UnixNano(), DoneAt: done})
		if err != nil {
			return err
		}
		buf = append(append(buf, line...), '\n')
	}
	return appendFile(c.Output, buf)
}
