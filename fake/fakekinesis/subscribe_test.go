package fakekinesis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
)

// Subscriber is the consumer side of enhanced fan-out, with the client's signature.
type Subscriber interface {
	SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error)
}

var (
	_ Subscriber = (*fakekinesis.Fake)(nil)
	_ Subscriber = (*kinesis.Client)(nil)
)

func subscribe(t testing.TB, f *fakekinesis.Fake, consumer, shard string, pos types.StartingPosition) *kinesis.SubscribeToShardEventStream {
	t.Helper()
	out, err := f.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{ConsumerARN: &consumer, ShardId: &shard, StartingPosition: &pos})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.GetStream().Close() })
	return out.GetStream()
}

// next returns the next event, or nil when the stream ended.
func next(t testing.TB, es *kinesis.SubscribeToShardEventStream) *types.SubscribeToShardEvent {
	t.Helper()
	select {
	case ev, ok := <-es.Events():
		if !ok {
			return nil
		}
		return &ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent).Value
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5 s")
	}
	return nil
}

// TestSubscribeDeliversInOrderAndEndsWithChildShards: records put before and after subscribing
// arrive in order through the SDK's decoder, and the end of a split shard is an event with
// ChildShards and no continuation, after which the stream ends without an error.
func TestSubscribeDeliversInOrderAndEndsWithChildShards(t *testing.T) {
	f := fakekinesis.New()
	f.CreateStream("s", 1)
	consumer := f.RegisterConsumer("s", "c")
	_, first := f.Put("s", "k", []byte("a"))
	es := subscribe(t, f, consumer, "shardId-000000000000", types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
	var got []string
	var cont string
	for len(got) < 1 {
		ev := next(t, es)
		for _, r := range ev.Records {
			got = append(got, string(r.Data))
		}
		cont = aws.ToString(ev.ContinuationSequenceNumber)
	}
	if cont != first {
		t.Fatalf("continuation %s after the first record, want its sequence number %s", cont, first)
	}
	f.Put("s", "k", []byte("b"))
	f.Put("s", "k", []byte("c"))
	children := f.Split("s", "shardId-000000000000")
	var end *types.SubscribeToShardEvent
	for end == nil {
		ev := next(t, es)
		if ev == nil {
			t.Fatal("stream ended without ChildShards")
		}
		for _, r := range ev.Records {
			got = append(got, string(r.Data))
		}
		if len(ev.ChildShards) > 0 {
			end = ev
		}
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("records %v, want [a b c]", got)
	}
	if end.ContinuationSequenceNumber != nil || len(end.ChildShards) != 2 || *end.ChildShards[0].ShardId != children[0] {
		t.Fatalf("last event %+v: want ChildShards %v and no continuation", end, children)
	}
	if ev := next(t, es); ev != nil {
		t.Fatalf("event after the shard's end: %+v", ev)
	}
	if err := es.Err(); err != nil {
		t.Fatalf("stream error after the shard's end: %v", err)
	}
}

// TestSubscribeResourceInUse: a second subscription within the reuse window is refused; a later
// one takes over and the first ends with ResourceInUseException.
func TestSubscribeResourceInUse(t *testing.T) {
	f := fakekinesis.New(fakekinesis.WithSubscriptionTiming(0, 300*time.Millisecond))
	f.CreateStream("s", 1)
	consumer := f.RegisterConsumer("s", "c")
	shard := "shardId-000000000000"
	pos := types.StartingPosition{Type: types.ShardIteratorTypeLatest}
	old := subscribe(t, f, consumer, shard, pos)
	_, err := f.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{ConsumerARN: &consumer, ShardId: &shard, StartingPosition: &pos})
	var inUse *types.ResourceInUseException
	var re *awshttp.ResponseError
	if !errors.As(err, &inUse) || !errors.As(err, &re) || re.HTTPStatusCode() != 400 {
		t.Fatalf("second subscription at once: %v, want ResourceInUseException (HTTP 400)", err)
	}
	time.Sleep(350 * time.Millisecond) // the reuse window is wall-clock time in Kinesis too
	subscribe(t, f, consumer, shard, pos)
	for next(t, old) != nil {
	}
	if err := old.Err(); !errors.As(err, &inUse) {
		t.Fatalf("taken-over stream ended with %v, want ResourceInUseException", err)
	}
	if n := f.Calls(fakekinesis.OpSubscribeToShard); n != 3 {
		t.Fatalf("%d SubscribeToShard calls counted, want 3", n)
	}
}

// TestSubscribeLifetimeAndFaults: the stream ends cleanly when its lifetime is over; an injected
// drop cuts it with an error; an injected call error comes back as the client's would.
func TestSubscribeLifetimeAndFaults(t *testing.T) {
	f := fakekinesis.New(fakekinesis.WithSubscriptionTiming(200*time.Millisecond, time.Millisecond))
	f.CreateStream("s", 1)
	consumer := f.RegisterConsumer("s", "c")
	shard := "shardId-000000000000"
	es := subscribe(t, f, consumer, shard, types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
	start := time.Now()
	for next(t, es) != nil {
	}
	if err := es.Err(); err != nil || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("lifetime end: err %v after %s", err, time.Since(start))
	}

	f.Inject(func(op string, in any) error {
		if op == fakekinesis.OpSubscribeToShardEvent && len(in.(*fakekinesis.SubscriptionEvent).Event.Records) > 0 {
			return fakekinesis.ErrDropped
		}
		return nil
	})
	es = subscribe(t, f, consumer, shard, types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
	f.Put("s", "k", []byte("x"))
	for next(t, es) != nil {
	}
	if err := es.Err(); err == nil {
		t.Fatal("dropped stream ended without an error")
	}

	f.Inject(func(op string, _ any) error {
		if op == fakekinesis.OpSubscribeToShard {
			return fakekinesis.ErrThrottled()
		}
		return nil
	})
	pos := types.StartingPosition{Type: types.ShardIteratorTypeLatest}
	_, err := f.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{ConsumerARN: &consumer, ShardId: &shard, StartingPosition: &pos})
	var thr *types.ProvisionedThroughputExceededException
	if !errors.As(err, &thr) {
		t.Fatalf("injected throttle: %v", err)
	}
	f.Inject(nil)
	bad := consumer + "x"
	_, err = f.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{ConsumerARN: &bad, ShardId: &shard, StartingPosition: &pos})
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Fatalf("unknown consumer: %v", err)
	}
}

// TestSubscribeAtTimestampOfARecord: a subscription AT_TIMESTAMP the arrival time of a record
// (a time with milliseconds, sent as epoch seconds) starts at that record. Read back as a
// float64, 946684800.1 s is 100.000023 ms past the second, which left out the records of that
// millisecond (the simulation's lease seed 37, a rewind to the run's start).
func TestSubscribeAtTimestampOfARecord(t *testing.T) {
	c := &clock{t: time.Date(2000, 1, 1, 0, 0, 0, 100e6, time.UTC)}
	f := fakekinesis.New(fakekinesis.WithClock(c.Now))
	f.CreateStream("s", 1)
	consumer := f.RegisterConsumer("s", "c")
	at := c.Now()
	f.Put("s", "k", []byte("first"))
	c.Add(time.Millisecond)
	f.Put("s", "k", []byte("second"))
	es := subscribe(t, f, consumer, "shardId-000000000000", types.StartingPosition{Type: types.ShardIteratorTypeAtTimestamp, Timestamp: &at})
	ev := next(t, es)
	if len(ev.Records) == 0 || string(ev.Records[0].Data) != "first" {
		t.Fatalf("subscribed at %s, first event %+v: want the record that arrived then", at.Format(time.RFC3339Nano), ev.Records)
	}
}
