package local_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/kinesis-esm/esm/internal/testbed/local"
)

// An SQS emulator in this process, for an on-failure destination: create a queue, send to it as
// esm's dlq package does, and drain it. StartKinesis and StartDynalite are used the same way,
// with Node.js and "npm ci" (see the package documentation).
func ExampleStartSQS() {
	srv, err := local.StartSQS()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	client := local.NewSQSClient(cfg, srv.Endpoint())
	url, arn, err := local.CreateQueue(ctx, client, "orders-failures")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(arn)
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(`{"version":"1.0"}`)}); err != nil {
		log.Fatal(err)
	}
	bodies, err := local.ReceiveAll(ctx, client, url)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(bodies)
	// Output:
	// arn:aws:sqs:us-east-1:000000000000:orders-failures
	// [{"version":"1.0"}]
}
