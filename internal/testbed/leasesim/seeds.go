package leasesim

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/lease"
)

// FaultRun is one seed of the protocol under faults: 4 workers on 8 shards with records
// flowing, DynamoDB throttling, failing and losing responses at random, a split and a merge,
// two SIGKILLs (one worker restarted), and then a check of the invariants. It returns the
// violations found (none is a pass; a child read later than one claim cycle after its parents
// finished is one, and so is a run in which no child was read), the late children among them,
// what it exercised, and the faults of one worker it injected by kind.
func FaultRun(seed uint64) (violations, slowChildren []string, summary string, injected map[string]int) {
	rnd := rand.New(rand.NewPCG(seed, 99))
	var frnd = rand.New(rand.NewPCG(seed, 7))
	var fmu sync.Mutex // fault functions run concurrently
	faults := func(_ context.Context, c fakedynamo.Call) fakedynamo.Fault {
		if c.Op == fakedynamo.OpCreateTable || c.Op == fakedynamo.OpDescribeTable {
			return fakedynamo.NoFault
		}
		fmu.Lock()
		x := frnd.Float64()
		fmu.Unlock()
		switch {
		case x < 0.02:
			return fakedynamo.Throttle
		case x < 0.03:
			return fakedynamo.ServerError
		case x < 0.035:
			return fakedynamo.LoseResponse
		case x < 0.04:
			return fakedynamo.LoseResponseRetried
		}
		return fakedynamo.NoFault
	}
	cfg := Config{Shards: 8, Workers: 4, LeaseDuration: 3 * time.Second, Seed: seed, ShardSync: 5 * time.Second}
	w := newWorld(cfg, fakedynamo.WithFaults(faults))
	put := map[rec]bool{}
	produce := func(n int) {
		for range n {
			key := fmt.Sprintf("k%d", rnd.IntN(40))
			shard, seq := w.kin.Put(w.stream, key, []byte(key))
			put[rec{shard, seq}] = true
		}
	}
	unkind := w.unkindFaults(seed) // sets the function's time before the workers start
	for i := range cfg.Workers {
		w.start(workerID(i))
	}
	step := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			produce(5)
			time.Sleep(200 * time.Millisecond)
		}
	}
	step(10 * time.Second)
	open := w.openShards()
	children := w.kin.Split(w.stream, open[rnd.IntN(len(open))])
	step(4 * time.Second)
	k1 := workerID(rnd.IntN(cfg.Workers))
	w.kill(k1)
	step(3 * time.Second)
	w.start(k1) // restarted under the same id
	step(5 * time.Second)
	open = w.openShards()
	i := rnd.IntN(len(open) - 1)
	merged := w.kin.Merge(w.stream, open[i], open[i+1])
	step(2 * time.Second)
	w.mu.Lock()
	var live []string
	for id := range w.workers {
		live = append(live, id)
	}
	w.mu.Unlock()
	slices.Sort(live)
	w.kill(live[rnd.IntN(len(live))])
	step(10 * time.Second)

	// Everything put is delivered.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && w.missing(put) > 0 {
		time.Sleep(time.Second)
	}
	lost := w.missing(put)
	if lost > 0 && debugSeeds {
		ls, _ := lease.ListLeases(context.Background(), w.db, w.table)
		for _, l := range ls {
			fmt.Printf("lease %s owner=%s epoch=%d counter=%d cp=%s parents=%v children=%v\n", l.ShardID, l.Owner, l.OwnerEpoch, l.Counter, l.Checkpoint, l.Parents, l.Children)
		}
		r, _ := w.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &w.table, Key: map[string]types.AttributeValue{"leaseKey": &types.AttributeValueMemberS{Value: "!esm-workers"}}})
		fmt.Printf("roster %v\n", r.Item["workers"])
		w.mu.Lock()
		fmt.Printf("running %v\nworkers %v\n", w.running, slices.Sorted(mapsKeys(w.workers)))
		fmt.Println("logs", w.counts.n)
		stuck := map[string]bool{}
		for r := range put {
			if !w.delivered[r.shard+":"+r.seq] {
				stuck[r.shard] = true
			}
		}
		for s := range stuck {
			for _, sw := range w.workers {
				fmt.Println(time.Now().Format("15:04:05.000"), s, sw.d.DebugState(s))
			}
		}
		w.mu.Unlock()
	}
	unkind.Wait()
	w.stopAll()

	w.mu.Lock()
	defer w.mu.Unlock()
	violations = append(violations, w.faults...)
	overlaps, pairs := w.overlaps()
	violations = append(violations, overlaps...)
	if pairs == 0 {
		violations = append(violations, "no two invocations of one shard: the run judged no overlap")
	}
	if lost > 0 {
		violations = append(violations, fmt.Sprintf("%d of %d records never delivered", lost, len(put)))
	}
	// Every child was first read within one claim cycle of its parents finishing: by the end
	// of the first claim cycle that starts after the last parent's finishing checkpoint, with
	// half a cycle for that cycle's own calls.
	cycle := min(time.Second, cfg.LeaseDuration/10) // the claim interval
	lateness := time.Duration(0)
	lineagePairs := 0
	checkChild := func(child string, parents []string) {
		if len(parents) == 0 {
			violations = append(violations, fmt.Sprintf("child %s has no parents in the listing", child))
			return
		}
		// Lineage: no record of the child before every parent's last invocation ended.
		for _, p := range parents {
			if f, ok := w.firstCall[child]; ok && f.Before(w.lastEnd[p]) {
				violations = append(violations, fmt.Sprintf("child %s invoked at %s, before its parent %s's last invocation ended at %s",
					child, f.Sub(w.t0), p, w.lastEnd[p].Sub(w.t0)))
			}
		}
		var done time.Time
		for _, p := range parents {
			f, ok := w.finished[p]
			if !ok {
				violations = append(violations, fmt.Sprintf("parent %s of %s never finished", p, child))
				return
			}
			if f.After(done) {
				done = f
			}
		}
		c, ok := w.claimed[child]
		if !ok {
			violations = append(violations, fmt.Sprintf("child %s never read", child))
			return
		}
		late := c.Sub(done)
		lineagePairs++
		if w.unkindDuring(done.Add(-2*cfg.LeaseDuration), c) {
			// A worker paused or cut off meanwhile may hold the child, or be the one it is
			// placed on: its wait is the takeover's, not the claim cycle's.
			return
		}
		lateness = max(lateness, late)
		if late > cycle+cycle/2 {
			slowChildren = append(slowChildren, fmt.Sprintf("child %s first read %s after its parents finished (claim cycle %s)", child, late, cycle))
		}
	}
	for _, c := range children {
		checkChild(c, w.parentsOf(c))
	}
	checkChild(merged, w.parentsOf(merged))
	if lineagePairs == 0 {
		violations = append(violations, "no child was read after its parents finished: the run exercised no lineage")
	}
	violations = append(violations, slowChildren...)
	summary = fmt.Sprintf("%d records, %d invocations of %s, %d DynamoDB faults, %s, %d moves, %d children read at most %s (%.2f claim cycles) after their parents finished",
		len(put), w.invoked.Load(), w.invokeTime, w.db.TableStats(w.table).Faults, w.injectedSummary(), w.moves, lineagePairs, lateness.Round(time.Millisecond), float64(lateness)/float64(cycle))
	return violations, slowChildren, summary, maps.Clone(w.injected)
}

// openShards lists the open shards in hash key order (neighbours can be merged).
func (w *world) openShards() []string {
	type sh struct {
		id string
		lo *big.Int
	}
	var out []sh
	for _, s := range w.listShards() {
		if s.SequenceNumberRange.EndingSequenceNumber == nil {
			lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
			out = append(out, sh{aws.ToString(s.ShardId), lo})
		}
	}
	slices.SortFunc(out, func(a, b sh) int { return a.lo.Cmp(b.lo) })
	ids := make([]string, len(out))
	for i, s := range out {
		ids[i] = s.id
	}
	return ids
}

func (w *world) listShards() []ktypes.Shard {
	out, err := w.kin.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String(w.stream)})
	if err != nil {
		panic(err)
	}
	return out.Shards
}

func (w *world) parentsOf(child string) []string {
	for _, s := range w.listShards() {
		if aws.ToString(s.ShardId) == child {
			var ps []string
			for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
				if p != nil {
					ps = append(ps, *p)
				}
			}
			return ps
		}
	}
	return nil
}

// missing counts the records put but not delivered.
var debugSeeds = false

type rec struct{ shard, seq string }

func (w *world) missing(put map[rec]bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for r := range put {
		if !w.delivered[r.shard+":"+r.seq] {
			n++
		}
	}
	return n
}

// deliveries notes the records of an invocation payload.
func (w *world) noteDelivered(payload []byte) {
	var ev struct {
		Records []struct {
			EventID string `json:"eventID"`
		} `json:"Records"`
	}
	if json.Unmarshal(payload, &ev) != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range ev.Records {
		w.delivered[r.EventID] = true
	}
}

// Fault kinds of one worker, counted in world.injected.
const (
	faultCutDynamo  = "partition-dynamodb"
	faultCutKinesis = "partition-kinesis"
	faultCutBoth    = "partition-dynamodb-and-kinesis"
	faultCutFunc    = "partition-function"
	faultPause      = "pause"
	faultPauseSplit = "pause-across-reshard"
)

// unkindFaults plays, beside the run's own steps, the faults that hit one worker while the
// others see everything: a slow function for half the seeds (as long as the lease or longer,
// so that an invocation outlasts a partition's detection), two partitions of one worker (from
// DynamoDB, Kinesis, both, or its function), a pause at any instant, and a pause across the
// split at 10 s long enough for the parent to finish, its children to start and its finished
// lease to be deleted meanwhile. Its own random stream leaves the run's other choices alone.
func (w *world) unkindFaults(seed uint64) *sync.WaitGroup {
	rng := rand.New(rand.NewPCG(seed, 0xfa17))
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	lease := w.cfg.LeaseDuration
	if rng.IntN(2) == 0 {
		w.mu.Lock()
		w.invokeTime = dur(lease/2, 2*lease)
		w.mu.Unlock()
	}
	var wg sync.WaitGroup
	at := func(t time.Duration, kind string, worker string, d time.Duration, on, off func(l *link)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(t)
			w.mu.Lock()
			sw := w.workers[worker]
			if sw != nil {
				w.injected[kind]++
			}
			w.mu.Unlock()
			if sw == nil {
				return
			}
			sw.link.set(on)
			from := time.Now()
			time.Sleep(d)
			sw.link.set(off)
			w.mu.Lock()
			w.unkind = append(w.unkind, [2]time.Time{from, time.Now()})
			w.mu.Unlock()
		}()
	}
	cuts := []struct {
		kind string
		set  func(l *link, v bool)
	}{
		{faultCutDynamo, func(l *link, v bool) { l.cutDynamo = v }},
		{faultCutKinesis, func(l *link, v bool) { l.cutKinesis = v }},
		{faultCutBoth, func(l *link, v bool) { l.cutDynamo, l.cutKinesis = v, v }},
		{faultCutFunc, func(l *link, v bool) { l.cutFunc = v }},
	}
	// The second partition outlasts any takeover's wait (the lease, and the invocation bound).
	bound := max(invoke.DefaultTimeout, w.invokeTime.Truncate(time.Second)+time.Second)
	for i, window := range [][2]time.Duration{{time.Second, 9 * time.Second}, {16 * time.Second, 30 * time.Second}} {
		c := cuts[rng.IntN(len(cuts))]
		d := dur(lease/2, 4*lease)
		if i == 1 {
			d = lease + 2*bound + dur(0, lease)
		}
		at(dur(window[0], window[1]), c.kind, workerID(rng.IntN(w.cfg.Workers)), d,
			func(l *link) { c.set(l, true) }, func(l *link) { c.set(l, false) })
	}
	pause := func(kind string, t, d time.Duration) {
		at(t, kind, workerID(rng.IntN(w.cfg.Workers)), d, func(l *link) { l.pausedUntil = time.Now().Add(d) }, func(*link) {})
	}
	pause(faultPause, dur(time.Second, 30*time.Second), dur(lease/2, 3*lease))
	pause(faultPauseSplit, 10*time.Second-dur(0, 2*time.Second), 2*lease+2*w.cfg.ShardSync+dur(0, 10*time.Second))
	return &wg
}

// injectedSummary lists the faults of one worker that took effect.
func (w *world) injectedSummary() string {
	var parts []string
	for _, k := range slices.Sorted(mapsKeys(w.injected)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, w.injected[k]))
	}
	return strings.Join(parts, ", ")
}

// unkindDuring reports whether a fault of one worker was on at some time in [from, to]. Called
// with w.mu held.
func (w *world) unkindDuring(from, to time.Time) bool {
	for _, f := range w.unkind {
		if f[0].Before(to) && f[1].After(from) {
			return true
		}
	}
	return false
}
