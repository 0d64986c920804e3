package fakekinesis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/eventstream"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

// Enhanced fan-out. SubscribeToShard is served through a real *kinesis.Client whose HTTP client
// is the fake itself: the request is the SDK's JSON, the response an AWS event stream (the
// initial-response message, then SubscribeToShardEvent messages, exceptions as exception
// messages), decoded by the SDK as it decodes Kinesis' own. So a caller sees exactly the types,
// errors and stream behaviour of the real client.

// Operation names for Inject and Calls, besides the read calls.
const (
	// OpSubscribeToShard is a SubscribeToShard call. Inject gets its *kinesis.SubscribeToShardInput;
	// an error is returned by the call, as for GetRecords.
	OpSubscribeToShard = "SubscribeToShard"
	// OpSubscribeToShardEvent is one event about to be sent on a subscription. Inject gets a
	// *SubscriptionEvent; an error ends the subscription instead: ErrDropped cuts the connection
	// (the stream's Err is a read error), a modelled exception such as
	// *types.ResourceInUseException arrives as an exception message.
	OpSubscribeToShardEvent = "SubscribeToShardEvent"
)

// SubscriptionEvent is what an Inject callback gets for OpSubscribeToShardEvent.
type SubscriptionEvent struct {
	// Context is the context the SubscribeToShard call was made with (its values included), so a
	// callback can tell whose subscription it is.
	Context context.Context
	// Event is the event about to be sent. The callback may read it, not modify it.
	Event *types.SubscribeToShardEvent
}

// Subscription timings, as Kinesis documents them.
const (
	defaultSubscriptionLifetime = 5 * time.Minute
	defaultSubscribeReuse       = 5 * time.Second // a second call within this gets ResourceInUse
	defaultHeartbeat            = time.Second     // an empty event when nothing happened
	maxEventRecords             = 10000
	maxEventBytes               = 2 << 20 // a consumer's per-shard budget for one second
)

// ErrDropped, returned from an Inject callback for OpSubscribeToShardEvent, cuts a subscription's
// connection mid-stream, as a network failure does.
var ErrDropped = errors.New("fakekinesis: connection dropped")

// WithSubscriptionTiming sets how long a subscription lasts before Kinesis ends it (default 5
// minutes) and how long after a successful SubscribeToShard another call for the same consumer
// and shard gets ResourceInUseException (default 5 seconds). Both run on real time, not on the
// injected clock. A value <= 0 keeps its default.
func WithSubscriptionTiming(lifetime, reuse time.Duration) Option {
	return func(c *config) {
		if lifetime > 0 {
			c.efo.lifetime = lifetime
		}
		if reuse > 0 {
			c.efo.reuse = reuse
		}
	}
}

// WithSubscriptionHeartbeat sets how long a subscription waits with nothing to send before it
// sends an empty event (default 1 second), on real time. A value <= 0 keeps the default.
func WithSubscriptionHeartbeat(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.efo.heartbeat = d
		}
	}
}

// WithoutInitialResponse serves every subscription as kinesis-local and LocalStack do: the event
// stream starts with the first event, without the initial-response message Kinesis sends first,
// and a subscription refused as in use is an HTTP 200 whose stream holds only the exception.
func WithoutInitialResponse() Option {
	return func(c *config) { c.efo.noInitial = true }
}

// efoConfig holds the subscription timings (WithSubscriptionTiming, WithSubscriptionHeartbeat),
// zero meaning the default, and whether the initial response is left out (WithoutInitialResponse).
type efoConfig struct {
	lifetime, reuse, heartbeat time.Duration
	noInitial                  bool
}

// efoState is the fake's consumers and their subscriptions.
type efoState struct {
	mu        sync.Mutex
	consumers map[string]*consumer // by ARN
	once      sync.Once
	client    *kinesis.Client
}

type consumer struct {
	name, arn string
	stream    int
	created   time.Time
	shards    map[string]*shardSub // by shard id
}

// shardSub is what a consumer knows about one shard: its last successful subscription.
type shardSub struct {
	started time.Time // wall clock
	active  *subscription
}

type subscription struct {
	stop     chan struct{} // closed when the subscription is taken over
	stopOnce sync.Once
}

func (s *subscription) takeOver() { s.stopOnce.Do(func() { close(s.stop) }) }

// RegisterConsumer registers an enhanced fan-out consumer of the stream, ACTIVE at once, and
// returns its ARN, arn:aws:kinesis:<region>:<account>:stream/<name>/consumer/<consumer>:<epoch>.
// It panics on an unknown stream or a name already registered on it.
func (f *Fake) RegisterConsumer(streamName, consumerName string) (consumerARN string) {
	now := f.cfg.now()
	f.mu.RLock()
	s := f.mustStream(streamName)
	id, streamARN := s.id, s.arn
	f.mu.RUnlock()
	f.efo.mu.Lock()
	defer f.efo.mu.Unlock()
	for _, c := range f.efo.consumers {
		if c.stream == id && c.name == consumerName {
			panic(fmt.Sprintf("fakekinesis: consumer %q of stream %q already exists", consumerName, streamName))
		}
	}
	if f.efo.consumers == nil {
		f.efo.consumers = map[string]*consumer{}
	}
	c := &consumer{name: consumerName, stream: id, created: now, shards: map[string]*shardSub{},
		arn: fmt.Sprintf("%s/consumer/%s:%d", streamARN, consumerName, now.Unix())}
	f.efo.consumers[c.arn] = c
	return c.arn
}

// RegisterStreamConsumer registers a consumer (ACTIVE at once). A name already registered on the
// stream is a ResourceInUseException, as in Kinesis.
func (f *Fake) RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, &smithy.CanceledError{Err: err}
	}
	if in.StreamARN == nil || in.ConsumerName == nil {
		return nil, wrapSDK("RegisterStreamConsumer", invalidArg("StreamARN and ConsumerName must be provided."))
	}
	f.mu.RLock()
	s, err := f.lookup(nil, in.StreamARN)
	var name string
	if s != nil {
		name = s.name
	}
	f.mu.RUnlock()
	if err != nil {
		return nil, wrapSDK("RegisterStreamConsumer", err)
	}
	if c := f.consumerNamed(s.id, *in.ConsumerName); c != nil {
		return nil, wrapSDK("RegisterStreamConsumer", &types.ResourceInUseException{Message: aws.String(fmt.Sprintf(
			"Consumer %s under stream %s already exists for account %s.", *in.ConsumerName, name, f.cfg.account))})
	}
	arn := f.RegisterConsumer(name, *in.ConsumerName)
	return &kinesis.RegisterStreamConsumerOutput{Consumer: f.describe(arn)}, nil
}

// DescribeStreamConsumer describes a consumer by ARN, or by StreamARN and ConsumerName.
func (f *Fake) DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, &smithy.CanceledError{Err: err}
	}
	var c *consumer
	switch {
	case in.ConsumerARN != nil:
		f.efo.mu.Lock()
		c = f.efo.consumers[*in.ConsumerARN]
		f.efo.mu.Unlock()
	case in.StreamARN != nil && in.ConsumerName != nil:
		f.mu.RLock()
		s, _ := f.lookup(nil, in.StreamARN)
		f.mu.RUnlock()
		if s != nil {
			c = f.consumerNamed(s.id, *in.ConsumerName)
		}
	default:
		return nil, wrapSDK("DescribeStreamConsumer", invalidArg("Either ConsumerARN or both StreamARN and ConsumerName must be provided."))
	}
	if c == nil {
		return nil, wrapSDK("DescribeStreamConsumer", &types.ResourceNotFoundException{Message: aws.String("Consumer not found.")})
	}
	d := f.describe(c.arn)
	return &kinesis.DescribeStreamConsumerOutput{ConsumerDescription: &types.ConsumerDescription{
		ConsumerARN: d.ConsumerARN, ConsumerName: d.ConsumerName, ConsumerStatus: d.ConsumerStatus,
		ConsumerCreationTimestamp: d.ConsumerCreationTimestamp, StreamARN: aws.String(f.streamARN(c.stream)),
	}}, nil
}

func (f *Fake) consumerNamed(stream int, name string) *consumer {
	f.efo.mu.Lock()
	defer f.efo.mu.Unlock()
	for _, c := range f.efo.consumers {
		if c.stream == stream && c.name == name {
			return c
		}
	}
	return nil
}

func (f *Fake) describe(arn string) *types.Consumer {
	f.efo.mu.Lock()
	defer f.efo.mu.Unlock()
	c := f.efo.consumers[arn]
	return &types.Consumer{ConsumerARN: aws.String(c.arn), ConsumerName: aws.String(c.name),
		ConsumerStatus: types.ConsumerStatusActive, ConsumerCreationTimestamp: aws.Time(c.created)}
}

func (f *Fake) streamARN(id int) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.streams[id].arn
}

// SubscribeToShard subscribes a registered consumer to a shard and returns the SDK's event stream:
// the initial response (unless WithoutInitialResponse), then one SubscribeToShardEvent whenever records arrive (or after a second
// without any), each with its ContinuationSequenceNumber and MillisBehindLatest. At the end of a
// closed shard the last event has ChildShards and no ContinuationSequenceNumber, and the stream
// ends. The stream also ends, cleanly, when the subscription's lifetime is over (5 minutes). A
// second call for the same consumer and shard within 5 seconds of a successful one is a
// ResourceInUseException; a later one takes the subscription over, and the old stream ends with a
// ResourceInUseException. An unknown consumer or shard is a ResourceNotFoundException. Faults are
// injected with Inject (OpSubscribeToShard, OpSubscribeToShardEvent).
func (f *Fake) SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
	if err := f.begin(ctx, OpSubscribeToShard, in); err != nil {
		return nil, wrapSDK(OpSubscribeToShard, err)
	}
	// smithy-go's JSON protocol keeps event-stream decoding state in the protocol value, so
	// concurrent subscriptions each need their own.
	fresh := func(o *kinesis.Options) { o.Protocol = awsjson.New11(schemas.Kinesis_20131202) }
	return f.SubscribeClient().SubscribeToShard(ctx, in, append([]func(*kinesis.Options){fresh}, optFns...)...)
}

// SubscribeClient returns a *kinesis.Client whose SubscribeToShard calls the fake serves (its other
// operations are not served), without fault injection at the call: for tests of code that holds
// the SDK's client itself. Unlike the fake's SubscribeToShard, its subscriptions share the
// client's protocol value, as a real client's do.
func (f *Fake) SubscribeClient() *kinesis.Client {
	f.efo.once.Do(func() {
		f.efo.client = kinesis.New(kinesis.Options{
			Region:       f.cfg.region,
			BaseEndpoint: aws.String("http://fakekinesis.invalid"),
			Credentials:  aws.AnonymousCredentials{},
			Retryer:      aws.NopRetryer{},
			HTTPClient:   roundTripper(f.serveSubscribe),
		})
	})
	return f.efo.client
}

type roundTripper func(*http.Request) (*http.Response, error)

func (rt roundTripper) Do(req *http.Request) (*http.Response, error) { return rt(req) }

// subscribeRequest is SubscribeToShard's JSON request body.
type subscribeRequest struct {
	ConsumerARN      *string
	ShardId          *string
	StartingPosition *struct {
		Type           types.ShardIteratorType
		SequenceNumber *string
		Timestamp      *float64 // epoch seconds
	}
}

// serveSubscribe answers one SubscribeToShard request.
func (f *Fake) serveSubscribe(req *http.Request) (*http.Response, error) {
	var in subscribeRequest
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		return errorResponse(req, invalidArg("Malformed request: %v", err)), nil
	}
	_ = req.Body.Close()
	c, pos, err := f.startSubscription(&in)
	var iu *types.ResourceInUseException
	if err != nil && f.cfg.efo.noInitial && errors.As(err, &iu) {
		// As kinesis-local refuses it: HTTP 200, and the exception as the stream's only message.
		var body bytes.Buffer
		_ = writeException(eventstream.NewEncoder(), &body, iu)
		return &http.Response{
			StatusCode: http.StatusOK, Proto: "HTTP/2.0", ProtoMajor: 2,
			Header: http.Header{"Content-Type": {"application/vnd.amazon.eventstream"}},
			Body:   io.NopCloser(&body), Request: req,
		}, nil
	}
	if err != nil {
		return errorResponse(req, err), nil
	}
	pr, pw := io.Pipe()
	body := &subBody{PipeReader: pr, closed: make(chan struct{})}
	go f.stream(req.Context(), c, pos, pw, body.closed)
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/2.0", ProtoMajor: 2,
		Header:  http.Header{"Content-Type": {"application/vnd.amazon.eventstream"}},
		Body:    body,
		Request: req,
	}, nil
}

// subBody is the response body; closing it (the client's Close) ends the subscription.
type subBody struct {
	*io.PipeReader
	once   sync.Once
	closed chan struct{}
}

func (b *subBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return b.PipeReader.Close()
}

// subStart is where a new subscription begins.
type subStart struct {
	sub    *subscription
	stream int
	shard  int
	pos    int // absolute record position, as in iterators
}

func (f *Fake) startSubscription(in *subscribeRequest) (*consumer, subStart, error) {
	if in.ConsumerARN == nil || in.ShardId == nil || in.StartingPosition == nil {
		return nil, subStart{}, invalidArg("ConsumerARN, ShardId and StartingPosition must be provided.")
	}
	f.efo.mu.Lock()
	c := f.efo.consumers[*in.ConsumerARN]
	f.efo.mu.Unlock()
	if c == nil {
		return nil, subStart{}, &types.ResourceNotFoundException{Message: aws.String(fmt.Sprintf(
			"Consumer %s under account %s not found.", *in.ConsumerARN, f.cfg.account))}
	}
	sp := in.StartingPosition
	gi := &kinesis.GetShardIteratorInput{StreamARN: aws.String(f.streamARN(c.stream)), ShardId: in.ShardId,
		ShardIteratorType: sp.Type, StartingSequenceNumber: sp.SequenceNumber}
	if sp.Timestamp != nil {
		// Epoch seconds with milliseconds, Kinesis' precision: read as a float64 the fraction
		// is off by tens of nanoseconds (946684800.1 is 100.000023 ms), which would leave out
		// the records that arrived at that very millisecond.
		gi.Timestamp = aws.Time(time.UnixMilli(int64(math.Round(*sp.Timestamp * 1000))))
	}
	out, err := f.getShardIterator(gi)
	if err != nil {
		return nil, subStart{}, err
	}
	it, _ := decodeIterator(*out.ShardIterator)

	now := time.Now()
	f.efo.mu.Lock()
	defer f.efo.mu.Unlock()
	ss := c.shards[*in.ShardId]
	if ss == nil {
		ss = &shardSub{}
		c.shards[*in.ShardId] = ss
	}
	if ss.active != nil && now.Sub(ss.started) < f.subReuse() {
		return nil, subStart{}, &types.ResourceInUseException{Message: aws.String(fmt.Sprintf(
			"Another active subscription exists for consumer %s on shard %s.", c.arn, *in.ShardId))}
	}
	if ss.active != nil {
		ss.active.takeOver()
	}
	ss.started, ss.active = now, &subscription{stop: make(chan struct{})}
	return c, subStart{sub: ss.active, stream: it.stream, shard: it.shard, pos: it.pos}, nil
}

func (f *Fake) subReuse() time.Duration { return cmpOr(f.cfg.efo.reuse, defaultSubscribeReuse) }

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// stream writes the subscription's messages to w until the shard ends, the lifetime is over, the
// subscription is taken over, the client closes the body or ctx ends.
func (f *Fake) stream(ctx context.Context, c *consumer, st subStart, w *io.PipeWriter, closed <-chan struct{}) {
	enc := eventstream.NewEncoder()
	codec := awsjson.New11(schemas.Kinesis_20131202) // its encoder has state: one per stream
	// failure is how the stream ends; nil: cleanly.
	var failure error
	defer func() {
		if failure != nil && !errors.Is(failure, ErrDropped) {
			var ae smithy.APIError
			if errors.As(failure, &ae) {
				_ = writeException(enc, w, ae)
				failure = nil
			}
		}
		if failure != nil {
			_ = w.CloseWithError(failure)
		} else {
			_ = w.Close()
		}
	}()
	if !f.cfg.efo.noInitial {
		initial := eventstream.Message{Payload: []byte("{}")}
		initial.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue(eventstream.EventMessageType))
		initial.Headers.Set(eventstream.EventTypeHeader, eventstream.StringValue("initial-response"))
		initial.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue("application/json"))
		if err := enc.Encode(w, initial); err != nil {
			return
		}
	}
	lifetime := time.NewTimer(cmpOr(f.cfg.efo.lifetime, defaultSubscriptionLifetime))
	defer lifetime.Stop()
	beat := cmpOr(f.cfg.efo.heartbeat, defaultHeartbeat)
	heartbeat := time.NewTimer(beat)
	defer heartbeat.Stop()
	pos, sentOnce := st.pos, false
	for {
		ev, next, wake, err := f.nextEvent(st, pos)
		if err != nil {
			failure = err
			return
		}
		if ev != nil && (len(ev.Records) > 0 || ev.ChildShards != nil || !sentOnce) {
			if fn := f.injector.Load(); fn != nil {
				if err := (*fn)(OpSubscribeToShardEvent, &SubscriptionEvent{Context: ctx, Event: ev}); err != nil {
					failure = err
					return
				}
			}
			f.calls[opIndex(OpSubscribeToShardEvent)].Add(1)
			if err := codec.SerializeEventMessage(schemas.SubscribeToShardEventStream,
				schemas.SubscribeToShardEventStream_SubscribeToShardEvent, ev, w); err != nil {
				return // the client closed the body
			}
			pos, sentOnce = next, true
			if ev.ChildShards != nil {
				return // the shard's end: the stream ends cleanly
			}
			heartbeat.Reset(beat)
			continue
		}
		select {
		case <-wake:
		case <-heartbeat.C:
			sentOnce = false // send an empty event
			heartbeat.Reset(beat)
		case <-lifetime.C:
			return
		case <-st.sub.stop:
			failure = &types.ResourceInUseException{Message: aws.String(fmt.Sprintf(
				"Subscription for consumer %s on shard %s was taken over by a newer one.", c.arn, shardName(st.shard)))}
			return
		case <-closed:
			return
		case <-ctx.Done():
			return
		}
	}
}

// nextEvent builds the event from pos: records up to the event limits, or none. wake is closed
// when something changes on the stream; it is nil when ev should be sent.
func (f *Fake) nextEvent(st subStart, pos int) (ev *types.SubscribeToShardEvent, next int, wake <-chan struct{}, err error) {
	now := f.cfg.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.streams[st.stream]
	if st.shard >= len(s.shards) || s.shards[st.shard] == nil {
		return nil, 0, nil, f.shardNotFound(shardName(st.shard), s.name)
	}
	sh := s.shards[st.shard]
	start := min(max(pos-sh.base, 0), len(sh.recs))
	end, bytes := start, 0
	for end < len(sh.recs) && end-start < maxEventRecords {
		if bytes += len(sh.recs[end].Data); bytes > maxEventBytes && end > start {
			break
		}
		end++
	}
	ev = &types.SubscribeToShardEvent{Records: make([]types.Record, end-start), MillisBehindLatest: aws.Int64(0)}
	copy(ev.Records, sh.recs[start:end])
	if end < len(sh.recs) {
		ev.MillisBehindLatest = aws.Int64(max(now.Sub(*sh.recs[end-1].ApproximateArrivalTimestamp).Milliseconds(), 1))
	}
	switch {
	case sh.endSeq != nil && end == len(sh.recs):
		ev.ChildShards = append([]types.ChildShard{}, sh.children...)
	case end > 0:
		ev.ContinuationSequenceNumber = sh.recs[end-1].SequenceNumber
	default:
		ev.ContinuationSequenceNumber = aws.String(sh.startSeq)
	}
	if end == start && ev.ChildShards == nil {
		if s.wake == nil {
			s.wake = make(chan struct{})
		}
		wake = s.wake
	}
	return ev, sh.base + end, wake, nil
}

// wakeSubscribers tells waiting subscriptions that the stream changed. The caller holds f.mu.
func (s *stream) wakeSubscribers() {
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}

func writeException(enc *eventstream.Encoder, w io.Writer, ae smithy.APIError) error {
	payload, _ := json.Marshal(map[string]string{"message": ae.ErrorMessage()})
	msg := eventstream.Message{Payload: payload}
	msg.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue(eventstream.ExceptionMessageType))
	msg.Headers.Set(eventstream.ExceptionTypeHeader, eventstream.StringValue(ae.ErrorCode()))
	msg.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue("application/json"))
	return enc.Encode(w, msg)
}

// errorResponse is the JSON error response Kinesis sends for a failed call.
func errorResponse(req *http.Request, err error) *http.Response {
	code, msg, status := "InternalFailure", err.Error(), http.StatusInternalServerError
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code, msg = ae.ErrorCode(), ae.ErrorMessage()
		if ae.ErrorFault() != smithy.FaultServer {
			status = http.StatusBadRequest
		}
	}
	body, _ := json.Marshal(map[string]string{"__type": code, "message": msg})
	return &http.Response{
		StatusCode: status, Proto: "HTTP/2.0", ProtoMajor: 2,
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.1"}, "X-Amzn-Errortype": {code}},
		Body:          io.NopCloser(strings.NewReader(string(body))),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
