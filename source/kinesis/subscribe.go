package kinesis

import (
	"context"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/kinesis-esm/esm/source"
)

// Enhanced fan-out: a Stream with a consumer (WithConsumer) reads its shards by subscription
// (poller.Subscriber): SubscribeToShard through the consumer, each event a source.Page. The
// engine renews a subscription, backs off and hands the records over; the calls, their options
// and the events' shape are here.

// Subscribe subscribes to the shard at at through the stream's consumer (SubscribeToShard), for
// as long as ctx lasts: its end closes the subscription. A refusal is classified as a read's
// (source.ErrInUse: another subscriber holds the shard; source.ErrInvalidPosition).
//
// With the SDK's client the events are read from the response body by the lean path
// (internal/getrecords), the SDK's reader getting nothing but the initial response.
func (s *Stream) Subscribe(ctx context.Context, shardID string, at source.Position) (source.Subscription, error) {
	api, _ := s.api.(SubscribeAPI) // New checked it
	in := &kinesis.SubscribeToShardInput{ConsumerARN: &s.consumer, ShardId: &shardID, StartingPosition: startingPosition(at)}
	take := &TakeBody{}
	out, err := api.SubscribeToShard(ctx, in, append(s.subscribeOpts(), take.Option)...)
	if err != nil {
		if st := take.Stream(); st != nil {
			_ = st.Close()
		}
		return nil, Classify(err)
	}
	if st := take.Stream(); st != nil {
		_ = out.GetStream().Close() // it has had the initial response; the rest is st's
		return &bodySubscription{st: st, stop: context.AfterFunc(ctx, func() { _ = st.Close() })}, nil
	}
	return &sdkSubscription{ctx: ctx, es: out.GetStream()}, nil
}

// subscribeOpts are the client options of every SubscribeToShard: esm's own, then
// WithSubscribeOptions'.
func (s *Stream) subscribeOpts() []func(*kinesis.Options) {
	opts := make([]func(*kinesis.Options), 0, 3+len(s.subOpts))
	return append(append(opts, freshProtocol, initialResponseOptional), s.subOpts...)
}

// freshProtocol gives each subscription its own copy of the client's default protocol:
// smithy-go's JSON protocol keeps its event-stream decoder state in the protocol value, which the
// concurrent subscriptions of one client would otherwise share (a data race on the decode buffer).
func freshProtocol(o *kinesis.Options) {
	if _, ok := o.Protocol.(*awsjson.Protocol); ok {
		o.Protocol = awsjson.New11(schemas.Kinesis_20131202)
	}
}

// startingPosition is a subscription's StartingPosition at pos.
func startingPosition(pos source.Position) *types.StartingPosition {
	sp := &types.StartingPosition{Type: types.ShardIteratorType(pos.Type)}
	if pos.SequenceNumber != "" {
		sp.SequenceNumber = aws.String(pos.SequenceNumber)
	}
	if pos.Type == source.AtTimestamp {
		sp.Timestamp = aws.Time(pos.Timestamp)
	}
	return sp
}

// EventPage is a subscription's event as the engine sees it: its records and how far behind it
// is, and Next, its ContinuationSequenceNumber, "" at the shard's end (no continuation, or the
// event that carries the ChildShards).
func EventPage(v *types.SubscribeToShardEvent) source.Page {
	p := source.Page{Records: Records(v.Records), MillisBehind: aws.ToInt64(v.MillisBehindLatest), Children: Children(v.ChildShards)}
	if v.ContinuationSequenceNumber != nil && len(v.ChildShards) == 0 {
		p.Next = *v.ContinuationSequenceNumber
	}
	return p
}

// eventOf is the event of a member of the stream's union; ok is false for the other members.
func eventOf(ev types.SubscribeToShardEventStream) (source.Page, bool) {
	e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
	if !ok {
		return source.Page{}, false
	}
	return EventPage(&e.Value), true
}

// sdkSubscription is a subscription whose events the SDK's reader decodes (a client that is not
// the SDK's: a fake, a wrapper).
type sdkSubscription struct {
	ctx context.Context
	es  *kinesis.SubscribeToShardEventStream
}

func (s *sdkSubscription) Next() (source.Page, error) {
	for {
		select {
		case ev, ok := <-s.es.Events():
			if !ok {
				if err := s.es.Err(); err != nil {
					return source.Page{}, err
				}
				return source.Page{}, io.EOF
			}
			if p, ok := eventOf(ev); ok {
				return p, nil
			}
		case <-s.ctx.Done():
			return source.Page{}, s.ctx.Err()
		}
	}
}

func (s *sdkSubscription) Close() error { return s.es.Close() }

// bodySubscription is a subscription whose events are read from the body the lean path took
// (TakeBody); the end of its context closes the body, which ends a read that waits.
type bodySubscription struct {
	st   *EventStream
	stop func() bool
}

func (s *bodySubscription) Next() (source.Page, error) {
	for {
		ev, err := s.st.Next()
		if err != nil {
			return source.Page{}, err
		}
		if p, ok := eventOf(ev); ok {
			return p, nil
		}
	}
}

func (s *bodySubscription) Close() error {
	s.stop()
	return s.st.Close()
}
