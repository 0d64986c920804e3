package handler_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/handler"
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
