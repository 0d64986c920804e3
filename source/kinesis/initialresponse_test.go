package kinesis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
)

// TestOptionalInitialResponse: one client, with esm's subscription options, reads a stream that
// starts with the initial response (Kinesis) and one that starts with its first event
// (kinesis-local), and sees an exception sent as the first message (kinesis-local's
// ResourceInUseException) as the modelled error.
func TestOptionalInitialResponse(t *testing.T) {
	opts := []func(*kinesis.Options){freshProtocol, initialResponseOptional}
	for _, tt := range []struct {
		name string
		fake []fakekinesis.Option
	}{{"initial-response", nil}, {"no initial-response", []fakekinesis.Option{fakekinesis.WithoutInitialResponse()}}} {
		t.Run(tt.name, func(t *testing.T) {
			f := fakekinesis.New(append(tt.fake, fakekinesis.WithSubscriptionTiming(0, time.Hour))...)
			f.CreateStream("s", 1)
			f.Put("s", "k", []byte("one"))
			consumer := f.RegisterConsumer("s", "c")
			in := &kinesis.SubscribeToShardInput{ConsumerARN: &consumer, ShardId: aws.String("shardId-000000000000"),
				StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := f.SubscribeToShard(ctx, in, opts...)
			if err != nil {
				t.Fatalf("subscribe: %v", err)
			}
			stream := out.GetStream()
			defer stream.Close()
			ev, ok := <-stream.Events()
			if !ok {
				t.Fatalf("stream ended before its first event: %v", stream.Err())
			}
			got := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent).Value
			if len(got.Records) != 1 || string(got.Records[0].Data) != "one" {
				t.Fatalf("first event %+v, want the one record", got)
			}
			// A second subscription within the reuse window: refused in the stream's first message
			// when there is no initial response, as kinesis-local does, or as the call's error.
			out2, err := f.SubscribeToShard(ctx, in, opts...)
			if err == nil {
				for range out2.GetStream().Events() {
				}
				err = out2.GetStream().Err()
			}
			var iu *types.ResourceInUseException
			if !errors.As(err, &iu) {
				t.Fatalf("second subscription: %v, want ResourceInUseException", err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
