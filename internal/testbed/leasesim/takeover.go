package leasesim

import (
	"context"
	"crypto/md5"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesis-esm/esm/lease"
)

// TakeoverRun kills one worker of four (8 shards, L = 3 s, a function that runs 2 s: B = 3 s)
// with nothing in flight; then another idle one while the others invoke all along (short
// invocations one after another, so that their heartbeats are mostly the extra ones that
// publish their horizons); then, with records flowing everywhere, another one in the middle of
// its invocations; and judges each takeover against lease/DESIGN.md's bound: every shard the dead
// worker ran is run by another within lease.TakeoverBound of the kill, for the horizon its last
// heartbeat published (none when idle), and within issue 38's promise: the lease + 2 s of the
// kill when idle, the dead worker's last invocation's deadline (its start + B) + 2 s when busy.
// It returns a line per takeover and bound and the violations found: a takeover later than a
// bound, a kill meant to be busy that found no horizon, and, as in FaultRun, two invocations of
// one shard at once.
func TakeoverRun(seed uint64) (lines []Line, violations []string) {
	// Shards read again 300 ms after they were caught up: busy workers start an invocation
	// about every 100 ms (section idleBesideBusy).
	cfg := Config{Shards: 8, Workers: 4, LeaseDuration: 3 * time.Second, Seed: seed, ShardSync: 5 * time.Second, Poll: 300 * time.Millisecond}
	w := newWorld(cfg)
	w.invokeTime = 2 * time.Second
	for i := range cfg.Workers {
		w.start(workerID(i))
	}
	produce := func() {
		for i := range 12 {
			w.kin.Put(w.stream, fmt.Sprintf("k%d-%d", i, w.rnd.IntN(1000)), []byte("x"))
		}
	}
	if _, ok := waitFor(time.Minute, 100*time.Millisecond, func() bool { return w.balanced(cfg.Shards) }); !ok {
		return nil, []string{"the workers never shared the shards"}
	}
	// Idle: records once, invoked, then nothing until the victim publishes no horizon.
	produce()
	idle := workerID(0)
	if _, ok := waitFor(2*time.Minute, 100*time.Millisecond, func() bool { return w.invoked.Load() > 0 && w.horizon(idle) == 0 }); !ok {
		violations = append(violations, idle+" still publishes a horizon two minutes after its last record")
	}
	ls, v := w.judgeTakeover(idle, "idle", cfg.Shards)
	lines, violations = append(lines, ls...), append(violations, v...)
	ls, v = w.idleBesideBusy(workerID(1), cfg.Shards)
	lines, violations = append(lines, ls...), append(violations, v...)
	// Busy: records into every shard all along; the victim is in the middle of its invocations.
	busy := workerID(2)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			produce()
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	time.Sleep(10 * time.Second)
	// The workers invoke in waves (an invocation of 2 s, then a poll): kill the victim in the
	// middle of one, once its roster entry publishes a horizon.
	if _, ok := waitFor(time.Minute, 50*time.Millisecond, func() bool {
		w.mu.Lock()
		running := time.Since(w.lastStart[busy]) < w.invokeTime/2
		w.mu.Unlock()
		return running && w.horizon(busy) > 0
	}); !ok {
		violations = append(violations, busy+" publishes no horizon in the middle of its invocations")
	}
	ls, v = w.judgeTakeover(busy, "in the middle of an invocation", cfg.Shards)
	lines, violations = append(lines, ls...), append(violations, v...)
	close(stop)
	<-done
	time.Sleep(10 * time.Second)
	w.stopAll()
	bad, _ := w.overlaps()
	violations = append(violations, bad...)
	w.mu.Lock()
	violations = append(violations, w.faults...)
	w.mu.Unlock()
	return lines, violations
}

// horizon is the horizon worker id publishes now (zero: none, or no entry).
func (w *world) horizon(id string) time.Duration {
	r, _, err := lease.PublishedHorizon(context.Background(), w.db, w.table, id)
	if err != nil {
		panic(err)
	}
	return r
}

// judgeTakeover kills victim and waits until every shard it ran runs elsewhere, against the
// bound its last horizon gives and the promise: the lease + 2 s of the kill when it
// published no horizon, its last invocation's deadline + 2 s otherwise.
func (w *world) judgeTakeover(victim, doing string, open int) ([]Line, []string) {
	r := w.horizon(victim) // its last heartbeat's: nothing more comes from it
	w.mu.Lock()
	var theirs []string
	for shard, owner := range w.running {
		if owner == victim {
			theirs = append(theirs, shard)
		}
	}
	w.mu.Unlock()
	bound := lease.TakeoverBound(w.cfg.LeaseDuration, r)
	killed := w.kill(victim) // returns once its readers stopped: measured from the cut
	_, ok := waitFor(5*time.Minute, 50*time.Millisecond, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, s := range theirs {
			if w.running[s] == "" {
				return false
			}
		}
		return true
	})
	// Taken when the last of its shards was claimed elsewhere: kill returns only once the dead
	// worker's goroutines have ended, which may be after that.
	w.mu.Lock()
	var taken time.Time
	for _, sh := range theirs {
		taken = later(taken, w.since[sh])
	}
	last := w.lastStart[victim]
	w.mu.Unlock()
	took := taken.Sub(killed)
	promise, what := w.cfg.LeaseDuration+2*time.Second, "the lease + 2 s"
	if r > 0 {
		promise, what = last.Add(w.functionTimeout()+2*time.Second).Sub(killed), "its last invocation's deadline (start + B) + 2 s"
	}
	lines := []Line{
		{Name: fmt.Sprintf("SIGKILL %s: its %d shards run again after", doing, len(theirs)), Measured: secs(took, ok), Unit: "s",
			Target: bound.Seconds(), AtMost: true, Note: fmt.Sprintf("lease.TakeoverBound(L, its last horizon %s)", r)},
		{Name: fmt.Sprintf("SIGKILL %s: its %d shards run again after", doing, len(theirs)), Measured: secs(took, ok), Unit: "s",
			Target: promise.Seconds(), AtMost: true, Note: what + ", from the kill"},
	}
	var v []string
	for _, line := range lines {
		if !line.OK() || len(theirs) == 0 {
			v = append(v, fmt.Sprintf("%s (ran %d shards)", line, len(theirs)))
		}
	}
	return lines, v
}

// idleBesideBusy kills victim, idle, while the workers that run the other shards invoke all
// along: records flow into their shards only, each invocation runs 50 ms, and its takers'
// heartbeats are then mostly the extra ones that publish their horizons, which must count
// towards the death rule's two healthy heartbeats (a busy taker that never had them declared
// nobody dead until it went idle).
func (w *world) idleBesideBusy(victim string, open int) ([]Line, []string) {
	w.mu.Lock()
	w.invokeTime = 50 * time.Millisecond
	var busyShards []string
	for shard, owner := range w.running {
		if owner != "" && owner != victim {
			busyShards = append(busyShards, shard)
		}
	}
	w.mu.Unlock()
	keys := w.keysInto(busyShards)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			for _, k := range keys {
				w.kin.Put(w.stream, k, []byte("x"))
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var v []string
	if _, ok := waitFor(time.Minute, 50*time.Millisecond, func() bool {
		for _, id := range []string{workerID(2), workerID(3)} {
			if w.horizon(id) == 0 {
				return false
			}
		}
		return w.horizon(victim) == 0
	}); !ok {
		v = append(v, "the takers never published a horizon while "+victim+" was idle")
	}
	time.Sleep(3 * w.cfg.LeaseDuration) // busy for a while: their regular heartbeats postponed
	ls, jv := w.judgeTakeover(victim, "idle beside busy workers", open)
	close(stop)
	<-done
	w.mu.Lock()
	w.invokeTime = 2 * time.Second
	w.mu.Unlock()
	return ls, append(v, jv...)
}

// keysInto returns a partition key for each of shards (open ones), found by their hash key
// ranges: records put with them go to those shards only.
func (w *world) keysInto(shards []string) []string {
	ranges := map[string][2]*big.Int{}
	for _, s := range w.listShards() {
		if id := aws.ToString(s.ShardId); slices.Contains(shards, id) {
			lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
			hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
			ranges[id] = [2]*big.Int{lo, hi}
		}
	}
	var keys []string
	found := map[string]bool{}
	for i := 0; len(found) < len(ranges) && i < 100000; i++ {
		k := fmt.Sprintf("busy-%d", i)
		sum := md5.Sum([]byte(k))
		h := new(big.Int).SetBytes(sum[:])
		for id, r := range ranges {
			if !found[id] && h.Cmp(r[0]) >= 0 && h.Cmp(r[1]) <= 0 {
				found[id] = true
				keys = append(keys, k)
			}
		}
	}
	return keys
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
