package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kinesis-esm/esm/poller"
)

// TestMessagingSystemOfTheSource: a span's messaging.system is its source's: aws_kinesis for a
// Kinesis stream, aws_dynamodb_streams for a DynamoDB stream.
func TestMessagingSystemOfTheSource(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr := NewTracer(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), Mapping{FunctionName: "fn"})
	for _, source := range []string{"aws:kinesis", "aws:dynamodb"} {
		_, s := tr.StartInvocation(context.Background(), nil, poller.Invocation{StreamName: "orders", EventSource: source, ShardID: "shardId-1", BatchSize: 1})
		s.End(poller.OutcomeOK, "")
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	for i, want := range []string{"aws_kinesis", "aws_dynamodb_streams"} {
		got := ""
		for _, a := range spans[i].Attributes {
			if a.Key == KeySystem {
				got = a.Value.AsString()
			}
		}
		if got != want {
			t.Errorf("span %d: messaging.system %q, want %q", i, got, want)
		}
	}
}
