package handler_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/handler"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

func handle(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
	var resp events.KinesisEventResponse
	for _, r := range e.Records {
		if len(r.Kinesis.Data) == 0 { // report the record; Lambda retries from it
			resp.BatchItemFailures = append(resp.BatchItemFailures,
				events.KinesisBatchItemFailure{ItemIdentifier: r.Kinesis.SequenceNumber})
			continue
		}
		fmt.Printf("%s: %s\n", r.Kinesis.PartitionKey, r.Kinesis.Data)
	}
	return resp, nil
}

// A function's main package. Deployed with template.yaml (sam build && sam deploy) it runs under
// Lambda as lambda.Start(handle); run locally it reads the same template.yaml and polls the stream
// itself:
//
//	go run . --endpoint-url http://127.0.0.1:4568 --parameter-overrides "StreamName=orders"
func ExampleStart() {
	handler.Start(handle)
}

// The same handler, invoked as Lambda invokes it (through aws-lambda-go, in this process, as
// handler/inproc and "esm run --invoke example" do): the record without data is reported in
// batchItemFailures, so Lambda (and esm) retry from it.
func Example_invoke() {
	event := `{"Records":[
		{"eventSource":"aws:kinesis","kinesis":{"partitionKey":"k1","data":"aGVsbG8=","sequenceNumber":"1"}},
		{"eventSource":"aws:kinesis","kinesis":{"partitionKey":"k2","data":"","sequenceNumber":"2"}}]}`
	resp, err := inprocess.New(handle).Invoke(context.Background(), []byte(event))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.StatusCode, string(resp.Payload))
	// Output:
	// k1: hello
	// 200 {"batchItemFailures":[{"itemIdentifier":"2"}]}
}
