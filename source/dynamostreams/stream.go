package dynamostreams

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"

	"github.com/kinesis-esm/esm/poller"
)

// API is what the source calls of DynamoDB Streams: *dynamodbstreams.Client has it, and so do
// the fakes.
type API interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// Limits of DynamoDB Streams and of Lambda's reading of it.
const (
	// MaxRecordsPerRead is GetRecords' Limit at most (a call also returns at most 1 MB).
	MaxRecordsPerRead = 1000
	// describePage is DescribeStream's Limit at most: shards per page.
	describePage = 100
	// PollInterval is Lambda's pace: each shard is polled four times a second.
	PollInterval = 250 * time.Millisecond
	// IteratorLifetime is how long a shard iterator may be used (Kinesis': 5 minutes).
	IteratorLifetime = 15 * time.Minute
	// Retention is how long a stream keeps its records: the trim point is 24 hours back.
	Retention = 24 * time.Hour
	// MaxReadersPerShard is how many processes may read one shard at once before DynamoDB
	// Streams throttles them (LimitExceededException).
	MaxReadersPerShard = 2
)

// Shard is one shard of the stream as DescribeStream lists it: a DynamoDB stream's shard has at
// most one parent (shards split but never merge), and is closed once it has an ending sequence
// number.
type Shard struct {
	ID, Parent string
	// Start is the first sequence number of the shard; End is its last, set once it is closed.
	Start, End string
}

// Closed reports whether the shard takes no more records: reading it to its end ends it.
func (s Shard) Closed() bool { return s.End != "" }

func shardOf(s types.Shard) Shard {
	sh := Shard{ID: aws.ToString(s.ShardId), Parent: aws.ToString(s.ParentShardId)}
	if r := s.SequenceNumberRange; r != nil {
		sh.Start, sh.End = aws.ToString(r.StartingSequenceNumber), aws.ToString(r.EndingSequenceNumber)
	}
	return sh
}

// ListShards returns every shard of the stream (open and closed, in DescribeStream's order),
// following its pages of 100. A stream that does not exist is poller.ErrStreamNotFound.
func ListShards(ctx context.Context, api API, streamARN string) ([]Shard, error) {
	return describe(ctx, api, streamARN, nil)
}

// Children returns the children of a closed shard, found with DescribeStream's ShardFilter
// CHILD_SHARDS: how a reader that read a shard to its end learns what follows it (GetRecords
// returns no ChildShards). A shard closed a moment ago may have none listed yet.
func Children(ctx context.Context, api API, streamARN, parent string) ([]Shard, error) {
	return describe(ctx, api, streamARN, &types.ShardFilter{Type: types.ShardFilterTypeChildShards, ShardId: aws.String(parent)})
}

func describe(ctx context.Context, api API, streamARN string, filter *types.ShardFilter) ([]Shard, error) {
	var all []Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(streamARN), Limit: aws.Int32(describePage), ShardFilter: filter}
	for {
		out, err := api.DescribeStream(ctx, in)
		if err != nil {
			var nf *types.ResourceNotFoundException
			if errors.As(err, &nf) {
				return nil, fmt.Errorf("%w: %s: %w", poller.ErrStreamNotFound, streamARN, err)
			}
			return nil, fmt.Errorf("describe stream %s: %w", streamARN, err)
		}
		if out.StreamDescription == nil {
			return all, nil
		}
		for _, s := range out.StreamDescription.Shards {
			all = append(all, shardOf(s))
		}
		last := out.StreamDescription.LastEvaluatedShardId
		if last == nil || *last == "" {
			return all, nil
		}
		in = &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(streamARN), Limit: aws.Int32(describePage),
			ShardFilter: filter, ExclusiveStartShardId: last}
	}
}

// Position is where an iterator opens: TRIM_HORIZON, LATEST, AFTER_SEQUENCE_NUMBER (Seq) or
// AT_TIMESTAMP (Time; the API has it since 2026-10, but Lambda refuses it as a mapping's
// StartingPosition: the reader uses it only to resume a LATEST start that read nothing yet).
type Position struct {
	Kind types.ShardIteratorType
	Seq  string
	Time time.Time
}

// Open returns an iterator of the shard at pos. A position behind the 24-hour trim point is
// reported as ErrTrimmed (the caller reopens at TRIM_HORIZON: what lay before is gone), a shard
// the stream no longer has as ErrShardGone.
func Open(ctx context.Context, api API, streamARN, shardID string, pos Position) (string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(streamARN), ShardId: aws.String(shardID), ShardIteratorType: pos.Kind}
	switch pos.Kind {
	case types.ShardIteratorTypeAfterSequenceNumber, types.ShardIteratorTypeAtSequenceNumber:
		in.SequenceNumber = aws.String(pos.Seq)
	case types.ShardIteratorTypeAtTimestamp:
		in.Timestamp = aws.Time(pos.Time)
	}
	out, err := api.GetShardIterator(ctx, in)
	if err != nil {
		return "", classify(fmt.Errorf("open shard %s at %s: %w", shardID, pos, err))
	}
	return aws.ToString(out.ShardIterator), nil
}

func (p Position) String() string {
	switch p.Kind {
	case types.ShardIteratorTypeAfterSequenceNumber, types.ShardIteratorTypeAtSequenceNumber:
		return string(p.Kind) + " " + p.Seq
	case types.ShardIteratorTypeAtTimestamp:
		return string(p.Kind) + " " + p.Time.UTC().Format(time.RFC3339Nano)
	}
	return string(p.Kind)
}

// Batch is one GetRecords answer. Next is the iterator of the next call; Ended means the shard
// is closed and read to its end (DynamoDB Streams answers a null NextShardIterator, and no
// ChildShards: Children finds them).
type Batch struct {
	Records []types.Record
	Next    string
	Ended   bool
}

// Read calls GetRecords once, for at most limit records (at most MaxRecordsPerRead; the service
// also stops at 1 MB). Errors are classified (see classify).
func Read(ctx context.Context, api API, iterator string, limit int) (Batch, error) {
	limit = min(max(limit, 1), MaxRecordsPerRead)
	out, err := api.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(iterator), Limit: aws.Int32(int32(limit))})
	if err != nil {
		return Batch{}, classify(fmt.Errorf("get records: %w", err))
	}
	b := Batch{Records: out.Records, Next: aws.ToString(out.NextShardIterator)}
	b.Ended = out.NextShardIterator == nil
	return b, nil
}

// What a failed call means for the reader; each error Open and Read return wraps at most one.
var (
	// ErrThrottled: LimitExceededException (too many readers or calls): back off, same iterator.
	ErrThrottled = errors.New("DynamoDB Streams throttled the call")
	// ErrExpiredIterator: the iterator is older than 15 minutes: open again after the last
	// record read.
	ErrExpiredIterator = errors.New("shard iterator expired")
	// ErrTrimmed: the position lies before the 24-hour trim point (TrimmedDataAccessException):
	// the records there are gone; open at TRIM_HORIZON.
	ErrTrimmed = errors.New("position trimmed from the stream")
	// ErrShardGone: the stream has no such shard any more (ResourceNotFoundException): a closed
	// shard trimmed away, or the stream deleted; the shard counts as finished.
	ErrShardGone = errors.New("shard not found")
	// ErrInvalidPosition: the request itself is refused (ValidationException, e.g. a sequence
	// number of another stream): retrying cannot help, the mapping stops naming the shard.
	ErrInvalidPosition = errors.New("invalid position")
)

// classify wraps err with the condition it is, when it is one of them; other errors (5xx,
// InternalServerError, the network) are transient and stay as they are.
func classify(err error) error {
	var (
		throttled *types.LimitExceededException
		expired   *types.ExpiredIteratorException
		trimmed   *types.TrimmedDataAccessException
		gone      *types.ResourceNotFoundException
		api       smithy.APIError
	)
	switch {
	case errors.As(err, &throttled):
		return fmt.Errorf("%w: %w", ErrThrottled, err)
	case errors.As(err, &expired):
		return fmt.Errorf("%w: %w", ErrExpiredIterator, err)
	case errors.As(err, &trimmed):
		return fmt.Errorf("%w: %w", ErrTrimmed, err)
	case errors.As(err, &gone):
		return fmt.Errorf("%w: %w", ErrShardGone, err)
	case errors.As(err, &api) && api.ErrorCode() == "ValidationException":
		return fmt.Errorf("%w: %w", ErrInvalidPosition, err)
	}
	return err
}
