package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/lease"
)

// Config is one chaos run.
type Config struct {
	Seed     uint64
	Duration time.Duration // of load and faults; the drain comes after
	Workers  int           // esm processes (default 3)
	// ESM is the esm binary, built as "make build" builds it.
	ESM string
	// KinesisEndpoint and DynamoEndpoint are kinesis-local's and dynalite's base URLs.
	KinesisEndpoint, DynamoEndpoint string
	// Dir holds the workers' logs and state directories.
	Dir string
	// LeaseDuration and FunctionTimeout are the workers' --lease-duration and --timeout
	// (defaults 3s and 4s). Invocations last up to 0.9 of the timeout.
	LeaseDuration, FunctionTimeout time.Duration
	// Flags are more "esm run" flags for every worker, after the run's own (so they win).
	Flags []string
	// Keys is the number of partition keys the producer writes (default 6), one record of each
	// per put, every 250 ms.
	Keys int
	// MaxChildWait is the longest a child shard may wait once its parents are done (default 15s).
	MaxChildWait time.Duration
	// Logf reports progress (default: nothing).
	Logf func(format string, args ...any)
}

func (c *Config) defaults() {
	c.Workers = cmp.Or(c.Workers, 3)
	c.LeaseDuration = cmp.Or(c.LeaseDuration, 3*time.Second)
	c.FunctionTimeout = cmp.Or(c.FunctionTimeout, 4*time.Second)
	c.Keys = cmp.Or(c.Keys, 6)
	c.MaxChildWait = cmp.Or(c.MaxChildWait, 15*time.Second)
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Result is what a run injected and what the judge found.
type Result struct {
	Seed     uint64
	Stream   string
	Faults   map[string]int // per kind, e.g. "dynamodb 5xx", "sigkill", "partition kinesis"
	Events   []FaultEvent   // the process faults and partitions, in order
	Reshards []string       // what the stream went through, e.g. "split shardId-…: 2 → 3"
	Verdicts []Verdict
	Stats    Stats
	Workers  []*Worker
}

// OK reports whether every verdict held.
func (r *Result) OK() bool {
	for _, v := range r.Verdicts {
		if !v.OK {
			return false
		}
	}
	return len(r.Verdicts) > 0
}

// FaultEvent is one process fault or partition of one worker, from From to To.
type FaultEvent struct {
	Kind     string // "sigkill", "sigstop", "sigterm", "sigterm at start-up", "partition dynamodb", …
	Worker   string
	From, To time.Time
}

// Produced is what the producer wrote: per key, how many records ("key:0" … "key:n-1"), and per
// shard when its first record was put.
type Produced struct {
	Written  map[string]int
	FirstPut map[string]time.Time
}

// Run runs the workers under faults for cfg.Duration, drains, stops them and judges the run.
// An error means the run could not be carried out (an emulator failed); violations are verdicts.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6368616f73))
	name := fmt.Sprintf("chaos-%d-%d", cfg.Seed, time.Now().UnixNano())
	res := &Result{Seed: cfg.Seed, Stream: name}
	awsCfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		return nil, err
	}
	kc := local.NewKinesisClient(awsCfg, cfg.KinesisEndpoint)
	if _, err := local.CreateStream(ctx, kc, name, 2); err != nil {
		return nil, err
	}
	defer func() {
		_, _ = kc.DeleteStream(context.WithoutCancel(ctx), &kinesis.DeleteStreamInput{StreamName: aws.String(name), EnforceConsumerDeletion: aws.Bool(true)})
	}()

	fn, err := NewFunctionServer(rng.Uint64(), cfg.FunctionTimeout*9/10)
	if err != nil {
		return nil, err
	}
	defer fn.Close()
	counts := &Counts{}
	rates := [numServices]Rates{
		Kinesis:  {ServerError: 0.02, Throttle: 0.03, DropBefore: 0.01, DropAfter: 0.01},
		DynamoDB: {ServerError: 0.02, Throttle: 0.02, DropBefore: 0.01, DropAfter: 0.01},
		Function: {ServerError: 0.02, Throttle: 0.02, DropBefore: 0.01, DropAfter: 0.02},
	}
	targets := [numServices]string{Kinesis: cfg.KinesisEndpoint, DynamoDB: cfg.DynamoEndpoint, Function: fn.URL()}
	var workers []*Worker
	defer func() {
		for _, w := range workers {
			w.Kill()
			_ = w.Proxy.Close()
			_ = w.logf.Close()
		}
	}()
	for i := range cfg.Workers {
		id := fmt.Sprintf("w%d", i+1)
		p, err := NewProxy(id, rng.Uint64(), targets, rates, counts)
		if err != nil {
			return nil, err
		}
		logf, err := os.Create(filepath.Join(cfg.Dir, fmt.Sprintf("seed%d-%s.log", cfg.Seed, id)))
		if err != nil {
			_ = p.Close()
			return nil, err
		}
		w := &Worker{ID: id, Proxy: p, bin: cfg.ESM, dir: cfg.Dir, logf: logf, env: workerEnv(), args: workerArgs(cfg, name, id, p.URL())}
		workers = append(workers, w)
		if err := w.Start(); err != nil {
			return nil, err
		}
	}
	res.Workers = workers

	// Load and faults until the end of the duration.
	r := &runner{cfg: cfg, kc: kc, stream: name, fn: fn, counts: counts, workers: workers,
		busy: make([]bool, len(workers)), produced: Produced{Written: map[string]int{}, FirstPut: map[string]time.Time{}}}
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	var wg sync.WaitGroup
	var produceErr error
	wg.Go(func() { produceErr = r.produce(loadCtx) })
	// Each goroutine gets a source of its own, drawn here: rng is not safe for concurrent use.
	reshardRng := rand.New(rand.NewPCG(rng.Uint64(), 1))
	wg.Go(func() { r.reshard(loadCtx, reshardRng) })
	// Two dealers of faults, so that faults overlap on different workers; one with two workers.
	for d := range min(2, cfg.Workers-1) {
		dealerRng := rand.New(rand.NewPCG(rng.Uint64(), 2+uint64(d)))
		wg.Go(func() { r.faults(loadCtx, dealerRng) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if produceErr != nil {
		return nil, produceErr
	}

	// Drain: everyone healed and running, until every record was delivered (or the drain's
	// budget is spent, and the judge reports what is missing).
	for _, w := range workers {
		for s := range numServices {
			w.Proxy.Heal(s)
		}
		w.Resume()
		if !w.Running() {
			if err := w.Start(); err != nil {
				return nil, err
			}
		}
	}
	cfg.Logf("seed %d: load ended, %d records written; draining", cfg.Seed, r.total())
	drainUntil := time.Now().Add(60*time.Second + cfg.Duration/2)
	for time.Now().Before(drainUntil) && !r.allDelivered() {
		if !ctxwait.Sleep(ctx, 250*time.Millisecond) {
			return nil, ctx.Err()
		}
		for _, w := range workers { // a worker that exited on its own is judged, and restarted
			if !w.Running() {
				if err := w.Start(); err != nil {
					return nil, err
				}
			}
		}
	}
	// A clean stop of every worker, then the invocations still running (a killed worker's) end.
	var stopWG sync.WaitGroup
	for _, w := range workers {
		stopWG.Go(func() { _ = w.Term(termWait) })
	}
	stopWG.Wait()
	end := time.Now()
	for fn.InFlight() > 0 {
		if !ctxwait.Sleep(ctx, 50*time.Millisecond) {
			return nil, ctx.Err()
		}
	}

	lineage, err := local.Lineage(ctx, kc, name)
	if err != nil {
		return nil, err
	}
	var exits []Exit
	for _, w := range workers {
		exits = append(exits, w.Exits()...)
	}
	res.Faults = counts.Snapshot()
	res.Events = r.events
	res.Reshards = r.reshards
	res.Verdicts, res.Stats = Judge(Input{Invocations: fn.Invocations(), Produced: r.produced, Lineage: lineage,
		Events: r.events, Exits: exits, MaxChildWait: cfg.MaxChildWait, Resharded: len(r.reshards) > 0, End: end,
		InFlight: InFlightAllowance(cfg.LeaseDuration, cfg.FunctionTimeout), Recent: recentWindow(cfg.LeaseDuration)})
	return res, nil
}

// InFlightAllowance is what a worker faulted with an invocation in flight adds to the time its
// shards may wait for a taker, as lease/DESIGN.md gives it: the takeover bound for the horizon
// a busy worker publishes (a heartbeat period, a claim interval and B, the function timeout plus
// 10 s out of process) less the bound for an idle one (L + 4 claim intervals).
func InFlightAllowance(leaseDuration, timeout time.Duration) time.Duration {
	busy := lease.BusyHorizon(leaseDuration, timeout+10*time.Second)
	busy = (busy + time.Second - 1).Truncate(time.Second) // published in whole seconds
	return lease.TakeoverBound(leaseDuration, busy) - lease.TakeoverBound(leaseDuration, 0)
}

// recentWindow is how long before a fault an invocation that ended may still have made the
// faulted worker's last heartbeat publish a busy horizon: two heartbeat periods and a claim
// interval.
func recentWindow(leaseDuration time.Duration) time.Duration {
	return 2*leaseDuration/3 + min(time.Second, leaseDuration/10)
}

// termWait is how long a worker may take to stop after SIGTERM: its --shutdown-grace and the
// release of its leases.
const termWait = 20 * time.Second

// workerArgs are the "esm run" arguments of worker id: everything through its proxy.
func workerArgs(cfg Config, stream, id, proxy string) []string {
	args := []string{"run", "--stream", stream, "--lease-table", stream + "-leases", "--worker-id", id,
		"--endpoint-url", proxy, "--function-name", "chaos", "--timeout", cfg.FunctionTimeout.String(),
		"--lease-duration", cfg.LeaseDuration.String(), "--batch-size", "20", "--poll-interval", "200ms",
		"--shard-sync-interval", "2s", "--shutdown-grace", "10s", "--log-level", "debug",
		"--state-dir", filepath.Join(cfg.Dir, "state-"+stream+"-"+id)}
	// A pool of function endpoints, so that every shard the worker holds can be invoked at once
	// (each HTTP endpoint takes one invocation at a time).
	for e := range 8 {
		args = append(args, "--invoke", fmt.Sprintf("%s/e%d", proxy, e))
	}
	return append(args, cfg.Flags...)
}

// workerEnv is this process's environment without AWS or ESM settings, with placeholder
// credentials: the workers reach AWS only through --endpoint-url.
func workerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "ESM_") {
			env = append(env, kv)
		}
	}
	return append(env, "AWS_ACCESS_KEY_ID=AKIDLOCAL", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION="+local.DefaultRegion,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true")
}

// runner is the state of one run's load and faults.
type runner struct {
	cfg     Config
	kc      *kinesis.Client
	stream  string
	fn      *FunctionServer
	counts  *Counts
	workers []*Worker

	mu       sync.Mutex
	busy     []bool // a worker under a fault takes no other
	events   []FaultEvent
	reshards []string
	produced Produced
}

func (r *runner) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.produced.Written {
		n += v
	}
	return n
}

// allDelivered reports whether every record written was in an invocation that ended.
func (r *runner) allDelivered() bool {
	seen := map[string]bool{}
	for _, inv := range r.fn.Invocations() {
		for _, rec := range inv.Records {
			seen[rec.Data] = true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, n := range r.produced.Written {
		for i := range n {
			if !seen[k+":"+strconv.Itoa(i)] {
				return false
			}
		}
	}
	return true
}

// produce puts one record of each key every 250 ms, the next of a key only once the previous one
// was accepted, so that each key's records are in the stream in order.
func (r *runner) produce(ctx context.Context) error {
	keys := make([]string, r.cfg.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key%02d", i)
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		r.mu.Lock()
		in := &kinesis.PutRecordsInput{StreamName: aws.String(r.stream)}
		for _, k := range keys {
			in.Records = append(in.Records, types.PutRecordsRequestEntry{PartitionKey: aws.String(k),
				Data: []byte(k + ":" + strconv.Itoa(r.produced.Written[k]))})
		}
		r.mu.Unlock()
		out, err := r.kc.PutRecords(ctx, in)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.cfg.Logf("put records: %v (retrying)", err)
			continue
		}
		now := time.Now()
		r.mu.Lock()
		for i, e := range out.Records {
			if e.ErrorCode != nil {
				continue
			}
			r.produced.Written[keys[i]]++
			if s := aws.ToString(e.ShardId); r.produced.FirstPut[s].IsZero() {
				r.produced.FirstPut[s] = now
			}
		}
		r.mu.Unlock()
	}
}

// reshard splits, merges and rescales the stream under load: a split at 15% of the duration, a
// merge at 35%, UpdateShardCount to 4 at 55% and to 2 at 75%. Half the time a worker is paused
// past its lease (mid-invocation) just before the change, so that the others finish (and clean
// up) the parents while it sleeps.
func (r *runner) reshard(ctx context.Context, rng *rand.Rand) {
	start := time.Now()
	steps := []struct {
		at   float64
		name string
		do   func(context.Context) (string, error)
	}{
		{0.15, "split", func(ctx context.Context) (string, error) {
			open, err := local.OpenShards(ctx, r.kc, r.stream)
			if err != nil || len(open) == 0 {
				return "", cmp.Or(err, errors.New("no open shard"))
			}
			id := aws.ToString(open[rng.IntN(len(open))].ShardId)
			return "split " + id, local.SplitInHalf(ctx, r.kc, r.stream, id)
		}},
		{0.35, "merge", func(ctx context.Context) (string, error) {
			a, b, err := local.MergeFirstAdjacent(ctx, r.kc, r.stream)
			return "merge " + a + " " + b, err
		}},
		{0.55, "update", func(ctx context.Context) (string, error) {
			return "UpdateShardCount 4", local.Resize(ctx, r.kc, r.stream, 4)
		}},
		{0.75, "update", func(ctx context.Context) (string, error) {
			return "UpdateShardCount 2", local.Resize(ctx, r.kc, r.stream, 2)
		}},
	}
	var pauses sync.WaitGroup
	defer pauses.Wait()
	for _, s := range steps {
		at := start.Add(time.Duration(s.at * float64(r.cfg.Duration)))
		if rng.IntN(2) == 0 {
			pauseAt := at.Add(-1300 * time.Millisecond)
			if !ctxwait.Sleep(ctx, time.Until(pauseAt)) {
				return
			}
			if i, ok := r.claim(rng); ok {
				r.fn.SlowFor(r.workers[i].ID, time.Second) // paused 1 s later, mid-invocation
				d := r.cfg.LeaseDuration + time.Duration(2000+rng.IntN(3000))*time.Millisecond
				pauses.Go(func() {
					ctxwait.Sleep(ctx, time.Second)
					r.pause(ctx, i, d, "sigstop across a reshard")
				})
			}
		}
		if !ctxwait.Sleep(ctx, time.Until(at)) {
			return
		}
		before, _ := local.OpenShards(ctx, r.kc, r.stream)
		what, err := s.do(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logf("reshard %s: %v", s.name, err)
				r.counts.AddKind("reshard failed")
			}
			continue
		}
		after, _ := local.OpenShards(ctx, r.kc, r.stream)
		r.counts.AddKind(s.name)
		r.mu.Lock()
		r.reshards = append(r.reshards, fmt.Sprintf("%s: %d → %d open shards", what, len(before), len(after)))
		r.mu.Unlock()
	}
}

// claim picks a running worker that is under no other fault and marks it busy.
func (r *runner) claim(rng *rand.Rand) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var free []int
	for i, w := range r.workers {
		if !r.busy[i] && w.Running() {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return 0, false
	}
	i := free[rng.IntN(len(free))]
	r.busy[i] = true
	return i, true
}

// restartExited starts again the workers that exited on their own.
func (r *runner) restartExited() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.workers {
		if !r.busy[i] && !w.Running() {
			if err := w.Start(); err != nil {
				r.cfg.Logf("restart %s: %v", w.ID, err)
			}
		}
	}
}

func (r *runner) release(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.busy[i] = false
}

func (r *runner) record(kind string, i int, from time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, FaultEvent{Kind: kind, Worker: r.workers[i].ID, From: from, To: time.Now()})
	r.counts.AddKind(kind)
}

// pause stops worker i for d (past its lease), then resumes it.
func (r *runner) pause(ctx context.Context, i int, d time.Duration, kind string) {
	defer r.release(i)
	w := r.workers[i]
	from := time.Now()
	w.Pause()
	ctxwait.Sleep(ctx, d)
	w.Resume()
	r.record(kind, i, from)
}

// processKinds and partitionKinds are the faults the schedule deals, one worker at a time.
var faultKinds = []string{"partition dynamodb", "partition kinesis", "partition dynamodb+kinesis", "partition function",
	"sigkill", "sigstop", "sigterm"}

// faults deals faults to the workers from a shuffled deck of every kind, one every 1–3 s after
// the previous one ended, after a 2–4 s start. It restarts a worker that exited on its own (the
// judge reports the exit).
func (r *runner) faults(ctx context.Context, rng *rand.Rand) {
	if !ctxwait.Sleep(ctx, time.Duration(2000+rng.IntN(2000))*time.Millisecond) {
		return
	}
	var deck []string
	for {
		r.restartExited()
		if len(deck) == 0 {
			deck = slices.Clone(faultKinds)
			rng.Shuffle(len(deck), func(a, b int) { deck[a], deck[b] = deck[b], deck[a] })
		}
		kind := deck[0]
		deck = deck[1:]
		i, ok := r.claim(rng)
		if ok {
			if kind != "sigterm" { // a stop waits for its invocations anyway
				r.fn.SlowFor(r.workers[i].ID, 1500*time.Millisecond)
				ctxwait.Sleep(ctx, time.Second)
			}
			r.inject(ctx, rng, i, kind)
		}
		if !ctxwait.Sleep(ctx, time.Duration(1000+rng.IntN(2000))*time.Millisecond) {
			return
		}
	}
}

// inject applies one fault to worker i (claimed) and waits for its end.
func (r *runner) inject(ctx context.Context, rng *rand.Rand, i int, kind string) {
	w := r.workers[i]
	lease := r.cfg.LeaseDuration
	from := time.Now()
	switch kind {
	case "sigstop":
		r.pause(ctx, i, lease+time.Duration(500+rng.IntN(4500))*time.Millisecond, kind)
		return
	case "sigkill":
		defer r.release(i)
		w.Kill()
		r.record(kind, i, from)
		ctxwait.Sleep(context.WithoutCancel(ctx), time.Duration(500+rng.IntN(2500))*time.Millisecond)
		if err := w.Start(); err != nil {
			r.cfg.Logf("restart %s: %v", w.ID, err)
		}
		return
	case "sigterm":
		defer r.release(i)
		w.AwaitLogging(10 * time.Second)
		from = time.Now()
		if err := w.Term(termWait); err != nil {
			r.cfg.Logf("%v", err)
		}
		r.record(kind, i, from)
		if err := w.Start(); err != nil {
			r.cfg.Logf("restart %s: %v", w.ID, err)
			return
		}
		if rng.IntN(2) == 0 { // again, while it starts (describing the stream and the lease table)
			w.AwaitLogging(10 * time.Second)
			ctxwait.Sleep(context.WithoutCancel(ctx), time.Duration(rng.IntN(1000))*time.Millisecond)
			from = time.Now()
			if err := w.Term(termWait); err != nil {
				r.cfg.Logf("%v", err)
			}
			r.record("sigterm at start-up", i, from)
			if err := w.Start(); err != nil {
				r.cfg.Logf("restart %s: %v", w.ID, err)
			}
		}
		return
	}
	defer r.release(i)
	var cut []Service
	switch kind {
	case "partition dynamodb":
		cut = []Service{DynamoDB}
	case "partition kinesis":
		cut = []Service{Kinesis}
	case "partition dynamodb+kinesis":
		cut = []Service{DynamoDB, Kinesis}
	case "partition function":
		cut = []Service{Function}
	}
	for _, s := range cut {
		w.Proxy.Partition(s)
	}
	ctxwait.Sleep(ctx, lease+time.Duration(500+rng.IntN(4500))*time.Millisecond)
	for _, s := range cut {
		w.Proxy.Heal(s)
	}
	r.record(kind, i, from)
}
