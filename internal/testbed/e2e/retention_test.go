package e2e

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// failureSink keeps on-failure records.
type failureSink struct {
	mu  sync.Mutex
	got []poller.FailureRecord
}

func (s *failureSink) Deliver(_ context.Context, f poller.FailureRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, f)
	return nil
}

func (s *failureSink) records() []poller.FailureRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]poller.FailureRecord(nil), s.got...)
}

// TestRetentionOnKinesisLocal: the retention period comes from kinesis-local's
// DescribeStreamSummary (raised to 48 h with IncreaseStreamRetentionPeriod). With Lambda's
// defaults (-1 retries, -1 age) a poison record is retried; the poller's clock runs 10 h ahead per
// attempt, so after the fifth attempt the record is 50 h old, past 48 h: it is discarded as
// RecordAgeExceeded (approximateInvokeCount 5) and the checkpoint moves past it.
func TestRetentionOnKinesisLocal(t *testing.T) {
	ctx := context.Background()
	stream := newStream(t, 1)
	if _, err := kin.IncreaseStreamRetentionPeriod(ctx, &kinesis.IncreaseStreamRetentionPeriodInput{
		StreamName: aws.String(stream), RetentionPeriodHours: aws.Int32(48)}); err != nil {
		t.Fatal(err)
	}
	res, err := local.PutRecords(ctx, kin, stream, []local.Record{{PartitionKey: "k", Data: []byte("poison")}})
	if err != nil {
		t.Fatal(err)
	}
	seq := aws.ToString(res[0].SequenceNumber)
	var ahead atomic.Int64 // how far the poller's clock runs ahead of real time
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	var attempts atomic.Int64
	handler := func(_ context.Context, _ events.KinesisEvent) (events.KinesisEventResponse, error) {
		attempts.Add(1)
		ahead.Add(int64(10 * time.Hour))
		return events.KinesisEventResponse{}, errors.New("poison")
	}
	desc, err := kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	streamARN := aws.ToString(desc.StreamDescriptionSummary.StreamARN)
	sink, store := &failureSink{}, poller.NewMemoryStore()
	p, err := poller.New(kinesissrc.MustNew(kin, streamARN), poller.Config{StartingPosition: poller.TrimHorizon, BatchSize: 1, PollInterval: 100 * time.Millisecond}, store, inprocess.New(handler), poller.WithDestination(sink), poller.WithClock(now),
		poller.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	testkit.WaitFor(t, "the checkpoint to move past the poison record", 60*time.Second, func() bool {
		pr, _ := store.Load(ctx)
		return pr["shardId-000000000000"].Checkpoint == seq
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	dl := sink.records()
	if len(dl) != 1 || dl[0].Condition != poller.ConditionRecordAgeExceeded || dl[0].Response != nil ||
		dl[0].ApproximateInvokeCount != 5 || dl[0].StartSequenceNumber != seq {
		t.Fatalf("destination records %+v, want the poison record as RecordAgeExceeded after 5 attempts (48 h)", dl)
	}
	if n := attempts.Load(); n != 5 {
		t.Fatalf("%d attempts, want 5", n)
	}
}
