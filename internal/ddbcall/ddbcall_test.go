package ddbcall

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCall: an attempt that gets no answer ends at its deadline and is tried again up to the
// attempts given; an answer ends it; the caller's own end is not a timeout and is not retried.
func TestCall(t *testing.T) {
	ctx := context.Background()
	tries := 0
	hangThenAnswer := func(ctx context.Context) (int, error) {
		if tries++; tries == 1 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return 7, nil
	}
	if v, err := Call(ctx, 20*time.Millisecond, 2, hangThenAnswer); err != nil || v != 7 || tries != 2 {
		t.Fatalf("a read whose first attempt hung: %d, %v after %d attempts, want 7 after 2", v, err, tries)
	}
	tries = 0
	_, err := Call(ctx, 20*time.Millisecond, 1, hangThenAnswer)
	if !errors.Is(err, ErrCallTimeout) || !errors.Is(err, context.DeadlineExceeded) || tries != 1 {
		t.Fatalf("a write that hung: %v after %d attempts, want ErrCallTimeout after 1", err, tries)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	tries = 0
	if _, err := Call(cctx, time.Hour, 3, func(ctx context.Context) (int, error) { tries++; return 0, ctx.Err() }); errors.Is(err, ErrCallTimeout) || tries != 1 {
		t.Fatalf("a call whose caller ended: %v after %d attempts, want the caller's error after 1", err, tries)
	}
}
