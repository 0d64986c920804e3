package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// RewindOutcome is what Rewind did, and what the operator must be told: Trimmed says which
// records of the rewind's time are gone (older than the stream's retention), "" when none.
type RewindOutcome struct {
	lease.RewindResult
	Trimmed string
}

// Rewind checks q against the stream streamARN as esm rewind and esm serve's rewind route both
// do (its shards and the time now: poller.RewindRequest.Validate; each sequence number's record
// in its shard), warns on o.Log when its time is older than the stream's retention, and applies
// it to the mapping on table (lease.Rewind). A request at fault is a *poller.ValidationError
// whose message says what to fix; a rewind that changed nothing wraps lease.ErrRewindRefused.
func Rewind(ctx context.Context, kin kinesissrc.API, ddb lease.DynamoAPI, streamARN, table string, q poller.RewindRequest,
	now time.Time, o lease.RewindOptions) (RewindOutcome, error) {
	shards, out, err := checkRewind(ctx, kin, streamARN, q, now, o.Log)
	if err != nil {
		return out, err
	}
	out.RewindResult, err = lease.Rewind(ctx, ddb, table, shards, q, o)
	return out, err
}

// checkRewind checks q against the stream as Rewind does, and returns its listing and the
// outcome's Trimmed (warned on log, when set).
func checkRewind(ctx context.Context, kin kinesissrc.API, streamARN string, q poller.RewindRequest, now time.Time,
	log *slog.Logger) ([]source.Shard, RewindOutcome, error) {
	listed, err := kinesissrc.ListShards(ctx, kin, streamARN)
	if err != nil {
		return nil, RewindOutcome{}, err
	}
	shards := kinesissrc.ShardsOf(listed)
	if err := q.Validate(shards, now); err != nil {
		return nil, RewindOutcome{}, err
	}
	if err := checkSequences(ctx, kin, streamARN, q); err != nil {
		return nil, RewindOutcome{}, err
	}
	out := RewindOutcome{Trimmed: trimmedBefore(ctx, kin, streamARN, q, now)}
	if out.Trimmed != "" && log != nil {
		log.Warn(out.Trimmed)
	}
	return shards, out, nil
}

// checkSequences asks Kinesis for each sequence number's record in its shard (an iterator at
// it, one record): a number of another shard, or of a record trimmed, is refused with what to
// fix.
func checkSequences(ctx context.Context, kin kinesissrc.API, arn string, q poller.RewindRequest) error {
	for id, seq := range q.Sequences {
		bad := &poller.ValidationError{Field: "Sequences", Message: fmt.Sprintf(
			"shard %s has no record with sequence number %s (a number of another shard, or a record trimmed by retention): give one of that shard's records", id, seq)}
		it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamARN: aws.String(arn), ShardId: aws.String(id),
			ShardIteratorType: kintypes.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(seq)})
		// Kinesis refuses a number outside the shard with InvalidArgumentException; kinesis-local
		// answers ResourceNotFoundException for a number it has no record of (the stream and the
		// shard were just listed: it is the record that is not found).
		var inv *kintypes.InvalidArgumentException
		var missing *kintypes.ResourceNotFoundException
		if errors.As(err, &inv) || errors.As(err, &missing) {
			return bad
		}
		if err != nil {
			return fmt.Errorf("check sequence number %s of shard %s: %w", seq, id, err)
		}
		out, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{StreamARN: aws.String(arn), ShardIterator: it.ShardIterator, Limit: aws.Int32(1)})
		if err != nil {
			return fmt.Errorf("check sequence number %s of shard %s: %w", seq, id, err)
		}
		if len(out.Records) == 0 || aws.ToString(out.Records[0].SequenceNumber) != seq {
			return bad
		}
	}
	return nil
}

// trimmedBefore says, when the rewind's time is older than the stream's retention, which
// records are gone: the rewind starts at the oldest one left, and the operator is told.
func trimmedBefore(ctx context.Context, kin kinesissrc.API, arn string, q poller.RewindRequest, now time.Time) string {
	if q.Timestamp.IsZero() {
		return ""
	}
	out, err := kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamARN: aws.String(arn)})
	if err != nil || out.StreamDescriptionSummary == nil || out.StreamDescriptionSummary.RetentionPeriodHours == nil {
		return ""
	}
	horizon := now.Add(-time.Duration(*out.StreamDescriptionSummary.RetentionPeriodHours) * time.Hour)
	if !q.Timestamp.Before(horizon) {
		return ""
	}
	return fmt.Sprintf("records that arrived before %s are trimmed (retention %d h): the rewind starts at the oldest record left, the %s before it are not replayed",
		horizon.UTC().Format(time.RFC3339), *out.StreamDescriptionSummary.RetentionPeriodHours, horizon.Sub(q.Timestamp).Round(time.Second))
}
