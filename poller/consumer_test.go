package poller

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const testStream = "arn:aws:kinesis:us-east-1:123456789012:stream/s"

func TestConsumerARNValidation(t *testing.T) {
	consumer := testStream + "/consumer/c-1.x_y:1540591608"
	c := Config{StreamARN: consumer, StartingPosition: Latest}
	got, err := c.withDefaults(time.Now())
	if err != nil || got.StreamARN != testStream || got.ConsumerARN != consumer {
		t.Fatalf("consumer ARN as EventSourceArn: %v %q %q", err, got.StreamARN, got.ConsumerARN)
	}
	if got.InvokeIdentityARN != "arn:aws:iam::123456789012:role/esm" {
		t.Fatalf("identity %q from the consumer's account", got.InvokeIdentityARN)
	}
	for _, tt := range []struct {
		name       string
		cfg        Config
		field, msg string
	}{
		{"no creation time", Config{StreamARN: testStream + "/consumer/c"}, "EventSourceArn", "no creation timestamp"},
		{"bad creation time", Config{StreamARN: testStream + "/consumer/c:x"}, "EventSourceArn", "epoch seconds"},
		{"bad name", Config{StreamARN: testStream + "/consumer/c d:1"}, "EventSourceArn", "1-128 letters"},
		{"empty name", Config{StreamARN: testStream + "/consumer/:1"}, "EventSourceArn", "1-128 letters"},
		{"bad stream part", Config{StreamARN: "arn:aws:sqs:us-east-1:1:stream/s/consumer/c:1"}, "EventSourceArn", "stream part"},
		{"another stream's consumer", Config{StreamARN: testStream, ConsumerARN: testStream + "x/consumer/c:1"}, "ConsumerARN", "not of"},
		{"two consumers", Config{StreamARN: testStream + "/consumer/a:1", ConsumerARN: testStream + "/consumer/b:1"}, "ConsumerARN", "another"},
		{"malformed ConsumerARN", Config{StreamARN: testStream, ConsumerARN: testStream + "/consumer/b"}, "ConsumerARN", "creation timestamp"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.StartingPosition = Latest
			_, err := tt.cfg.withDefaults(time.Now())
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
