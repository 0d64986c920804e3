package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/poller"
)

func TestResolveConsumer(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)

	if _, err := resolveConsumer(ctx, f, arn, "c", false, log); !errors.Is(err, ErrConsumerNotFound) || !strings.Contains(err.Error(), "--register-consumer") {
		t.Fatalf("missing consumer without registration: %v", err)
	}
	registered, err := resolveConsumer(ctx, f, arn, "c", true, log)
	if err != nil || !strings.HasPrefix(registered, arn+"/consumer/c:") {
		t.Fatalf("register: %q %v", registered, err)
	}
	again, err := resolveConsumer(ctx, f, arn, "c", true, log) // exists: found, not registered twice
	if err != nil || again != registered {
		t.Fatalf("second resolve: %q %v, want %q", again, err, registered)
	}
	byARN, err := resolveConsumer(ctx, f, arn, registered, false, log)
	if err != nil || byARN != registered {
		t.Fatalf("by ARN: %q %v", byARN, err)
	}
	other := f.CreateStream("t", 1)
	if _, err := resolveConsumer(ctx, f, other, registered, false, log); !errors.Is(err, poller.ErrInvalidConfig) {
		t.Fatalf("another stream's consumer: %v", err)
	}
}

func TestSplitSource(t *testing.T) {
	const c = "arn:aws:kinesis:us-east-1:000000000000:stream/s/consumer/c:17"
	for _, tt := range []struct{ stream, consumer, wantStream, wantConsumer string }{
		{"s", "", "s", ""},
		{"s", "c", "s", "c"},
		{c, "", "arn:aws:kinesis:us-east-1:000000000000:stream/s", c},
		{c, "c", "arn:aws:kinesis:us-east-1:000000000000:stream/s", "c"},
	} {
		s, cons, err := splitSource(tt.stream, tt.consumer)
		if err != nil || s != tt.wantStream || cons != tt.wantConsumer {
			t.Errorf("splitSource(%q, %q) = %q, %q, %v", tt.stream, tt.consumer, s, cons, err)
		}
	}
	if _, _, err := splitSource(c, "other"); !errors.Is(err, poller.ErrInvalidConfig) {
		t.Errorf("a consumer ARN and another consumer: %v", err)
	}
}

// creating reports a consumer CREATING for its first describes, as Kinesis does after registration.
type creating struct {
	*fakekinesis.Fake
	left int
}

func (c *creating) DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, o ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error) {
	out, err := c.Fake.DescribeStreamConsumer(ctx, in, o...)
	if err == nil && c.left > 0 {
		c.left--
		out.ConsumerDescription.ConsumerStatus = types.ConsumerStatusCreating
	}
	return out, err
}

func TestResolveConsumerWaitsUntilActive(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	c := &creating{Fake: f, left: 2}
	got, err := resolveConsumer(context.Background(), c, arn, "c", true, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || got == "" || c.left != 0 {
		t.Fatalf("resolve a consumer being created: %q %v (%d CREATING answers left)", got, err, c.left)
	}
}
