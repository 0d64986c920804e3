// Package ctxwait waits for a duration unless a context ends first: the one pause that retry
// loops in poller, lease and redrive share.
package ctxwait

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends; it reports whether the full time passed (a d of zero or
// less passes at once, unless ctx has ended). The wait is on a time.Timer, so inside a
// testing/synctest bubble it runs on the bubble's clock.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
