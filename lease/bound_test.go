package lease

import (
	"context"
	"testing"
	"time"
)

// TestBoundOfEachEpochIsKept: a worker restarted under the same id publishes its bound without
// hiding the previous incarnation's, which a worker declaring that incarnation dead, or the
// restart replacing it, still has to read. With one bound item per worker id the restart
// overwrote it, the previous epoch read as having none and counted the longest (900 s), and
// its leases waited a quarter of an hour (the lease simulation: records never delivered).
func TestBoundOfEachEpochIsKept(t *testing.T) {
	ctx := context.Background()
	table := newTable(t)
	first, err := NewDynamo(ddb, table, "a", WithFunctionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	first.GateInvocations() // as a poller does: it publishes what it invokes, nothing yet
	if err := first.join(ctx); err != nil {
		t.Fatal(err)
	}
	restarted, err := NewDynamo(ddb, table, "a", WithFunctionTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := restarted.join(ctx); err != nil {
		t.Fatal(err)
	}
	if first.me.epoch == restarted.me.epoch {
		t.Fatal("the restart joined under the same epoch")
	}
	for _, c := range []struct {
		epoch int64
		want  time.Duration
	}{{first.me.epoch, time.Second}, {restarted.me.epoch, 2 * time.Second}} {
		p, err := restarted.readPublished(ctx, "a", c.epoch)
		if err != nil {
			t.Fatal(err)
		}
		if p.bound != c.want || !p.horizons {
			t.Errorf("the bound of epoch %d reads %s (publishes horizons: %v), want %s and true", c.epoch, p.bound, p.horizons, c.want)
		}
	}
	tombs := tombstones(t, table)
	// The first incarnation invoked nothing: its last horizon was none.
	if w, ok := tombs[goneKey("a", first.me.epoch)]; !ok || w != 0 {
		t.Errorf("the restart's tombstone of the first incarnation waits %s (there: %v), want none (it published no horizon)", w, ok)
	}
	// Once the tombstone is gone, so is that epoch's bound.
	restarted.dropBound(ctx, "a", first.me.epoch)
	if got, err := restarted.readBound(ctx, "a", first.me.epoch); err != nil || got != MaxFunctionTimeout {
		t.Errorf("a dropped bound reads %s (%v), want none (%s)", got, err, MaxFunctionTimeout)
	}
	if got, _ := restarted.readBound(ctx, "a", restarted.me.epoch); got != 2*time.Second {
		t.Errorf("dropping the first epoch's bound changed the restart's: %s", got)
	}
}
