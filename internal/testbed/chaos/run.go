package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

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
	// Source is the stream the workers read (default SourceKinesis).
	Source Source
	// KinesisEndpoint and DynamoEndpoint are kinesis-local's and dynalite's base URLs: the
	// Kinesis stream's (SourceKinesis) and the lease table's.
	KinesisEndpoint, DynamoEndpoint string
	// DDBStreamsEndpoint is ddb-local's base URL (SourceDynamoDB): the table and its stream,
	// whose shards rotate every Rotate.
	DDBStreamsEndpoint string
	// Rotate is ddb-local's shard rotation period (SourceDynamoDB; it must be what ddb-local was
	// started with: the run deals faults just before rotations). It should be a few seconds,
	// so that the load sees several. Default 3s.
	Rotate time.Duration
	// MinRotations is how many parent→child pairs of shards a DynamoDB stream must have had,
	// with invocations of both, for the run to count (default 3).
	MinRotations int
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
	c.Source = cmp.Or(c.Source, SourceKinesis)
	c.Rotate = cmp.Or(c.Rotate, 3*time.Second)
	c.MinRotations = cmp.Or(c.MinRotations, 3)
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Result is what a run injected and what the judge found.
type Result struct {
	Seed   uint64
	Source Source
	Stream string         // its name, or a DynamoDB stream's ARN
	Faults map[string]int // per kind, e.g. "dynamodb 5xx", "sigkill", "partition kinesis"
	Events []FaultEvent   // the process faults and partitions, in order
	// Reshards is what the stream went through, e.g. "split shardId-…: 2 → 3" (Kinesis) or
	// "24 rotations over 26 shards" (DynamoDB).
	Reshards []string
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
// shard when its first record was put (of a DynamoDB stream, known once the run is over: the
// earliest write of a change delivered from it).
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
	var f feed
	var err error
	switch cfg.Source {
	case SourceKinesis:
		f, err = newKinesisFeed(ctx, cfg, name)
	case SourceDynamoDB:
		// The producer draws its writes from the seed (a source of its own).
		f, err = newDDBFeed(ctx, cfg, name, cfg.Seed)
	default:
		err = fmt.Errorf("source %q: want %s or %s", cfg.Source, SourceKinesis, SourceDynamoDB)
	}
	if err != nil {
		return nil, err
	}
	defer f.remove(context.WithoutCancel(ctx))
	res := &Result{Seed: cfg.Seed, Source: cfg.Source, Stream: f.stream()}

	fn, err := NewFunctionServer(rng.Uint64(), cfg.FunctionTimeout*9/10, cfg.Source)
	if err != nil {
		return nil, err
	}
	defer fn.Close()
	counts := &Counts{}
	targets := [numServices]string{Kinesis: cfg.KinesisEndpoint, DynamoDB: cfg.DynamoEndpoint, Function: fn.URL(), DynamoDBStreams: cfg.DDBStreamsEndpoint}
	workers, err := startWorkers(cfg, f.stream(), name+"-leases", rng, targets, counts)
	defer func() {
		for _, w := range workers {
			w.Kill()
			_ = w.Proxy.Close()
			_ = w.logf.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	res.Workers = workers

	r := &runner{cfg: cfg, feed: f, fn: fn, counts: counts, workers: workers,
		busy: make([]bool, len(workers)), produced: Produced{Written: map[string]int{}, FirstPut: map[string]time.Time{}}}
	if err := r.load(ctx, rng); err != nil {
		return nil, err
	}
	if err := r.drain(ctx); err != nil {
		return nil, err
	}
	end, err := r.stop(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.judge(ctx, res, end); err != nil {
		return nil, err
	}
	return res, nil
}

// faultRates are the chances of each proxy fault, per service and request.
var faultRates = [numServices]Rates{
	Kinesis:  {ServerError: 0.02, Throttle: 0.03, DropBefore: 0.01, DropAfter: 0.01},
	DynamoDB: {ServerError: 0.02, Throttle: 0.02, DropBefore: 0.01, DropAfter: 0.01},
	Function: {ServerError: 0.02, Throttle: 0.02, DropBefore: 0.01, DropAfter: 0.02},
	// GetRecords of an open DynamoDB stream shard is called as often as Kinesis's.
	DynamoDBStreams: {ServerError: 0.02, Throttle: 0.03, DropBefore: 0.01, DropAfter: 0.01},
}

// startWorkers starts cfg.Workers esm processes on stream with lease table leases, each through
// a fault proxy of its own in front of targets. It returns the workers made so far with an error
// too: the caller stops them.
func startWorkers(cfg Config, stream, leases string, rng *rand.Rand, targets [numServices]string, counts *Counts) ([]*Worker, error) {
	var workers []*Worker
	for i := range cfg.Workers {
		id := fmt.Sprintf("w%d", i+1)
		p, err := NewProxy(id, rng.Uint64(), targets, faultRates, counts)
		if err != nil {
			return workers, err
		}
		logf, err := os.Create(filepath.Join(cfg.Dir, fmt.Sprintf("%s-seed%d-%s.log", cfg.Source, cfg.Seed, id)))
		if err != nil {
			_ = p.Close()
			return workers, err
		}
		w := &Worker{ID: id, Proxy: p, bin: cfg.ESM, dir: cfg.Dir, logf: logf, env: workerEnv(), args: workerArgs(cfg, stream, leases, id, p.URL())}
		workers = append(workers, w)
		if err := w.Start(); err != nil {
			return workers, err
		}
	}
	return workers, nil
}

// load produces, reshapes the stream and deals faults until the end of the duration.
func (r *runner) load(ctx context.Context, rng *rand.Rand) error {
	loadCtx, stopLoad := context.WithTimeout(ctx, r.cfg.Duration)
	defer stopLoad()
	var wg sync.WaitGroup
	var produceErr error
	wg.Go(func() { produceErr = r.feed.produce(loadCtx, r) })
	// Each goroutine gets a source of its own, drawn here: rng is not safe for concurrent use.
	reshapeRng := rand.New(rand.NewPCG(rng.Uint64(), 1))
	wg.Go(func() { r.reshape(loadCtx, reshapeRng) })
	// Two dealers of faults, so that faults overlap on different workers; one with two workers.
	for d := range min(2, r.cfg.Workers-1) {
		dealerRng := rand.New(rand.NewPCG(rng.Uint64(), 2+uint64(d)))
		wg.Go(func() { r.faults(loadCtx, dealerRng) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return produceErr
}

// drain heals and runs every worker until every record was delivered (or the drain's budget is
// spent, and the judge reports what is missing).
func (r *runner) drain(ctx context.Context) error {
	for _, w := range r.workers {
		for s := range numServices {
			w.Proxy.Heal(s)
		}
		w.Resume()
		if !w.Running() {
			if err := w.Start(); err != nil {
				return err
			}
		}
	}
	r.cfg.Logf("seed %d: load ended, %d records written; draining", r.cfg.Seed, r.total())
	drainUntil := time.Now().Add(60*time.Second + r.cfg.Duration/2)
	for time.Now().Before(drainUntil) && !r.allDelivered() {
		if !ctxwait.Sleep(ctx, 250*time.Millisecond) {
			return ctx.Err()
		}
		for _, w := range r.workers { // a worker that exited on its own is judged, and restarted
			if !w.Running() {
				if err := w.Start(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// stop stops every worker cleanly, then waits for the invocations still running (a killed
// worker's) to end, and returns when the stop was done.
func (r *runner) stop(ctx context.Context) (time.Time, error) {
	var stopWG sync.WaitGroup
	for _, w := range r.workers {
		stopWG.Go(func() { _ = w.Term(termWait) })
	}
	stopWG.Wait()
	end := time.Now()
	for r.fn.InFlight() > 0 {
		if !ctxwait.Sleep(ctx, 50*time.Millisecond) {
			return end, ctx.Err()
		}
	}
	return end, nil
}

// judge fills res with what the run injected and the judge's verdicts.
func (r *runner) judge(ctx context.Context, res *Result, end time.Time) error {
	invs := r.fn.Invocations()
	lineage, err := r.feed.settle(ctx, invs, &r.produced)
	if err != nil {
		return err
	}
	var exits []Exit
	for _, w := range r.workers {
		exits = append(exits, w.Exits()...)
	}
	res.Faults = r.counts.Snapshot()
	res.Events = r.events
	res.Reshards = r.reshards
	in := Input{Invocations: invs, Produced: r.produced, Lineage: lineage,
		Events: r.events, Exits: exits, MaxChildWait: r.cfg.MaxChildWait, Resharded: len(r.reshards) > 0, End: end,
		InFlight: InFlightAllowance(r.cfg.LeaseDuration, r.cfg.FunctionTimeout), Recent: recentWindow(r.cfg.LeaseDuration)}
	if r.cfg.Source == SourceDynamoDB {
		// Its shards rotate by themselves: the run must have seen enough of it, kills included.
		in.Resharded = true
		in.Required = Required{Rotations: r.cfg.MinRotations, Kills: 1}
		res.Reshards = []string{fmt.Sprintf("shards rotating every %s: %d shards, %d of them children", r.cfg.Rotate, len(lineage), children(lineage))}
	}
	res.Verdicts, res.Stats = Judge(in)
	res.Verdicts = append(res.Verdicts, r.feed.verdicts(invs)...)
	return r.keep(invs)
}

// keep writes the invocations, one JSON object a line, next to the workers' logs, for a look
// after a failure.
func (r *runner) keep(invs []Invocation) error {
	f, err := os.Create(filepath.Join(r.cfg.Dir, fmt.Sprintf("%s-seed%d-invocations.jsonl", r.cfg.Source, r.cfg.Seed)))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, inv := range invs {
		if err := enc.Encode(inv); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// InFlightAllowance is what a worker faulted with an invocation in flight adds to the time its
// shards may wait for a taker, as lease/DESIGN.md gives it: the takeover bound for the horizon
// a busy worker publishes (half a claim interval and B, the function timeout plus 10 s out of
// process, in tenths of a second) less the bound for an idle one (L + 2 claim intervals).
func InFlightAllowance(leaseDuration, timeout time.Duration) time.Duration {
	busy := lease.BusyHorizon(leaseDuration, timeout+10*time.Second)
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
func workerArgs(cfg Config, stream, leases, id, proxy string) []string {
	args := []string{"run", "--stream", stream, "--lease-table", leases, "--worker-id", id,
		"--endpoint-url", proxy, "--function-name", "chaos", "--timeout", cfg.FunctionTimeout.String(),
		"--lease-duration", cfg.LeaseDuration.String(), "--batch-size", "20", "--poll-interval", "200ms",
		"--shard-sync-interval", "2s", "--shutdown-grace", "10s", "--log-level", "debug",
		"--state-dir", filepath.Join(cfg.Dir, "state-"+leases+"-"+id)}
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
	feed    feed
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
