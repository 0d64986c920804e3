package dlq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/kinesis-esm/esm/dlq"
	"github.com/kinesis-esm/esm/poller"
)

// printingSQS stands in for an *sqs.Client: it prints what a queue destination sends.
type printingSQS struct{}

func (printingSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.us-east-1.amazonaws.com/123456789012/" + aws.ToString(in.QueueName))}, nil
}

func (printingSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	var body bytes.Buffer
	if err := json.Indent(&body, []byte(aws.ToString(in.MessageBody)), "", "  "); err != nil {
		return nil, err
	}
	fmt.Println(aws.ToString(in.QueueUrl))
	fmt.Println(body.String())
	return &sqs.SendMessageOutput{}, nil
}

// A queue destination sends the failure record of a batch whose retries ran out as the message
// Lambda sends: metadata only, the records stay in the stream. dlq.New picks the destination
// from the ARN and builds the client from an aws.Config; NewQueue takes any client.
func ExampleQueue() {
	q, err := dlq.NewQueue(printingSQS{}, "arn:aws:sqs:us-east-1:123456789012:orders-failures")
	if err != nil {
		log.Fatal(err)
	}
	at := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	err = q.Deliver(context.Background(), poller.FailureRecord{
		Condition:              poller.ConditionRetryAttemptsExhausted,
		RequestID:              "c3f9a1e2-0000-4000-8000-000000000001",
		FunctionARN:            "arn:aws:lambda:us-east-1:123456789012:function:orders",
		ApproximateInvokeCount: 3,
		Response:               &poller.FailureResponse{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: "Unhandled"},
		Timestamp:              at,
		StreamARN:              "arn:aws:kinesis:us-east-1:123456789012:stream/orders",
		ShardID:                "shardId-000000000000",
		StartSequenceNumber:    "49590338271490256608559692538361571095921575989136588898",
		EndSequenceNumber:      "49590338271490256608559692540925702759324208523137515618",
		FirstArrival:           at.Add(-time.Minute),
		LastArrival:            at.Add(-30 * time.Second),
		BatchSize:              2,
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// https://sqs.us-east-1.amazonaws.com/123456789012/orders-failures
	// {
	//   "requestContext": {
	//     "requestId": "c3f9a1e2-0000-4000-8000-000000000001",
	//     "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:orders",
	//     "condition": "RetryAttemptsExhausted",
	//     "approximateInvokeCount": 3
	//   },
	//   "responseContext": {
	//     "statusCode": 200,
	//     "executedVersion": "$LATEST",
	//     "functionError": "Unhandled"
	//   },
	//   "version": "1.0",
	//   "timestamp": "2026-05-04T12:00:00.000Z",
	//   "KinesisBatchInfo": {
	//     "shardId": "shardId-000000000000",
	//     "startSequenceNumber": "49590338271490256608559692538361571095921575989136588898",
	//     "endSequenceNumber": "49590338271490256608559692540925702759324208523137515618",
	//     "approximateArrivalOfFirstRecord": "2026-05-04T11:59:00.000Z",
	//     "approximateArrivalOfLastRecord": "2026-05-04T11:59:30.000Z",
	//     "batchSize": 2,
	//     "streamArn": "arn:aws:kinesis:us-east-1:123456789012:stream/orders"
	//   }
	// }
}
