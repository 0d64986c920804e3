package dynamostreams

import (
	"errors"
	"strings"
	"testing"

	"github.com/kinesis-esm/esm/source"
)

func TestParseStreamARN(t *testing.T) {
	a, err := ParseStreamARN(testStream)
	if err != nil {
		t.Fatal(err)
	}
	want := StreamARN{Partition: "aws", Region: "us-east-1", Account: "123456789012", Table: "orders", Label: "2026-12-07T00:00:00.000"}
	if a != want || a.String() != testStream {
		t.Fatalf("parsed %+v (%s), want %+v", a, a, want)
	}
	for bad, says := range map[string]string{
		"arn:aws:kinesis:us-east-1:1:stream/s":               "not a DynamoDB stream ARN",
		"arn:aws:dynamodb:us-east-1:1:table/orders":          "a table's ARN",
		"arn:aws:dynamodb:us-east-1:1:table/orders/stream/":  "stream label",
		"arn:aws:dynamodb:us-east-1:1:table/orders/index/ix": "not a DynamoDB stream ARN",
		"arn:aws:dynamodb::1:table/orders/stream/x":          "no region",
		"orders": "not a DynamoDB stream ARN",
		"arn:aws:dynamodb:us-east-1:1:table/orders/stream/2026/consumer/c:1": "DynamoDB Streams has none",
	} {
		_, err := ParseStreamARN(bad)
		var ve *source.ValidationError
		if !errors.As(err, &ve) || ve.Field != "EventSourceArn" || !strings.Contains(err.Error(), says) || !errors.Is(err, source.ErrInvalidConfig) {
			t.Errorf("%s: %v, want a validation error saying %q", bad, err, says)
		}
	}
	if !IsStreamARN(testStream) || IsStreamARN("arn:aws:kinesis:us-east-1:1:stream/s") {
		t.Fatal("IsStreamARN")
	}
}

// TestRules: a consumer is refused with a message that says DynamoDB Streams has none (the
// starting positions are poller.CheckStartingPosition's).
func TestRules(t *testing.T) {
	if err := RefuseConsumer(testStream, "c"); !errors.Is(err, source.ErrInvalidConfig) || !strings.Contains(err.Error(), "no enhanced fan-out consumers") {
		t.Fatalf("consumer: %v", err)
	}
}
