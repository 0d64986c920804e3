package redrive_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/kinesis-esm/esm/redrive"
)

// ParseMessage reads the on-failure message Lambda (or esm) sent to a queue: which records of
// which shard failed, and why. A redrive fetches those records from the stream again.
func ExampleParseMessage() {
	body := `{"requestContext":{"requestId":"c3f9a1e2-0000-4000-8000-000000000001",
	"functionArn":"arn:aws:lambda:us-east-1:123456789012:function:orders","condition":"RetryAttemptsExhausted",
	"approximateInvokeCount":3},"responseContext":{"statusCode":200,"executedVersion":"$LATEST",
	"functionError":"Unhandled"},"version":"1.0","timestamp":"2026-05-04T12:00:00.000Z",
	"KinesisBatchInfo":{"shardId":"shardId-000000000000","startSequenceNumber":"100","endSequenceNumber":"102",
	"approximateArrivalOfFirstRecord":"2026-05-04T11:59:00.000Z","approximateArrivalOfLastRecord":"2026-05-04T11:59:30.000Z",
	"batchSize":3,"streamArn":"arn:aws:kinesis:us-east-1:123456789012:stream/orders"}}`
	m, err := redrive.ParseMessage([]byte(body))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Condition, m.InvokeCount, m.FunctionError)
	fmt.Println(m.StreamARN, m.ShardID, m.StartSequenceNumber, m.EndSequenceNumber, m.BatchSize)

	_, err = redrive.ParseMessage([]byte(`{"Records":[]}`)) // an event, not a failure message
	fmt.Println(errors.Is(err, redrive.ErrInvalidMessage))
	// Output:
	// RetryAttemptsExhausted 3 Unhandled
	// arn:aws:kinesis:us-east-1:123456789012:stream/orders shardId-000000000000 100 102 3
	// true
}
