package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

type customErr struct{}

func (customErr) Error() string { return "custom" }

func TestInProcessOutcomes(t *testing.T) {
	event := []byte(`{"Records":[{"kinesis":{"partitionKey":"k","sequenceNumber":"1","data":"aGk=","approximateArrivalTimestamp":1.5,"kinesisSchemaVersion":"1.0"},"eventID":"shardId-000000000000:1"}]}`)
	tests := []struct {
		name      string
		handler   any
		failed    bool
		errorType string
		message   string
		payload   string
	}{
		{name: "success", handler: func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
			if string(e.Records[0].Kinesis.Data) != "hi" {
				return events.KinesisEventResponse{}, errors.New("bad decode")
			}
			return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{{ItemIdentifier: "1"}}}, nil
		}, payload: `{"batchItemFailures":[{"itemIdentifier":"1"}]}`},
		{name: "empty response", handler: func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
			return events.KinesisEventResponse{}, nil
		}, payload: `{"batchItemFailures":null}`},
		{name: "error", handler: func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
			return events.KinesisEventResponse{}, errors.New("boom")
		}, failed: true, errorType: "errorString", message: "boom"},
		{name: "typed error", handler: func(context.Context, events.KinesisEvent) error { return customErr{} },
			failed: true, errorType: "customErr", message: "custom"},
		{name: "panic", handler: func(context.Context, events.KinesisEvent) error { panic("kaboom") },
			failed: true, errorType: "string", message: "kaboom"},
		{name: "timeout", handler: func(ctx context.Context, _ events.KinesisEvent) error { <-ctx.Done(); time.Sleep(10 * time.Millisecond); return nil },
			failed: true, errorType: "Sandbox.Timedout", message: "Task timed out after 0.05 seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewInProcess(tt.handler, WithTimeout(50*time.Millisecond), WithFunctionARN("arn:aws:lambda:us-east-1:1:function:f"))
			resp, err := p.Invoke(context.Background(), event)
			if err != nil {
				t.Fatalf("in-process invoke returned %v", err)
			}
			if resp.Failed() != tt.failed || resp.StatusCode != 200 {
				t.Fatalf("failed=%v status=%d, want failed=%v status 200 (%s)", resp.Failed(), resp.StatusCode, tt.failed, resp.Payload)
			}
			if !tt.failed {
				if strings.TrimSpace(string(resp.Payload)) != tt.payload {
					t.Fatalf("payload %s, want %s", resp.Payload, tt.payload)
				}
				return
			}
			if resp.FunctionError != FunctionErrorUnhandled {
				t.Fatalf("FunctionError %q", resp.FunctionError)
			}
			var doc ErrorDocument
			if err := json.Unmarshal(resp.Payload, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.ErrorType != tt.errorType || !strings.Contains(doc.ErrorMessage, tt.message) {
				t.Fatalf("error document %+v, want type %q message containing %q", doc, tt.errorType, tt.message)
			}
		})
	}
}

func TestInProcessLambdaContext(t *testing.T) {
	var lc *lambdacontext.LambdaContext
	var deadline time.Time
	p := NewInProcess(func(ctx context.Context, _ events.KinesisEvent) error {
		lc, _ = lambdacontext.FromContext(ctx)
		deadline, _ = ctx.Deadline()
		return nil
	}, WithFunctionARN("arn:aws:lambda:us-east-1:1:function:f"))
	start := time.Now()
	if _, err := p.Invoke(context.Background(), []byte(`{"Records":[]}`)); err != nil {
		t.Fatal(err)
	}
	if lc == nil || lc.AwsRequestID == "" || lc.InvokedFunctionArn != "arn:aws:lambda:us-east-1:1:function:f" {
		t.Fatalf("lambda context %+v", lc)
	}
	if d := deadline.Sub(start); d < 2900*time.Millisecond || d > 3100*time.Millisecond {
		t.Fatalf("deadline %s after start, want the 3 s default timeout", d)
	}
}
