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

	"github.com/kinesis-esm/esm/source"
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

// shardOf is a listed shard as the engine sees it: a DynamoDB stream's shard has at most one
// parent (shards split but never merge), and is closed once it has an ending sequence number.
func shardOf(s types.Shard) source.Shard {
	sh := source.Shard{ID: aws.ToString(s.ShardId)}
	if p := aws.ToString(s.ParentShardId); p != "" {
		sh.Parents = []string{p}
	}
	sh.Closed = s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil
	return sh
}

// ListShards returns every shard of the stream (open and closed, in DescribeStream's order),
// following its pages of 100. A stream that does not exist is an error wrapping
// source.ErrNotFound.
func ListShards(ctx context.Context, api API, streamARN string) ([]source.Shard, error) {
	return describe(ctx, api, streamARN, nil)
}

// Children returns the children of a closed shard, found with DescribeStream's ShardFilter
// CHILD_SHARDS: how a reader that read a shard to its end learns what follows it (GetRecords
// returns no ChildShards). A shard closed a moment ago may have none listed yet.
func Children(ctx context.Context, api API, streamARN, parent string) ([]source.Shard, error) {
	return describe(ctx, api, streamARN, &types.ShardFilter{Type: types.ShardFilterTypeChildShards, ShardId: aws.String(parent)})
}

func describe(ctx context.Context, api API, streamARN string, filter *types.ShardFilter) ([]source.Shard, error) {
	var all []source.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(streamARN), Limit: aws.Int32(describePage), ShardFilter: filter}
	for {
		out, err := api.DescribeStream(ctx, in)
		if err != nil {
			var nf *types.ResourceNotFoundException
			if errors.As(err, &nf) {
				return nil, fmt.Errorf("%w: %s: %w", source.ErrNotFound, streamARN, err)
			}
			return nil, fmt.Errorf("describe stream %s: %w", streamARN, classify(err))
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

// iteratorInput is the GetShardIterator request of the shard at pos. AT_TIMESTAMP is the API's
// since 2026-10; Lambda refuses it as a mapping's StartingPosition, and the engine asks for it only
// to resume a LATEST start that has read nothing yet.
func iteratorInput(streamARN, shardID string, pos source.Position) *dynamodbstreams.GetShardIteratorInput {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(streamARN), ShardId: aws.String(shardID),
		ShardIteratorType: types.ShardIteratorType(pos.Type)}
	switch pos.Type {
	case source.AfterSequenceNumber, source.AtSequenceNumber:
		in.SequenceNumber = aws.String(pos.SequenceNumber)
	case source.AtTimestamp:
		in.Timestamp = aws.Time(pos.Timestamp)
	}
	return in
}

func describePosition(p source.Position) string {
	switch p.Type {
	case source.AfterSequenceNumber, source.AtSequenceNumber:
		return string(p.Type) + " " + p.SequenceNumber
	case source.AtTimestamp:
		return string(p.Type) + " " + p.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	return string(p.Type)
}

// errTrimmed marks TrimmedDataAccessException: the position lies before the 24-hour trim point,
// and what was there is gone. Open answers it by opening at TRIM_HORIZON; a read answers it as an
// expired iterator (the engine opens again after the last record read, and Open then finds it
// trimmed).
var errTrimmed = errors.New("position trimmed from the stream")

// classify wraps err, an error of a DynamoDB Streams call, in its class: source.ErrThrottled
// (LimitExceededException), source.ErrExpired (ExpiredIteratorException), errTrimmed
// (TrimmedDataAccessException), source.ErrInvalidPosition (ValidationException: a sequence number
// of another shard or stream). Any other error comes back as it is: transient (InternalServerError,
// a 5xx, the network; ResourceNotFoundException, which Open takes as a shard trimmed away).
func classify(err error) error {
	var (
		throttled *types.LimitExceededException
		expired   *types.ExpiredIteratorException
		trimmed   *types.TrimmedDataAccessException
		api       smithy.APIError
	)
	switch {
	case errors.As(err, &throttled):
		return classified{source.ErrThrottled, err}
	case errors.As(err, &expired):
		return classified{source.ErrExpired, err}
	case errors.As(err, &trimmed):
		return classified{errTrimmed, err}
	case errors.As(err, &api) && api.ErrorCode() == "ValidationException":
		return classified{source.ErrInvalidPosition, err}
	}
	return err
}

// classified is an error of DynamoDB Streams in its class: its text is the service's.
type classified struct{ class, err error }

func (c classified) Error() string   { return c.err.Error() }
func (c classified) Unwrap() []error { return []error{c.class, c.err} }
