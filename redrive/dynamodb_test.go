package redrive

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/dlq"
	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source/dynamostreams"
)

// TestRedriveDynamoDB: a DynamoDB stream's failed batch is redriven through its source. The
// poller fails on a poison change (bisected to it alone), its on-failure message carries
// DDBStreamBatchInfo; redriving the message invokes the fixed function once with exactly the
// event that failed ({"Records":[…]} of the stream's record objects).
func TestRedriveDynamoDB(t *testing.T) {
	db := fakedynamo.New()
	arn, err := local.CreateStreamTable(context.Background(), db, "orders", ddbtypes.StreamViewTypeNewImage)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "poison", "d"} {
		item := map[string]ddbtypes.AttributeValue{"k": &ddbtypes.AttributeValueMemberS{Value: k}}
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("orders"), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	src, err := dynamostreams.New(db, arn)
	if err != nil {
		t.Fatal(err)
	}
	cfg := poller.Config{StartingPosition: poller.TrimHorizon, BatchSize: 4, BisectBatchOnFunctionError: true,
		MaximumRetryAttempts: new(int), PollInterval: 10 * time.Millisecond, OnFailureDestination: "arn:aws:sqs:us-east-1:000000000000:failures"}
	isPoison := func(p []byte) bool { return bytes.Contains(p, []byte(`"poison"`)) }
	inv, dest := &fn{fail: isPoison}, make(capture, 10)
	p, err := poller.New(src, cfg, poller.NewMemoryStore(), inv, poller.WithDestination(dest), poller.WithFunctionARN(functionARN))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var fr poller.FailureRecord
	select {
	case fr = <-dest:
	case <-time.After(10 * time.Second):
		t.Fatal("no failure record")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var failed []byte
	for _, c := range inv.calls() {
		if isPoison(c) {
			failed = c // the last invocation of the poison: itself alone
		}
	}
	msg := dlq.Message(fr)
	if !bytes.Contains(msg, []byte(`"DDBStreamBatchInfo"`)) || fr.BatchSize != 1 {
		t.Fatalf("failure message %s: want DDBStreamBatchInfo of the poison alone", msg)
	}
	msgs, err := ReadFile(writeMessages(t, msg))
	if err != nil {
		t.Fatal(err)
	}
	fixed := &fn{}
	r, err := New(src, cfg, WithInvoker(fixed), WithFunctionARN(functionARN))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := r.Run(context.Background(), msgs)
	if err != nil || sum.Redriven != 1 {
		t.Fatalf("redrive: %+v, %v", sum, err)
	}
	if calls := fixed.calls(); len(calls) != 1 || !bytes.Equal(calls[0], failed) {
		t.Fatalf("redrive invoked %d times; want once with the failed event\n got: %s\nwant: %s", len(calls), calls, failed)
	}
}
