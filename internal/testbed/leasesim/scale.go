package leasesim

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/lease"
)

// Line is one measured figure against its target.
type Line struct {
	Name     string
	Measured float64
	Unit     string
	Target   float64
	AtMost   bool // the target is an upper bound (else a lower one)
	Note     string
}

// OK reports whether the figure meets its target.
func (l Line) OK() bool {
	if math.IsNaN(l.Measured) {
		return false
	}
	if l.AtMost {
		return l.Measured <= l.Target
	}
	return l.Measured >= l.Target
}

func (l Line) String() string {
	op, verdict := "≥", "ok"
	if l.AtMost {
		op = "≤"
	}
	if !l.OK() {
		verdict = "MISS"
	}
	s := fmt.Sprintf("%-58s %10.2f %-14s target %s %.2f  %s", l.Name, l.Measured, l.Unit, op, l.Target, verdict)
	if l.Note != "" {
		s += "  (" + l.Note + ")"
	}
	return s
}

// Format prints lines, one per target.
func Format(lines []Line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.String() + "\n")
	}
	return b.String()
}

func secs(d time.Duration, ok bool) float64 {
	if !ok {
		return math.NaN()
	}
	return d.Seconds()
}

// scaled is a per-fleet rate target scaled to the fleet size (the are for 100 workers).
func scaled(target float64, workers int) float64 { return target * float64(workers) / 100 }

// Steady runs a cold start of every worker at once, then the steady state, a graceful stop and
// a join, and a SIGKILL. Call inside a synctest bubble.
func Steady(cfg Config) []Line {
	w := newWorld(cfg)
	defer w.stopAll()
	S, W, L := cfg.Shards, cfg.Workers, cfg.LeaseDuration
	if L == 0 {
		L = 10 * time.Second
	}
	var lines []Line

	_, _, c0 := w.usage()
	l0 := w.leaseWrites.Load()
	for i := range W {
		w.start(workerID(i))
	}
	markSeen := func() {
		w.mu.Lock()
		for _, sw := range w.workers {
			if time.Since(sw.started) >= L/3+2*time.Second {
				sw.seenPeers = true
			}
		}
		w.mu.Unlock()
	}
	cold, ok := waitFor(2*time.Minute, 100*time.Millisecond, func() bool { markSeen(); return w.balanced(S) })
	_, _, c1 := w.usage()
	l1 := w.leaseWrites.Load()
	lines = append(lines,
		Line{Name: fmt.Sprintf("cold start, %d workers at once: balanced after", W), Measured: secs(cold, ok), Unit: "s", Target: 15, AtMost: true},
		Line{Name: "cold start, at once: conditional writes to leases per shard", Measured: float64(l1-l0) / float64(S), Unit: "× shards", Target: 1.05, AtMost: true,
			Note: fmt.Sprintf("%.2f × shards with the roster's heartbeats", float64(c1-c0)/float64(S))})

	// Steady state, idle: what coordination costs.
	time.Sleep(L)
	markSeen()
	r0, w0, _ := w.usage()
	const window = 60 * time.Second
	time.Sleep(window)
	r1, w1, _ := w.usage()
	lines = append(lines,
		Line{Name: "coordination reads (idle, steady)", Measured: (r1 - r0) / window.Seconds(), Unit: "RU/s", Target: scaled(100, W), AtMost: true,
			Note: fmt.Sprintf("target 100 RU/s at 100 workers, scaled to %d", W)},
		Line{Name: "coordination writes (idle, no checkpoints)", Measured: (w1 - w0) / window.Seconds(), Unit: "WU/s", Target: scaled(100, W), AtMost: true,
			Note: fmt.Sprintf("target 100 WU/s at 100 workers, scaled to %d", W)})

	// One worker joins the others: stop one gracefully, wait, start a fresh one.
	w.stopWorker(workerID(0))
	if _, ok := waitFor(time.Minute, 100*time.Millisecond, func() bool { return w.balanced(S) }); !ok {
		lines = append(lines, Line{Name: "balance after a graceful stop", Measured: math.NaN(), Target: 0, AtMost: true})
	}
	time.Sleep(5 * time.Second)
	joiner := fmt.Sprintf("w%03d-joined", W)
	w.start(joiner)
	share := S / W
	join, ok := waitFor(time.Minute, 100*time.Millisecond, func() bool { return w.loads()[joiner] >= share && w.balanced(S) })
	lines = append(lines, Line{Name: fmt.Sprintf("one worker joins %d: its share (%d) after", W-1, share), Measured: secs(join, ok), Unit: "s", Target: 5, AtMost: true})
	time.Sleep(5 * time.Second)
	markSeen()

	// SIGKILL.
	victim := workerID(1)
	horizon := w.horizon(victim) // none: nothing is invoked here
	killed := w.kill(victim)
	_, ok = waitFor(time.Minute, 50*time.Millisecond, func() bool { return w.balanced(S) })
	// A dead worker's leases are taken once its last heartbeat's horizon has passed (none
	// here: nothing is invoked) and it was declared dead: L + 2 claim intervals after its last
	// heartbeat (lease/DESIGN.md, "The takeover bound").
	lines = append(lines, Line{Name: "SIGKILL: every shard of the dead worker read again after", Measured: secs(time.Since(killed), ok), Unit: "s",
		Target: lease.TakeoverBound(L, horizon).Seconds(), AtMost: true,
		Note: fmt.Sprintf("lease.TakeoverBound: L + 2 claim intervals, its last horizon %s", horizon)})
	markSeen()
	lines = append(lines, Line{Name: "most shards on one worker ÷ ceil(1.1 × shards / workers), once it saw its peers", Measured: w.maxHeld, Unit: "",
		Target: 1, AtMost: true, Note: fmt.Sprintf("bound %d at %d workers; worst: %s", ceilFrac(11*S, 10*W), W, w.maxNote)})
	lines = append(lines, w.faultLine())
	return lines
}

// ColdStart starts every worker at once and says when the shards were balanced (seconds).
func ColdStart(cfg Config) float64 {
	w := newWorld(cfg)
	defer w.stopAll()
	for i := range cfg.Workers {
		w.start(workerID(i))
	}
	t, ok := waitFor(2*time.Minute, 100*time.Millisecond, func() bool { return w.balanced(cfg.Shards) })
	return secs(t, ok)
}

// Staggered starts one worker every 2 s.
func Staggered(cfg Config) []Line {
	w := newWorld(cfg)
	defer w.stopAll()
	S, W := cfg.Shards, cfg.Workers
	_, _, c0 := w.usage()
	l0 := w.leaseWrites.Load()
	for i := range W {
		w.start(workerID(i))
		if i < W-1 {
			time.Sleep(2 * time.Second)
		}
	}
	t, ok := waitFor(2*time.Minute, 100*time.Millisecond, func() bool { return w.balanced(S) })
	_, _, c1 := w.usage()
	l1 := w.leaseWrites.Load()
	return []Line{
		{Name: fmt.Sprintf("cold start, 1 worker every 2 s (%d): balanced after the last start", W), Measured: secs(t, ok), Unit: "s", Target: 15, AtMost: true},
		{Name: "cold start, staggered: conditional writes to leases per shard", Measured: float64(l1-l0) / float64(S), Unit: "× shards", Target: 1.05, AtMost: true,
			Note: fmt.Sprintf("%.2f × shards with the roster's heartbeats over the %s of starts; %d hand-overs, %d failed conditions",
				float64(c1-c0)/float64(S), time.Duration(W-1)*2*time.Second, w.counts.count("lease handed over"), w.db.TableStats(w.table).ConditionFailures)},
		w.faultLine(),
	}
}

// Rolling restarts every worker in turn (SIGTERM, start again under the same id), 5 s apart.
func Rolling(cfg Config) []Line {
	w := newWorld(cfg)
	defer w.stopAll()
	S, W := cfg.Shards, cfg.Workers
	for i := range W {
		w.start(workerID(i))
	}
	if _, ok := waitFor(2*time.Minute, 100*time.Millisecond, func() bool { return w.balanced(S) }); !ok {
		return []Line{{Name: "rolling restart: initial balance", Measured: math.NaN(), AtMost: true}}
	}
	time.Sleep(10 * time.Second)
	w.mu.Lock()
	m0, g0 := w.moves, len(w.gaps)
	w.mu.Unlock()
	for i := range W {
		w.stopWorker(workerID(i))
		w.start(workerID(i))
		time.Sleep(5 * time.Second)
	}
	_, ok := waitFor(2*time.Minute, 100*time.Millisecond, func() bool { return w.balanced(S) })
	w.mu.Lock()
	moves := float64(w.moves-m0) / float64(S)
	gaps := w.gaps[g0:]
	w.mu.Unlock()
	if !ok {
		moves = math.NaN()
	}
	return []Line{
		{Name: "rolling restart (one at a time, 5 s apart): moves per shard", Measured: moves, Unit: "moves", Target: 1.2, AtMost: true},
		{Name: "rolling restart: p99 gap of a moved shard", Measured: percentile(gaps, 0.99).Seconds(), Unit: "s", Target: 2, AtMost: true,
			Note: fmt.Sprintf("worst %.2f s over %d moves", percentile(gaps, 1).Seconds(), len(gaps))},
		w.faultLine(),
	}
}

// Capped runs a cold start on a table capped at 40,000 read and 4,000 write units (scaled to the
// fleet), with throttle bursts (2 s of every 15 s), and compares with the uncapped figure.
func Capped(cfg Config, uncapped float64) []Line {
	cfg.TableRead, cfg.TableWrite = scaled(40000, cfg.Workers), scaled(4000, cfg.Workers)
	w := newWorld(cfg, fakedynamo.WithPartitionCapacity(3000, 1000))
	defer w.stopAll()
	S, W := cfg.Shards, cfg.Workers
	stopBursts := make(chan struct{})
	burstsDone := make(chan struct{})
	go func() {
		defer close(burstsDone)
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopBursts:
				return
			case <-t.C:
				w.db.ThrottleUntil(w.table, time.Now().Add(2*time.Second))
			}
		}
	}()
	w.db.ThrottleUntil(w.table, time.Now().Add(2*time.Second)) // a burst right at the start
	for i := range W {
		w.start(workerID(i))
	}
	t, ok := waitFor(3*time.Minute, 100*time.Millisecond, func() bool { return w.balanced(S) })
	time.Sleep(60 * time.Second) // bursts keep coming: nothing may be lost
	close(stopBursts)
	<-burstsDone
	lost := w.counts.count("lease lost") + w.counts.count("worker declared dead")
	w.mu.Lock()
	exits := len(w.exits)
	w.mu.Unlock()
	ratio := secs(t, ok) / uncapped
	return []Line{
		{Name: fmt.Sprintf("capped table (%.0f RU/%.0f WU) + throttle bursts: balanced ÷ uncapped", cfg.TableRead, cfg.TableWrite), Measured: ratio, Unit: "×", Target: 2, AtMost: true,
			Note: fmt.Sprintf("%.1f s vs %.1f s; %d calls throttled", secs(t, ok), uncapped, w.db.TableStats(w.table).Throttled)},
		{Name: "capped table: leases lost to throttling, workers exited", Measured: float64(lost + exits), Unit: "", Target: 0, AtMost: true},
		w.faultLine(),
	}
}

func (w *world) faultLine() Line {
	w.mu.Lock()
	defer w.mu.Unlock()
	note := ""
	if len(w.faults) > 0 {
		note = w.faults[0]
	}
	return Line{Name: "invariant violations (two readers of a shard, checkpoint by a non-holder)", Measured: float64(len(w.faults)), Target: 0, AtMost: true, Note: note}
}

func workerID(i int) string { return fmt.Sprintf("w%03d", i) }
