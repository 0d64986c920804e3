package leasesim

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/kinesis-esm/esm/lease"
)

// FleetView measures what the fleet's view costs in the lease table (see lease/DESIGN.md, "The
// fleet's view"): every worker publishes its status address in the bound item it writes at each
// join (nothing more), a live page is open on one worker (the roster read every second), an
// "esm status --lease-table" runs every 10 s (one eventually consistent scan), and 1 % of the
// shards become blocked and recover 30 s later (a blocked mark written and removed by each
// owner). Call inside a synctest bubble.
func FleetView(cfg Config) []Line {
	w := newWorld(cfg)
	defer w.stopAll()
	S, W, L := cfg.Shards, cfg.Workers, cfg.LeaseDuration
	if L == 0 {
		L = 10 * time.Second
	}
	for i := range W {
		w.start(workerID(i))
	}
	if _, ok := waitFor(2*time.Minute, 100*time.Millisecond, func() bool { return w.balanced(S) }); !ok {
		return []Line{{Name: "fleet view: initial balance", Measured: math.NaN(), AtMost: true}}
	}
	time.Sleep(L)
	const window = 60 * time.Second
	r0, w0, _ := w.usage()
	time.Sleep(window)
	r1, w1, _ := w.usage()

	ctx, stop := context.WithCancel(context.Background())
	api := &checkingAPI{DB: w.db, w: w}
	done := make(chan struct{})
	page := lease.NewWorkerReader(api, w.table) // as a worker's live page keeps it
	go every(ctx, time.Second, done, func() { _, _ = page.Workers(ctx) })
	blocked := w.block(S / 100)
	time.Sleep(25 * time.Second)
	rs, _, _ := w.usage()
	seen, _ := lease.ReadFleet(ctx, api, w.table) // esm status --lease-table, from a laptop
	rs1, _, _ := w.usage()
	time.Sleep(5 * time.Second)
	unblock(blocked)
	time.Sleep(window - 30*time.Second)
	r2, w2, _ := w.usage()
	stop()
	<-done
	left, _ := lease.ReadFleet(context.Background(), api, w.table)
	idleR, idleW := (r1-r0)/window.Seconds(), (w1-w0)/window.Seconds()
	pageR := (r2 - r1 - (rs1 - rs)) / window.Seconds()
	return []Line{
		{Name: "fleet view: writes, 1 % of shards blocking and recovering", Measured: (w2 - w1) / window.Seconds(), Unit: "WU/s", Target: scaled(100, W), AtMost: true,
			Note: fmt.Sprintf("idle %.2f WU/s: the marks add %.2f; target 100 WU/s at 100 workers, scaled to %d", idleW, (w2-w1)/window.Seconds()-idleW, W)},
		{Name: "fleet view: reads, with a live page open (the roster every second)", Measured: pageR, Unit: "RU/s", Target: scaled(100, W), AtMost: true,
			Note: fmt.Sprintf("idle %.2f RU/s: the page adds %.2f; target 100 RU/s at 100 workers, scaled to %d", idleR, pageR-idleR, W)},
		{Name: "esm status --lease-table: one read of the whole table", Measured: rs1 - rs, Unit: "RU", Target: float64(S) / 10, AtMost: true,
			Note: "an eventually consistent scan; target a tenth of a unit per shard"},
		{Name: "fleet view: blocked marks esm status reads from the table, 25 s after the blocks", Measured: float64(len(seen.Blocked)), Unit: "shards",
			Target: float64(len(blocked))},
		{Name: "fleet view: marks left 30 s after the recoveries", Measured: float64(len(left.Blocked)), Target: 0, AtMost: true},
		w.faultLine(),
	}
}

// every runs f every d until ctx ends, then closes done.
func every(ctx context.Context, d time.Duration, done chan<- struct{}, f func()) {
	defer close(done)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// blockedShard is a shard reported blocked on the worker reading it.
type blockedShard struct {
	sw *simWorker
	id string
}

// block reports n shards blocked on the workers reading them, as their pollers would.
func (w *world) block(n int) []blockedShard {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []blockedShard
	for id, worker := range w.running {
		if len(out) == n {
			break
		}
		if sw := w.workers[worker]; sw != nil && sw.marks != nil {
			sw.marks.ShardBlocked(id, true)
			out = append(out, blockedShard{sw, id})
		}
	}
	return out
}

// unblock reports the shards no longer blocked.
func unblock(blocked []blockedShard) {
	for _, b := range blocked {
		b.sw.marks.ShardBlocked(b.id, false)
	}
}
