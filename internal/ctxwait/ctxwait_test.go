package ctxwait

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !Sleep(context.Background(), time.Second) || time.Since(start) != time.Second {
			t.Fatalf("a full sleep returned false or after %s, want true after 1s", time.Since(start))
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start = time.Now()
		if Sleep(ctx, time.Hour) || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("a sleep whose context ended after 100ms returned true or after %s", time.Since(start))
		}
		if Sleep(ctx, 0) {
			t.Fatal("a zero sleep on an ended context returned true")
		}
		if !Sleep(context.Background(), -time.Second) {
			t.Fatal("a negative sleep on a live context returned false")
		}
	})
}
