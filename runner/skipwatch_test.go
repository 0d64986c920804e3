package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
)

// fakeSkipTable is a lease table holding one pending skip request.
type fakeSkipTable struct {
	asked   chan struct{}
	held    atomic.Bool
	mu      sync.Mutex
	req     lease.SkipState
	answers []lease.SkipAnswer
}

func (f *fakeSkipTable) SkipAsked() <-chan struct{} { return f.asked }
func (f *fakeSkipTable) Held(string) bool           { return f.held.Load() }
func (f *fakeSkipTable) LatestSkip(context.Context) (lease.SkipState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.req, nil
}

func (f *fakeSkipTable) AnswerSkip(_ context.Context, rev int64, a lease.SkipAnswer) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rev != f.req.Revision || f.req.State != lease.SkipRequested {
		return false, nil
	}
	f.req.State = lease.SkipAnswered
	f.answers = append(f.answers, a)
	return true, nil
}

// TestWatchSkipsTakesOverAPendingRequest: a skip request for a shard this worker does not hold
// is left alone; once the worker holds the shard (it took the lease over from an owner that
// was lost), the pending request is read again and done here within skipRecheck, answered
// once. Without the recheck it waits for the next request, and the asker gives up.
func TestWatchSkipsTakesOverAPendingRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSkipTable{asked: make(chan struct{}, 1)}
		f.req = lease.SkipState{Revision: 1, State: lease.SkipRequested, Request: poller.SkipRequest{ShardID: "shardId-000000000004"}, Deadline: time.Now().Add(time.Minute)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			watchSkips(ctx, f, poller.NewSkips(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
		f.asked <- struct{}{}
		time.Sleep(3 * time.Second)
		if n := len(f.answers); n != 0 {
			t.Fatalf("a worker that does not hold the shard answered %d times", n)
		}
		f.held.Store(true) // the lease taken over
		time.Sleep(skipRecheck + time.Millisecond)
		synctest.Wait()
		f.mu.Lock()
		answers := f.answers
		f.mu.Unlock()
		if len(answers) != 1 {
			t.Fatalf("%d answers after the worker took the shard, want 1", len(answers))
		}
		if _, err := answers[0].Result(); !errors.Is(err, poller.ErrSkipUnknownShard) {
			t.Fatalf("answer %+v: want the poller's own refusal (its Skips lists no shard)", answers[0])
		}
		cancel()
		<-done
	})
}
