// Package kinesis is the Kinesis source of an event source mapping: a stream read with GetRecords
// (polling) or through an enhanced fan-out consumer (SubscribeToShard), behind poller.Source.
// Everything the engine must know of Kinesis is here: its ARNs, ListShards and the shards' two
// parents, shard iterators and their positions, the errors of a read and what they mean, the
// retention period, the limits (10,000 records a read, five reads a second per shard).
package kinesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/source"
)

// API is the part of the Kinesis client a stream is read with. *kinesis.Client has it.
type API interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
	// DescribeStreamSummary gives the stream's retention period (Retention).
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// SubscribeAPI is the part of the Kinesis client an enhanced fan-out mapping reads with, besides
// API. *kinesis.Client has it.
type SubscribeAPI interface {
	SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error)
}

// Limits of Kinesis.
const (
	// MaxRecordsPerRead is the most records one GetRecords returns.
	MaxRecordsPerRead = 10000
	// MinPollSpacing: Kinesis allows five GetRecords a second per shard.
	MinPollSpacing = 200 * time.Millisecond
)

// EventSource is the events' eventSource.
const EventSource = "aws:kinesis"

// Stream is a Kinesis stream as a mapping reads it: a poller.Source. Create it with New.
type Stream struct {
	api      API
	reads    API  // api, or api on the lean GetRecords path (client.go)
	sdkReads bool // WithSDKGetRecords
	arn      StreamARN
	id       source.Identity
	consumer string // the enhanced fan-out consumer's ARN; "" when polling
	subOpts  []func(*kinesis.Options)
	tail     []byte // of every record object in its events (event.go)
}

// Option configures New.
type Option func(*Stream)

// WithConsumer reads the stream through its enhanced fan-out consumer consumerARN
// (arn:aws:kinesis:<region>:<account>:stream/<name>/consumer/<consumer>:<creation epoch seconds>)
// with SubscribeToShard: the client must implement SubscribeAPI. "" polls.
func WithConsumer(consumerARN string) Option { return func(s *Stream) { s.consumer = consumerARN } }

// WithInvokeIdentity sets the events' invokeIdentityArn: the function's execution role. Default
// arn:<partition>:iam::<stream account>:role/esm.
func WithInvokeIdentity(roleARN string) Option {
	return func(s *Stream) { s.id.InvokeIdentityARN = roleARN }
}

// WithSubscribeOptions adds client options to every SubscribeToShard call (after esm's own).
func WithSubscribeOptions(fns ...func(*kinesis.Options)) Option {
	return func(s *Stream) { s.subOpts = append(s.subOpts, fns...) }
}

// New returns the stream streamARN read with api. An enhanced fan-out consumer's ARN given as
// streamARN (as Lambda's EventSourceArn may be) reads through that consumer. An ARN Lambda would
// refuse is a *source.ValidationError (wrapping source.ErrInvalidConfig) naming EventSourceArn or
// ConsumerARN; New makes no call. A Stream without a client (api nil) only names the events of the
// stream (poller.NewBatchEncoder): poller.New refuses it.
func New(api API, streamARN string, opts ...Option) (*Stream, error) {
	s := &Stream{api: api}
	for _, o := range opts {
		o(s)
	}
	stream, consumer, err := ParseSource(streamARN, s.consumer)
	if err != nil {
		return nil, err
	}
	if _, ok := api.(SubscribeAPI); api != nil && consumer != "" && !ok {
		return nil, &ValidationError{Field: "ConsumerARN", Message: fmt.Sprintf(
			"kinesis: ConsumerARN %s needs a Kinesis client with SubscribeToShard (SubscribeAPI)", consumer)}
	}
	s.arn, s.consumer = stream, consumer
	if api != nil {
		s.reads = s.reader()
	}
	s.id.ARN, s.id.Name, s.id.EventSource = stream.String(), stream.Name, EventSource
	s.id.Partition, s.id.Region, s.id.Account = stream.Partition, stream.Region, stream.Account
	if s.id.InvokeIdentityARN == "" {
		s.id.InvokeIdentityARN = fmt.Sprintf("arn:%s:iam::%s:role/esm", stream.Partition, stream.Account)
	}
	s.tail = eventTail(s.id)
	return s, nil
}

// Identity is the stream's ARN, region and account, and the events' eventSource and
// invokeIdentityArn.
func (s *Stream) Identity() source.Identity { return s.id }

// Limits are Kinesis' limits: 10,000 records a read, five reads a second per shard.
func (s *Stream) Limits() source.Limits {
	return source.Limits{MaxRecordsPerRead: MaxRecordsPerRead, MinPollSpacing: MinPollSpacing}
}

// ARN is the parsed stream ARN.
func (s *Stream) ARN() StreamARN { return s.arn }

// ConsumerARN is the enhanced fan-out consumer the stream is read through; "" when polled.
func (s *Stream) ConsumerARN() string { return s.consumer }

// Client is the Kinesis client the stream's shards are read with: the client New was given, on
// the lean GetRecords path when it is the SDK's own (see WithSDKGetRecords).
func (s *Stream) Client() API { return s.reads }

// SubscribeOptions are the client options given to every SubscribeToShard (WithSubscribeOptions).
func (s *Stream) SubscribeOptions() []func(*kinesis.Options) { return s.subOpts }

// ShardsOf are listed shards as the engine sees them.
func ShardsOf(listed []types.Shard) []source.Shard {
	out := make([]source.Shard, len(listed))
	for i := range listed {
		out[i] = shardOf(&listed[i])
	}
	return out
}

// Shards lists every shard of the stream (open and closed), following pages. A stream that does
// not exist is an error wrapping source.ErrNotFound.
func (s *Stream) Shards(ctx context.Context) ([]source.Shard, error) {
	listed, err := ListShards(ctx, s.api, s.id.ARN)
	if err != nil {
		return nil, err
	}
	return ShardsOf(listed), nil
}

// ListShards returns every shard of the stream (open and closed) as Kinesis lists them, following
// pages. A stream that does not exist is an error wrapping source.ErrNotFound.
func ListShards(ctx context.Context, api API, streamARN string) ([]types.Shard, error) {
	var all []types.Shard
	in := &kinesis.ListShardsInput{StreamARN: &streamARN}
	for {
		out, err := api.ListShards(ctx, in)
		if err != nil {
			var nf *types.ResourceNotFoundException
			if errors.As(err, &nf) {
				return nil, fmt.Errorf("%w: %s: %w", source.ErrNotFound, streamARN, err)
			}
			return nil, fmt.Errorf("list shards of %s: %w", streamARN, err)
		}
		all = append(all, out.Shards...)
		if out.NextToken == nil || *out.NextToken == "" {
			return all, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// shardOf is a listed shard as the engine sees it.
func shardOf(s *types.Shard) source.Shard {
	sh := source.Shard{ID: aws.ToString(s.ShardId), Parents: parentsOf(s.ParentShardId, s.AdjacentParentShardId),
		Closed: s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil}
	if s.HashKeyRange != nil {
		sh.StartingHashKey, sh.EndingHashKey = aws.ToString(s.HashKeyRange.StartingHashKey), aws.ToString(s.HashKeyRange.EndingHashKey)
	}
	if r := s.SequenceNumberRange; r != nil {
		sh.StartingSequenceNumber, sh.EndingSequenceNumber = aws.ToString(r.StartingSequenceNumber), aws.ToString(r.EndingSequenceNumber)
	}
	return sh
}

// Children are the ChildShards of a shard's end as the engine sees them.
func Children(children []types.ChildShard) []source.Shard {
	if len(children) == 0 {
		return nil
	}
	out := make([]source.Shard, len(children))
	for i, ch := range children {
		out[i] = source.Shard{ID: aws.ToString(ch.ShardId), Parents: ch.ParentShards}
		if ch.HashKeyRange != nil {
			out[i].StartingHashKey, out[i].EndingHashKey = aws.ToString(ch.HashKeyRange.StartingHashKey), aws.ToString(ch.HashKeyRange.EndingHashKey)
		}
	}
	return out
}

func parentsOf(parent, adjacent *string) []string {
	var ps []string
	for _, p := range []*string{parent, adjacent} {
		if p != nil && *p != "" {
			ps = append(ps, *p)
		}
	}
	return ps
}

// Retention is the stream's retention period (DescribeStreamSummary's RetentionPeriodHours); 0
// when Kinesis gives none.
func (s *Stream) Retention(ctx context.Context) (time.Duration, error) {
	out, err := s.api.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamARN: aws.String(s.id.ARN)})
	if err != nil {
		return 0, err
	}
	return time.Duration(max(aws.ToInt32(out.StreamDescriptionSummary.RetentionPeriodHours), 0)) * time.Hour, nil
}

// Classify wraps err, an error of a Kinesis read, in the source error class it is of
// (source.ErrThrottled, ErrExpired, ErrInvalidPosition, ErrInUse, ErrNotFound); any other error
// comes back as it is: transient.
func Classify(err error) error {
	var (
		throttled *types.ProvisionedThroughputExceededException
		expired   *types.ExpiredIteratorException
		invalid   *types.InvalidArgumentException
		inUse     *types.ResourceInUseException
		notFound  *types.ResourceNotFoundException
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &throttled):
		return classified{source.ErrThrottled, err}
	case errors.As(err, &expired):
		return classified{source.ErrExpired, err}
	case errors.As(err, &invalid):
		return classified{source.ErrInvalidPosition, err}
	case errors.As(err, &inUse):
		return classified{source.ErrInUse, err}
	case errors.As(err, &notFound):
		return classified{source.ErrNotFound, err}
	}
	return err
}

// classified is a Kinesis error in its class: its text is Kinesis'.
type classified struct{ class, err error }

func (c classified) Error() string   { return c.err.Error() }
func (c classified) Unwrap() []error { return []error{c.class, c.err} }

// Open returns a shard iterator of the shard at at.
func (s *Stream) Open(ctx context.Context, shardID string, at source.Position) (string, error) {
	out, err := s.api.GetShardIterator(ctx, IteratorInput(s.id.ARN, shardID, at))
	if err != nil {
		return "", Classify(err)
	}
	return aws.ToString(out.ShardIterator), nil
}

// IteratorInput is the GetShardIterator request of the shard at pos.
func IteratorInput(streamARN, shardID string, pos source.Position) *kinesis.GetShardIteratorInput {
	in := &kinesis.GetShardIteratorInput{StreamARN: &streamARN, ShardId: &shardID, ShardIteratorType: types.ShardIteratorType(pos.Type)}
	if pos.SequenceNumber != "" {
		in.StartingSequenceNumber = aws.String(pos.SequenceNumber)
	}
	if pos.Type == source.AtTimestamp {
		in.Timestamp = aws.Time(pos.Timestamp)
	}
	return in
}

// Read reads up to limit records of the shard shardID at iterator (GetRecords; Kinesis needs only
// the iterator: the end of a shard carries its ChildShards).
func (s *Stream) Read(ctx context.Context, shardID, iterator string, limit int) (source.Page, error) {
	out, err := s.reads.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: &iterator, Limit: aws.Int32(int32(limit))})
	if err != nil {
		return source.Page{}, Classify(err)
	}
	return PageOf(out), nil
}

// PageOf is a GetRecords answer as the engine sees it.
func PageOf(out *kinesis.GetRecordsOutput) source.Page {
	return source.Page{Records: Records(out.Records), Next: aws.ToString(out.NextShardIterator),
		Children: Children(out.ChildShards), MillisBehind: aws.ToInt64(out.MillisBehindLatest)}
}

// Records are Kinesis records as the engine sees them.
func Records(recs []types.Record) []source.Record {
	if len(recs) == 0 {
		return nil
	}
	out := make([]source.Record, len(recs))
	for i := range recs {
		r := &recs[i]
		out[i] = source.Record{SequenceNumber: aws.ToString(r.SequenceNumber), PartitionKey: aws.ToString(r.PartitionKey), Data: r.Data}
		if r.ApproximateArrivalTimestamp != nil {
			out[i].ArrivalTime = *r.ApproximateArrivalTimestamp
		}
	}
	return out
}

// MustNew is New that panics when New refuses the ARNs: for ARNs known to be valid, as
// regexp.MustCompile is for patterns.
func MustNew(api API, streamARN string, opts ...Option) *Stream {
	s, err := New(api, streamARN, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// Readable reports why the stream cannot be read: it has no client (New's api was nil: it only
// names the events of the stream). poller.New refuses such a stream with this error.
func (s *Stream) Readable() error {
	if s.api == nil {
		return &ValidationError{Field: "Client", Message: "kinesis: the stream has no client (New was given none): it names its events but cannot be read"}
	}
	return nil
}
