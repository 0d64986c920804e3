package kinesis

import (
	"errors"
	"strings"
	"testing"
)

const testStream = "arn:aws:kinesis:us-east-1:123456789012:stream/s"

func TestConsumerARNValidation(t *testing.T) {
	consumer := testStream + "/consumer/c-1.x_y:1540591608"
	s, err := New(nil, consumer)
	if err != nil || s.Identity().ARN != testStream || s.ConsumerARN() != consumer {
		t.Fatalf("consumer ARN as EventSourceArn: %v %+v", err, s)
	}
	if s.Identity().InvokeIdentityARN != "arn:aws:iam::123456789012:role/esm" {
		t.Fatalf("identity %q from the consumer's account", s.Identity().InvokeIdentityARN)
	}
	for _, tt := range []struct {
		name             string
		stream, consumer string
		field, msg       string
	}{
		{"no stream", "", "", "EventSourceArn", "Unrecognized event source."},
		{"not a stream ARN", "arn:aws:sqs:us-east-1:1:q", "", "EventSourceArn", "not a Kinesis stream ARN"},
		{"no creation time", testStream + "/consumer/c", "", "EventSourceArn", "no creation timestamp"},
		{"bad creation time", testStream + "/consumer/c:x", "", "EventSourceArn", "epoch seconds"},
		{"bad name", testStream + "/consumer/c d:1", "", "EventSourceArn", "1-128 letters"},
		{"empty name", testStream + "/consumer/:1", "", "EventSourceArn", "1-128 letters"},
		{"bad stream part", "arn:aws:sqs:us-east-1:1:stream/s/consumer/c:1", "", "EventSourceArn", "stream part"},
		{"another stream's consumer", testStream, testStream + "x/consumer/c:1", "ConsumerARN", "not of"},
		{"two consumers", testStream + "/consumer/a:1", testStream + "/consumer/b:1", "ConsumerARN", "another"},
		{"malformed ConsumerARN", testStream, testStream + "/consumer/b", "ConsumerARN", "creation timestamp"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(nil, tt.stream, WithConsumer(tt.consumer))
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.field || !strings.Contains(ve.Message, tt.msg) {
				t.Fatalf("got %v (%+v), want a %s error about %q", err, ve, tt.field, tt.msg)
			}
		})
	}
}

// FuzzParseConsumerARN: the parser never panics, and what it accepts prints as an ARN that parses
// back to the same.
func FuzzParseConsumerARN(f *testing.F) {
	for _, s := range []string{testStream + "/consumer/c:1540591608", testStream + "/consumer/c", "arn:aws:kinesis:::stream//consumer/:",
		"arn:aws-cn:kinesis:cn-north-1:1:stream/a.b/consumer/x:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ca, err := ParseConsumerARN(s)
		if err != nil {
			return
		}
		if back, err := ParseConsumerARN(ca.String()); err != nil || back != ca {
			t.Fatalf("%q parsed as %+v, which does not parse back from %q (%v)", s, ca, ca.String(), err)
		}
	})
}
