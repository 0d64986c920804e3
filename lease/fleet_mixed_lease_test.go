package lease_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// TestMixedLeaseDurationsOverlap guards the audit's defect 6; what follows is that defect as it was
// before its fix, and the test fails if it comes back: a rolling change of --lease-duration (here 60 s on worker a,
// the old 3 s on worker b; nothing publishes or checks it). b judges a's heartbeat, sent every
// 20 s, by its own L: it declares a dead about 3 s after each heartbeat and takes a's shards
// 9/8·B later, while a's Held, judged by a's L, stays true for 48 s and a goes on invoking until
// its next heartbeat fails or its next checkpoint is fenced: an invocation of a (1.5 s each
// here, Timeout 3 s) started after b took the shard runs beside b's.
func TestMixedLeaseDurationsOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("about 30 s")
	}
	w := newWorld(t, 2, 3*time.Second)
	w.run = func(string, string, events.KinesisEvent) { time.Sleep(1500 * time.Millisecond) }
	w.produce(t, 50*time.Millisecond)
	w.startL("a", 60*time.Second, 5*time.Second, 3*time.Second, nil)
	w.waitFor("a to hold both leases", 30*time.Second, func() bool { return w.owners()["a"] == 2 })
	before, _ := w.roster()
	w.startL("b", 3*time.Second, 5*time.Second, 3*time.Second, nil)
	time.Sleep(25 * time.Second)
	after, gone := w.roster()
	if after["a"].epoch != before["a"].epoch || len(gone) > 0 {
		t.Errorf("b declared a dead though a heartbeats every third of its own lease: a's epoch %d → %d, tombstones %v", before["a"].epoch, after["a"].epoch, gone)
	}
	o := w.overlaps()
	t.Logf("overlapping invocations: %d", len(o))
	if len(o) > 0 {
		if len(o) > 6 {
			o = append(o[:6], "…")
		}
		t.Errorf("workers with different lease durations invoked the same shard at once:\n%s", strings.Join(o, "\n"))
	}
}
