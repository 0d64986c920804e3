package inprocess_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/invoke/inprocess"
)

func ExampleNew() {
	inv := inprocess.New(func(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		if len(e.Records) == 0 {
			return events.KinesisEventResponse{}, errors.New("empty batch")
		}
		return events.KinesisEventResponse{}, nil
	})
	resp, err := inv.Invoke(context.Background(), []byte(`{"Records":[]}`))
	fmt.Println(err, resp.StatusCode, resp.FunctionError, string(resp.Payload))
	// Output: <nil> 200 Unhandled {"errorMessage":"empty batch","errorType":"errorString"}
}
