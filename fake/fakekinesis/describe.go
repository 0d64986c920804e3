package fakekinesis

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// OpDescribeStreamSummary names DescribeStreamSummary for Inject and Calls.
const OpDescribeStreamSummary = "DescribeStreamSummary"

// Retention bounds, as Kinesis sets them: 24 hours (the default) to 365 days.
const (
	// DefaultRetention is a new stream's retention period, and the shortest one SetRetention takes.
	DefaultRetention = 24 * time.Hour
	// MaxRetention is the longest retention period SetRetention takes.
	MaxRetention = 8760 * time.Hour
)

// SetRetention sets the stream's retention period, as IncreaseStreamRetentionPeriod and
// DecreaseStreamRetentionPeriod do; DescribeStreamSummary reports it. Records are not trimmed
// by it (use TrimBefore). It panics on an unknown stream or a period that is not a whole number
// of hours between 24 and 8760.
func (f *Fake) SetRetention(streamName string, d time.Duration) {
	if d < DefaultRetention || d > MaxRetention || d%time.Hour != 0 {
		panic(fmt.Sprintf("fakekinesis: SetRetention(%q, %s): want whole hours from 24 to 8760", streamName, d))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustStream(streamName).retention = d
}

// DescribeStreamSummary describes the stream given by name or ARN: ACTIVE, provisioned, its
// retention period (24 hours unless SetRetention changed it) and its open shard count. It does
// not block.
func (f *Fake) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	if err := f.begin(ctx, OpDescribeStreamSummary, in); err != nil {
		return nil, wrapSDK(OpDescribeStreamSummary, err)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, err := f.lookup(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, wrapSDK(OpDescribeStreamSummary, err)
	}
	retention := s.retention
	if retention == 0 {
		retention = DefaultRetention
	}
	var created time.Time
	for _, sh := range s.shards {
		if sh != nil && (created.IsZero() || sh.created.Before(created)) {
			created = sh.created
		}
	}
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{
		StreamName:              aws.String(s.name),
		StreamARN:               aws.String(s.arn),
		StreamStatus:            types.StreamStatusActive,
		StreamModeDetails:       &types.StreamModeDetails{StreamMode: types.StreamModeProvisioned},
		RetentionPeriodHours:    aws.Int32(int32(retention / time.Hour)),
		StreamCreationTimestamp: aws.Time(created),
		EnhancedMonitoring:      []types.EnhancedMetrics{{ShardLevelMetrics: []types.MetricsName{}}},
		EncryptionType:          types.EncryptionTypeNone,
		OpenShardCount:          aws.Int32(int32(len(s.open))),
		ConsumerCount:           aws.Int32(0),
	}}, nil
}
