package sam

import (
	"testing"

	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// TestStreamConsumerSource: a mapping whose Stream is !GetAtt of an AWS::Kinesis::StreamConsumer's
// ConsumerARN reads through that consumer of the template's stream, and validates as Lambda's
// EventSourceArn with a consumer ARN.
func TestStreamConsumerSource(t *testing.T) {
	tpl, err := Load("testdata/consumer.yaml", WithParameterOverrides(map[string]string{"StreamName": "o"}))
	if err != nil {
		t.Fatal(err)
	}
	m, err := tpl.Select("")
	if err != nil {
		t.Fatal(err)
	}
	want := "arn:aws:kinesis:us-east-1:" + DefaultAccountID + ":stream/o/consumer/o-esm:0"
	if m.EventSourceArn != want || m.Consumer == nil || *m.Consumer != (StreamConsumer{LogicalID: "Consumer", Name: "o-esm", Arn: want}) {
		t.Fatalf("source %s, consumer %+v; want %s through the template's Consumer", m.EventSourceArn, m.Consumer, want)
	}
	if m.Stream.LogicalID != "Stream" || m.Stream.Name != "o" || m.Stream.ShardCount != 2 {
		t.Fatalf("stream %+v: want the template's Stream", m.Stream)
	}
	cfg := m.PollerConfig()
	if err := cfg.Validate(m.EventSourceArn); err != nil {
		t.Fatal(err)
	}

	// A literal consumer ARN of another account is a consumer without a template resource.
	lit, err := Parse("t.yaml", []byte(eventTemplate("Stream: "+stream+"/consumer/c:1540591608\nStartingPosition: LATEST")))
	if err != nil {
		t.Fatal(err)
	}
	m, _ = lit.Select("")
	if m.Consumer == nil || m.Consumer.LogicalID != "" || m.Consumer.Name != "c" || m.Stream.Arn != stream {
		t.Fatalf("literal consumer ARN: consumer %+v, stream %+v", m.Consumer, m.Stream)
	}
	if _, err := kinesissrc.ParseConsumerARN(m.EventSourceArn); err != nil {
		t.Fatal(err)
	}
}
