package sim

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesis-esm/esm/invoke"
)

// TestResetInvocationDiesWithItsOnlyWorker: an invocation whose connection was reset runs at the
// function as any other does: on past its worker's death with several workers (the function is
// remote), and no longer than its worker with a single one (the function dies with it). The
// reset once ran for the whole function timeout whatever happened to a single worker, so a
// worker restarted after a crash overlapped an invocation nothing could know of (seed 427).
func TestResetInvocationDiesWithItsOnlyWorker(t *testing.T) {
	const timeout, killedAfter = 10 * time.Second, time.Second
	for _, tt := range []struct {
		workers int
		want    time.Duration
	}{{1, killedAfter}, {3, timeout}} {
		synctest.Test(t, func(t *testing.T) {
			w := &world{s: Schedule{PF: 1, Workers: tt.workers, FunctionTimeout: timeout}, now: time.Now}
			inc := &incarnation{id: 1, w: w, dead: make(chan struct{})}
			c := &call{inc: 1, shard: "s"}
			if _, err := (simInvoker{inc}).reset(c); !errors.Is(err, invoke.ErrAmbiguous) {
				t.Fatalf("reset: %v, want ErrAmbiguous", err)
			}
			time.Sleep(killedAfter - time.Since(c.start))
			close(inc.dead)
			time.Sleep(2 * timeout) // whatever still runs ends
			synctest.Wait()
			if got := c.end.Sub(c.start); got != tt.want {
				t.Errorf("%d workers: the reset invocation ran %s at the function, its worker killed after %s; want %s", tt.workers, got, killedAfter, tt.want)
			}
		})
	}
}
