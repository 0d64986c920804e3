package poller

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

// replayRecordAge runs AWS's recorded case with the poller's own pacing, in virtual time: one
// record, MaximumRecordAgeInSeconds 60, MaximumRetryAttempts -1 (the default), a function that
// always fails. It returns the failure record's approximateInvokeCount and how often the
// function was really invoked.
func replayRecordAge(t *testing.T, cfg Config) (count, invoked int) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		f.Put("s", "k", []byte("doomed"))
		h := &scripted{decide: func(int, events.KinesisEvent) (json.RawMessage, error) { return nil, errors.New("always fails") }}
		dest := &memDest{}
		cfg.StartingPosition, cfg.MaximumRecordAgeInSeconds = TrimHorizon, intp(60)
		p, err := New(kinesisSource(f, arn), cfg, NewMemoryStore(), inprocess.New(h.handle, inprocess.WithTimeout(10*time.Second)), WithDestination(dest))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		for len(dest.records()) == 0 { // virtual time: this minute passes at once
			time.Sleep(time.Second)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		d := dest.records()[0]
		if d.Condition != ConditionRecordAgeExceeded {
			t.Fatalf("failure record %+v, want RecordAgeExceeded", d)
		}
		count, invoked = d.ApproximateInvokeCount, len(h.invocations())
	})
	return count, invoked
}

// TestRetryPacingMatchesAWS replays the recorded expire-while-retrying case (aws-recorded.md:
// approximateInvokeCount 8) with the default pacing and its jitter, many times: every run gives
// 8 ± 1, and the count is the invocations that really happened.
func TestRetryPacingMatchesAWS(t *testing.T) {
	seen := map[int]int{}
	for range 40 {
		count, invoked := replayRecordAge(t, Config{})
		if count < 7 || count > 9 || invoked != count {
			t.Fatalf("approximateInvokeCount %d after %d invocations; AWS recorded 8 (7 to 9 accepted)", count, invoked)
		}
		seen[count]++
	}
	t.Logf("approximateInvokeCount over 40 runs: %v", seen)
}

// TestShortPausesAfterPartialResponses: a function that keeps reporting its first record failed
// (a partial batch response) is retried on the short pace, as before: many more times within the
// record's 60 s than a batch that fails whole.
func TestShortPausesAfterPartialResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		_, seq := f.Put("s", "k", []byte("doomed"))
		h := &scripted{decide: func(int, events.KinesisEvent) (json.RawMessage, error) {
			return json.RawMessage(`{"batchItemFailures":[{"itemIdentifier":"` + seq + `"}]}`), nil
		}}
		dest := &memDest{}
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, MaximumRecordAgeInSeconds: intp(60), ReportBatchItemFailures: true}, NewMemoryStore(), inprocess.New(h.handle, inprocess.WithTimeout(10*time.Second)), WithDestination(dest))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		for len(dest.records()) == 0 {
			time.Sleep(time.Second)
		}
		cancel()
		<-done
		if n := dest.records()[0].ApproximateInvokeCount; n < 14 {
			t.Fatalf("approximateInvokeCount %d: a partial response's retries must stay on the short pace (1 s up to 5 s)", n)
		}
	})
}
