package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/kinesis-esm/esm/internal/ctxwait"
)

// KinesisAPI is the part of the Kinesis client a redrive reads records with.
type KinesisAPI interface {
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// TrimmedError reports a range that retention has trimmed, wholly or in part: its records can no
// longer be read, so the message is kept.
type TrimmedError struct {
	ShardID, Start, End string
	// FirstAvailable is the first record still in the shard at or after Start ("" when the shard
	// itself is gone, or none is).
	FirstAvailable string
}

func (e *TrimmedError) Error() string {
	switch {
	case e.FirstAvailable == "":
		return fmt.Sprintf("records %s-%s of %s are trimmed by retention: the shard holds none of them any more", e.Start, e.End, e.ShardID)
	case compareSeq(e.FirstAvailable, e.End) > 0:
		return fmt.Sprintf("records %s-%s of %s are trimmed by retention: the shard's oldest record is now %s", e.Start, e.End, e.ShardID, e.FirstAvailable)
	}
	return fmt.Sprintf("records %s-%s of %s are partly trimmed by retention: the oldest left is %s", e.Start, e.End, e.ShardID, e.FirstAvailable)
}

// Limits of one fetch.
const (
	// getRecordsLimit is the most records one GetRecords call asks for (Kinesis's maximum).
	getRecordsLimit = 10000
	// readSpacing is the least time between two GetRecords calls on one shard: Kinesis allows
	// five per second.
	readSpacing = 200 * time.Millisecond
	// readAttempts bounds how often a throttled or failing read is tried.
	readAttempts = 6
	// emptyReads bounds how many empty responses in a row a fetch accepts while the shard reports
	// records behind them.
	emptyReads = 50
)

// fetch reads exactly the records of shardID from start to end (inclusive): an iterator
// AT_SEQUENCE_NUMBER start, then GetRecords until a record past end. A range whose first record
// is no longer there is a *TrimmedError.
func fetch(ctx context.Context, kin KinesisAPI, streamARN, shardID, start, end string) ([]types.Record, error) {
	iter, err := shardIterator(ctx, kin, streamARN, shardID, types.ShardIteratorTypeAtSequenceNumber, start)
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, &TrimmedError{ShardID: shardID, Start: start, End: end}
		}
		return nil, err
	}
	var recs []types.Record
	empty := 0
	for call := 0; ; call++ {
		if call > 0 && !ctxwait.Sleep(ctx, readSpacing) {
			return nil, ctx.Err()
		}
		out, err := getRecords(ctx, kin, iter)
		var expired *types.ExpiredIteratorException
		switch {
		case errors.As(err, &expired): // a slow function between reads: reopen where we were
			typ, seq := types.ShardIteratorTypeAtSequenceNumber, start
			if len(recs) > 0 {
				typ, seq = types.ShardIteratorTypeAfterSequenceNumber, aws.ToString(recs[len(recs)-1].SequenceNumber)
			}
			if iter, err = shardIterator(ctx, kin, streamARN, shardID, typ, seq); err != nil {
				return nil, err
			}
			continue
		case err != nil:
			var nf *types.ResourceNotFoundException
			if errors.As(err, &nf) {
				return nil, &TrimmedError{ShardID: shardID, Start: start, End: end}
			}
			return nil, err
		}
		for _, r := range out.Records {
			seq := aws.ToString(r.SequenceNumber)
			if len(recs) == 0 && seq != start {
				if compareSeq(seq, start) > 0 {
					return nil, &TrimmedError{ShardID: shardID, Start: start, End: end, FirstAvailable: seq}
				}
				return nil, fmt.Errorf("shard %s returned record %s before the range's first, %s", shardID, seq, start)
			}
			if compareSeq(seq, end) > 0 {
				return recs, nil
			}
			recs = append(recs, r)
			if seq == end {
				return recs, nil
			}
		}
		switch {
		case out.NextShardIterator == nil:
			return nil, fmt.Errorf("shard %s ended before %s (the last of %s-%s)", shardID, end, start, end)
		case len(out.Records) > 0:
			empty = 0
		case aws.ToInt64(out.MillisBehindLatest) == 0 || empty >= emptyReads:
			if len(recs) == 0 {
				return nil, fmt.Errorf("shard %s has no record %s", shardID, start)
			}
			return nil, fmt.Errorf("shard %s holds no record %s (the last of %s-%s) yet", shardID, end, start, end)
		default:
			empty++
		}
		iter = out.NextShardIterator
	}
}

// shardIterator opens an iterator, retrying throttling.
func shardIterator(ctx context.Context, kin KinesisAPI, streamARN, shardID string, typ types.ShardIteratorType, seq string) (*string, error) {
	in := &kinesis.GetShardIteratorInput{StreamARN: aws.String(streamARN), ShardId: aws.String(shardID),
		ShardIteratorType: typ, StartingSequenceNumber: aws.String(seq)}
	var out *kinesis.GetShardIteratorOutput
	err := retry(ctx, func() (err error) { out, err = kin.GetShardIterator(ctx, in); return err })
	if err != nil {
		return nil, fmt.Errorf("open shard %s at %s %s: %w", shardID, typ, seq, err)
	}
	return out.ShardIterator, nil
}

func getRecords(ctx context.Context, kin KinesisAPI, iter *string) (*kinesis.GetRecordsOutput, error) {
	var out *kinesis.GetRecordsOutput
	err := retry(ctx, func() (err error) {
		out, err = kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(getRecordsLimit)})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get records: %w", err)
	}
	return out, nil
}

// retry runs call until it succeeds, fails with anything but throttling, or readAttempts are used.
func retry(ctx context.Context, call func() error) error {
	wait := readSpacing
	for attempt := 1; ; attempt++ {
		err := call()
		var thr *types.ProvisionedThroughputExceededException
		var lim *types.LimitExceededException
		if err == nil || attempt == readAttempts || !(errors.As(err, &thr) || errors.As(err, &lim)) {
			return err
		}
		if !ctxwait.Sleep(ctx, wait) {
			return ctx.Err()
		}
		wait *= 2
	}
}
