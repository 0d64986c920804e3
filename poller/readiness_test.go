package poller

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
)

// TestReadinessFollowsTheStore: not ready before the mapping runs; ready once it does; not ready
// while the store keeps failing; ready again once it answers.
func TestReadinessFollowsTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		store := &brokenStore{MemoryStore: NewMemoryStore()}
		r := NewReadiness()
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, PollInterval: 100 * time.Millisecond}, store, &timedInvoker{}, WithReadiness(r))
		if err != nil {
			t.Fatal(err)
		}
		if r.Err() == nil {
			t.Fatal("ready before the mapping ran")
		}
		cancel, done := runPoller(t, p)
		defer func() { cancel(); <-done }()
		synctest.Wait()
		if err := r.Err(); err != nil {
			t.Fatalf("not ready once running: %v", err)
		}
		store.broken.Store(true)
		for store.failed.Load() < storeFailLimit { // every record is a checkpoint the store must take
			f.Put("s", "key", []byte("x"))
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		if r.Err() == nil {
			t.Fatalf("ready after %d store failures in a row", store.failed.Load())
		}
		store.broken.Store(false)
		for r.Err() != nil {
			time.Sleep(10 * time.Millisecond) // the reader's retry succeeds within its backoff
		}
	})
}

// claimGate is a Coordinator whose claims fail until open is set.
type claimGate struct{ open atomic.Bool }

func (g *claimGate) Register(context.Context, []ShardInfo) error { return nil }
func (g *claimGate) Claim(_ context.Context, c []string) ([]string, error) {
	if !g.open.Load() {
		return nil, errors.New("lease table unreachable")
	}
	return c, nil
}
func (g *claimGate) Held(string) bool                      { return true }
func (g *claimGate) Release(context.Context, string) error { return nil }

// TestReadyAfterAFirstClaimThatSucceeded: a first claim that succeeds makes the mapping ready at
// once, not one ClaimInterval later at the next claim.
func TestReadyAfterAFirstClaimThatSucceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		gate := &claimGate{}
		gate.open.Store(true)
		r := NewReadiness()
		running := make(chan struct{})
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, ClaimInterval: time.Hour}, NewMemoryStore(), &timedInvoker{}, WithCoordinator(gate), WithReadiness(r), WithReady(func() { close(running) }))
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		defer func() { cancel(); <-done }()
		<-running
		if err := r.Err(); err != nil {
			t.Fatalf("not ready after the first claim succeeded: %v", err)
		}
	})
}

// TestReadinessWaitsForAClaim: with leases, ready only after a claim round succeeded.
func TestReadinessWaitsForAClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		gate := &claimGate{}
		r := NewReadiness()
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, ClaimInterval: time.Second}, NewMemoryStore(), &timedInvoker{}, WithCoordinator(gate), WithReadiness(r))
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		defer func() { cancel(); <-done }()
		time.Sleep(5 * time.Second) // five failed claims
		synctest.Wait()
		if r.Err() == nil {
			t.Fatal("ready although no claim succeeded")
		}
		gate.open.Store(true)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if err := r.Err(); err != nil {
			t.Fatalf("not ready after a claim succeeded: %v", err)
		}
	})
}
