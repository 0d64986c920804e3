package poller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

// TestRetentionEndsInfiniteRetries: with Lambda's defaults (MaximumRetryAttempts and
// MaximumRecordAgeInSeconds -1) a poison record is retried until it expires from the stream. On
// an injected clock each attempt takes 5 h: after the fifth the record is 25 h old, past the
// stream's 24 h retention, so it goes to the destination as RecordAgeExceeded (no
// responseContext, approximateInvokeCount 5) and the shard moves on to the next record.
func TestRetentionEndsInfiniteRetries(t *testing.T) {
	var c clock
	c.set(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	f := fakekinesis.New(fakekinesis.WithClock(c.now))
	arn := f.CreateStream("s", 1)
	poison := putN(f, 1, func(int) string { return "poison" })
	var ok atomic.Value // the "ok" record's sequence number, once put
	ok.Store("")
	h := &scripted{decide: func(n int, e events.KinesisEvent) (json.RawMessage, error) {
		if string(e.Records[0].Kinesis.Data) != "poison" {
			return nil, nil
		}
		c.advance(5 * time.Hour)
		if n == 5 { // a record that arrives while the poison one is retried: fresh when read
			_, seq := f.Put("s", "k", []byte("ok"))
			ok.Store(seq)
		}
		return nil, errors.New("poison")
	}}
	fh := startFailureHarness(t, Config{BatchSize: 1}, f, arn, h, WithClock(c.now))
	testkit.WaitFor(t, "the record after the poison one", 5*time.Second, func() bool {
		pr, _ := fh.store.Load(context.Background())
		seq := ok.Load().(string)
		return seq != "" && pr["shardId-000000000000"].Checkpoint == seq
	})
	dl := fh.dest.records()
	if len(dl) != 1 || dl[0].Condition != ConditionRecordAgeExceeded || dl[0].Response != nil || dl[0].ApproximateInvokeCount != 5 ||
		dl[0].StartSequenceNumber != poison[0] || dl[0].BatchSize != 1 {
		t.Fatalf("destination records %+v, want the poison record as RecordAgeExceeded after 5 invocations", dl)
	}
	if got := fmt.Sprint(h.invocations()); got != "[[poison] [poison] [poison] [poison] [poison] [ok]]" {
		t.Fatalf("invocations %s", got)
	}
}

// TestRetentionReadAgain: the retention period is read again at every shard sync, so a
// DecreaseStreamRetentionPeriod from 48 h to 24 h while a poison record is retried makes it
// expire at 25 h instead of 50 h.
func TestRetentionReadAgain(t *testing.T) {
	var c clock
	c.set(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	f := fakekinesis.New(fakekinesis.WithClock(c.now))
	arn := f.CreateStream("s", 1)
	f.SetRetention("s", 48*time.Hour)
	putN(f, 1, func(int) string { return "poison" })
	h := &scripted{decide: func(n int, _ events.KinesisEvent) (json.RawMessage, error) {
		c.advance(5 * time.Hour)
		if n == 3 {
			f.SetRetention("s", 24*time.Hour)
			// Hold this attempt until a read that began after the change has come back.
			seen := f.Calls(fakekinesis.OpDescribeStreamSummary)
			deadline := time.Now().Add(5 * time.Second)
			for f.Calls(fakekinesis.OpDescribeStreamSummary) < seen+2 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond) // waiting on the poller's own sync ticker
			}
		}
		return nil, errors.New("poison")
	}}
	fh := startFailureHarness(t, Config{BatchSize: 1, ShardSyncInterval: 5 * time.Millisecond}, f, arn, h, WithClock(c.now))
	testkit.WaitFor(t, "record age exceeded", 10*time.Second, func() bool { return len(fh.dest.records()) == 1 })
	if err := fh.stop(); err != nil {
		t.Fatal(err)
	}
	dest := fh.dest
	if d := dest.records()[0]; d.Condition != ConditionRecordAgeExceeded || d.ApproximateInvokeCount != 5 {
		t.Fatalf("destination record %+v, want RecordAgeExceeded after 5 invocations (24 h), not 10 (48 h)", d)
	}
}

// TestRetentionUnknownNeverExpires: when DescribeStreamSummary fails the mapping still runs, and
// records are not discarded for a retention it does not know.
func TestRetentionUnknownNeverExpires(t *testing.T) {
	var c clock
	c.set(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	f := fakekinesis.New(fakekinesis.WithClock(c.now))
	arn := f.CreateStream("s", 1)
	f.Inject(func(op string, _ any) error {
		if op == fakekinesis.OpDescribeStreamSummary {
			return fakekinesis.ErrInternal()
		}
		return nil
	})
	putN(f, 1, func(int) string { return "poison" })
	h := &scripted{decide: func(int, events.KinesisEvent) (json.RawMessage, error) {
		c.advance(30 * time.Hour)
		return nil, errors.New("poison")
	}}
	fh := startFailureHarness(t, Config{BatchSize: 1}, f, arn, h, WithClock(c.now))
	testkit.WaitFor(t, "retries", 5*time.Second, func() bool { return len(h.invocations()) >= 5 })
	if dl := fh.dest.records(); len(dl) != 0 {
		t.Fatalf("destination records %+v without a known retention period", dl)
	}
}

// TestRetentionWithoutDestination: without an on-failure destination a record that outlived the
// retention period is discarded and the shard moves on, and it is not counted in
// DroppedEventCount, which leaves out records that expired through retention.
func TestRetentionWithoutDestination(t *testing.T) {
	var c clock
	c.set(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	f := fakekinesis.New(fakekinesis.WithClock(c.now))
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 1, func(int) string { return "poison" })
	h := &scripted{decide: func(int, events.KinesisEvent) (json.RawMessage, error) {
		c.advance(13 * time.Hour)
		return nil, errors.New("poison")
	}}
	obs := &counting{states: map[string]string{}}
	p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond}, NewMemoryStore(), inprocess.New(h.handle), WithClock(c.now), WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	stop := startPoller(t, p)
	waitCheckpoint(t, p.store, seqs[0])
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c := obs.snapshot(); len(h.invocations()) != 2 || c.dropped != 0 {
		t.Fatalf("%d invocations, %d dropped; want 2 (26 h > 24 h) and none counted", len(h.invocations()), c.dropped)
	}
}

// TestRetentionAppliesToRetriesOnly: a record read for the first time is invoked even when it is
// already older than the retention period (Kinesis trims lazily: a backlog at the trim horizon is
// still delivered); only retrying it past the retention period gives up on it.
func TestRetentionAppliesToRetriesOnly(t *testing.T) {
	var c clock
	c.set(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	f := fakekinesis.New(fakekinesis.WithClock(c.now))
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 1, func(int) string { return "old" })
	c.advance(30 * time.Hour)
	h := &scripted{decide: func(int, events.KinesisEvent) (json.RawMessage, error) { return nil, nil }}
	fh := startFailureHarness(t, Config{BatchSize: 1}, f, arn, h, WithClock(c.now))
	waitCheckpoint(t, fh.store, seqs[0])
	if n, dl := len(h.invocations()), fh.dest.records(); n != 1 || len(dl) != 0 {
		t.Fatalf("%d invocations, destination records %+v; want the old record invoked once and nothing discarded", n, dl)
	}
}
