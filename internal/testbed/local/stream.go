package local

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// pollInterval is the pause between two DescribeStreamSummary calls while
// waiting for a stream to become ACTIVE.
const pollInterval = 50 * time.Millisecond

// maxPutRecords is the most entries one PutRecords call may carry on AWS.
const maxPutRecords = 500

// CreateStream creates a provisioned stream with the given number of shards
// and blocks until it is ACTIVE, polling every 50ms for as long as ctx
// allows. It returns the stream's ARN. Creating a stream that already exists
// fails with *types.ResourceInUseException.
func CreateStream(ctx context.Context, c *kinesis.Client, name string, shards int32) (streamARN string, err error) {
	_, err = c.CreateStream(ctx, &kinesis.CreateStreamInput{
		StreamName: aws.String(name),
		ShardCount: aws.Int32(shards),
	})
	if err != nil {
		return "", fmt.Errorf("create stream %s: %w", name, err)
	}
	return waitActive(ctx, c, name, true)
}

// WaitActive blocks until the stream is ACTIVE, polling DescribeStreamSummary
// every 50ms for as long as ctx allows. Call it after SplitShard,
// MergeShards or UpdateShardCount, which leave the stream UPDATING for a
// while. A missing stream is an error (*types.ResourceNotFoundException).
func WaitActive(ctx context.Context, c *kinesis.Client, name string) error {
	_, err := waitActive(ctx, c, name, false)
	return err
}

// waitActive polls until the stream is ACTIVE and returns its ARN. With
// creating set, "not found" means "not visible yet" rather than an error.
func waitActive(ctx context.Context, c *kinesis.Client, name string, creating bool) (string, error) {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		out, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		var notFound *types.ResourceNotFoundException
		switch {
		case err == nil:
			d := out.StreamDescriptionSummary
			switch d.StreamStatus {
			case types.StreamStatusActive:
				return aws.ToString(d.StreamARN), nil
			case types.StreamStatusDeleting:
				return "", fmt.Errorf("wait for stream %s: it is being deleted", name)
			}
		case creating && errors.As(err, &notFound):
		default:
			return "", fmt.Errorf("wait for stream %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("wait for stream %s to be active: %w", name, ctx.Err())
		case <-tick.C:
		}
	}
}

// Record is one record for [PutRecords].
type Record struct {
	PartitionKey string
	Data         []byte
}

// PutRecords writes records to the stream in the given order, in calls of at
// most 500 entries, and returns where each landed, in the same order. It
// fails if any entry is rejected; the emulators never throttle, so a
// rejection means bad input. Records in the same shard get increasing
// sequence numbers in input order.
func PutRecords(ctx context.Context, c *kinesis.Client, streamName string, records []Record) ([]types.PutRecordsResultEntry, error) {
	results := make([]types.PutRecordsResultEntry, 0, len(records))
	for start := 0; start < len(records); start += maxPutRecords {
		chunk := records[start:min(start+maxPutRecords, len(records))]
		entries := make([]types.PutRecordsRequestEntry, len(chunk))
		for i, r := range chunk {
			entries[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String(r.PartitionKey), Data: r.Data}
		}
		out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(streamName), Records: entries})
		if err != nil {
			return results, fmt.Errorf("put records %s: %w", streamName, err)
		}
		if n := aws.ToInt32(out.FailedRecordCount); n > 0 {
			for i, e := range out.Records {
				if e.ErrorCode != nil {
					return results, fmt.Errorf("put records %s: %d of %d rejected, first at %d: %s: %s",
						streamName, n, len(chunk), start+i, aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage))
				}
			}
		}
		results = append(results, out.Records...)
	}
	return results, nil
}
