// Package poller is the engine of esm: it reads every shard of a Kinesis stream in lineage order
// (parents drained before children), batches records as Lambda's event source mapping does,
// invokes the function and keeps durable checkpoints.
//
// One coordinator goroutine owns the shard graph. It starts one reader goroutine per shard whose
// parents are finished, learns of new shards from the ChildShards a reader sees at the end of its
// shard and from a periodic ListShards, and stops every reader on shutdown. See DESIGN.md.
package poller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/filter"
	"github.com/kinesis-esm/esm/invoke"
)

// KinesisAPI is the part of the Kinesis client the poller reads with.
type KinesisAPI interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
	// DescribeStreamSummary gives the stream's retention period (see readRetention).
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// Invoker runs the function once with an event payload. A nil error means the function was
// reached (see invoke.Response for success versus function error); a non-nil error means it was
// not (throttled or unavailable) and the same batch is tried again.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) (invoke.Response, error)
}

// ErrStreamNotFound is returned by Run when the stream does not exist.
var ErrStreamNotFound = errors.New("stream not found")

// Poller runs one event source mapping. Create it with New and call Run once.
type Poller struct {
	cfg     Config
	arn     StreamARN
	kin     KinesisAPI
	store   Store
	inv     Invoker
	log     *slog.Logger
	now     func() time.Time
	enc     *eventEncoder
	dest    Destination
	coord   Coordinator
	filters *filter.Filters // nil: every record is invoked
	obs     Observer
	ready   func() // called once the mapping is running (see WithReady)
	// readiness, when set, follows the store's health (see WithReadiness).
	readiness *Readiness
	efo       *efo // with Config.ConsumerARN: enhanced fan-out (subscribe.go)
	subOpts   []func(*kinesis.Options)
	// retry pacing of a batch that failed: exponential from retryBase, capped at retryMax.
	retryBase, retryMax time.Duration
	retention           atomic.Int64 // the stream's retention period (a time.Duration); 0 until read
	checked             *Checked     // given to NewChecked: New does not check the Config again
}

// Option configures New.
type Option func(*Poller)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(p *Poller) { p.log = l } }

// WithReady registers f, called once when the mapping is running: the store was read, the
// shards listed and, with a Coordinator, the first claim of leases made. Health checks use it.
func WithReady(f func()) Option { return func(p *Poller) { p.ready = f } }

// WithDestination sets where discarded records are reported (the client for
// Config.OnFailureDestination). Without one, discarded records are only logged.
func WithDestination(d Destination) Option { return func(p *Poller) { p.dest = d } }

// WithClock sets the clock used for batching windows and timestamps (default time.Now).
func WithClock(now func() time.Time) Option { return func(p *Poller) { p.now = now } }

// New checks cfg and returns a Poller. Every configuration error wraps ErrInvalidConfig and is a
// *ValidationError naming the field.
func New(cfg Config, kin KinesisAPI, store Store, inv Invoker, opts ...Option) (*Poller, error) {
	p := &Poller{kin: kin, store: store, inv: inv, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now,
		retryBase: time.Second, retryMax: 5 * time.Second, obs: NopObserver{}}
	for _, o := range opts {
		o(p)
	}
	checked, err := p.check(cfg)
	if err != nil {
		return nil, err
	}
	p.cfg, p.arn, p.filters = checked.cfg, checked.stream, checked.filters
	if kin == nil || store == nil || inv == nil {
		return nil, errors.New("poller: Kinesis client, store and invoker are required")
	}
	if p.readiness != nil {
		p.store = trackedStore{Store: store, r: p.readiness}
	}
	if p.cfg.ConsumerARN != "" {
		if err := p.useSubscriptions(); err != nil {
			return nil, err
		}
	}
	p.enc = newEventEncoder(p.cfg.StreamARN, p.arn.Region, p.cfg.InvokeIdentityARN)
	p.log = p.log.With("stream", p.arn.Name)
	if p.cfg.TumblingWindow > 0 && p.cfg.ParallelizationFactor > 1 {
		// AWS documents no rejection of this combination, so a template that deploys runs. A
		// window's state goes from one invocation of the shard to the next, so its batches run
		// one at a time.
		p.log.Warn("TumblingWindowInSeconds with ParallelizationFactor > 1: running one batch in flight per shard, because a tumbling window's state passes from each invocation of a shard to the next",
			"parallelization_factor", p.cfg.ParallelizationFactor, "tumbling_window_seconds", int(p.cfg.TumblingWindow/time.Second))
		p.cfg.ParallelizationFactor = 1
	}
	return p, nil
}

// ListShards returns every shard of the stream (open and closed), following pages. It is what Run
// does first; callers use it to check that a stream exists before they create any state.
func ListShards(ctx context.Context, kin KinesisAPI, streamARN string) ([]types.Shard, error) {
	var all []types.Shard
	in := &kinesis.ListShardsInput{StreamARN: &streamARN}
	for {
		out, err := kin.ListShards(ctx, in)
		if err != nil {
			var nf *types.ResourceNotFoundException
			if errors.As(err, &nf) {
				return nil, fmt.Errorf("%w: %s: %w", ErrStreamNotFound, streamARN, err)
			}
			return nil, fmt.Errorf("list shards of %s: %w", streamARN, err)
		}
		all = append(all, out.Shards...)
		if out.NextToken == nil || *out.NextToken == "" {
			return all, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// initialProgress decides where each shard present when the mapping first runs starts from.
// TRIM_HORIZON and AT_TIMESTAMP keep lineage order from the oldest shards. LATEST starts every open
// shard at its tip, recording when (see ShardProgress.StartTimestamp), and treats closed shards as
// finished, since nothing in them is newer than now.
func initialProgress(shards []types.Shard, position string, now time.Time) map[string]ShardProgress {
	out := make(map[string]ShardProgress, len(shards))
	for _, s := range shards {
		closed := s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil
		pr := ShardProgress{Start: position, UpdatedAt: now}
		switch {
		case position == Latest && closed:
			pr = ShardProgress{Finished: true, UpdatedAt: now}
		case position == Latest:
			pr.StartTimestamp = now.Truncate(time.Millisecond).UTC()
		}
		out[deref(s.ShardId)] = pr
	}
	return out
}

// startAttempts bounds how often the first listing and the first load of progress are tried: a
// brief 5xx, throttle or store outage at start is survived (about 10 s with the default pacing);
// a stream that does not exist, or a dependency that keeps failing, ends Run.
const startAttempts = 8

// atStart runs one step of the start, retrying it as startAttempts says.
func atStart[T any](ctx context.Context, p *Poller, what string, step func() (T, error)) (T, error) {
	bo := backoff{base: p.retryBase / 10, max: p.retryMax}
	for attempt := 1; ; attempt++ {
		v, err := step()
		if err != nil && ctx.Err() != nil {
			return v, errStopped // stopped while starting: a graceful stop, not a failure
		}
		if err == nil || errors.Is(err, ErrStreamNotFound) || attempt == startAttempts {
			return v, err
		}
		d := bo.next()
		p.log.Warn(what+" failed; retrying", "err", err, "attempt", attempt, "backoff", d)
		if !sleep(ctx, d) {
			return v, errStopped
		}
	}
}

type readerResult struct {
	shardID  string
	finished bool
	children []types.ChildShard
	lost     bool  // this worker lost the shard's lease: not an error, not finished
	err      error // fatal: stops the mapping
}

// Run polls the stream until ctx is cancelled, then stops gracefully: no new reads, in-flight
// invocations finish (bounded by ShutdownGrace), their checkpoints are written, leases are
// released, and Run returns nil. It returns an error when the stream cannot be read at start
// (ErrStreamNotFound, an unreachable endpoint) or when progress cannot be stored.
func (p *Poller) Run(ctx context.Context) error {
	if p.cfg.Disabled {
		p.log.Info("mapping disabled: polling nothing")
		<-ctx.Done()
		return nil
	}
	listing, err := atStart(ctx, p, "listing shards", func() ([]types.Shard, error) { return ListShards(ctx, p.kin, p.cfg.StreamARN) })
	if errors.Is(err, errStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	p.readRetention(ctx)
	progress, err := atStart(ctx, p, "loading checkpoints", func() (map[string]ShardProgress, error) { return p.store.Load(ctx) })
	if errors.Is(err, errStopped) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load checkpoints: %w", err)
	}
	fresh := len(progress) == 0 // this run decides where the shards start
	if fresh {
		progress = initialProgress(listing, p.cfg.StartingPosition, p.now())
		if p.coord == nil {
			if err := p.store.Save(ctx, progress); err != nil {
				return fmt.Errorf("save initial positions: %w", err)
			}
		}
	}
	if p.coord != nil {
		// Leases for every listed shard; shards the table does not know yet get the start
		// decided above (children found later get none: their first record).
		if err := p.coord.Register(ctx, shardInfos(listing, progress)); err != nil {
			return fmt.Errorf("register shards: %w", err)
		}
	}
	c := &coordinator{p: p, g: newLineage(), progress: progress, cancels: map[string]context.CancelFunc{}, results: make(chan readerResult)}
	// With a coordinator a shard is read only once its lease is taken, seconds after the start
	// was decided: LATEST then would skip what arrived meanwhile, so it opens AT_TIMESTAMP.
	if fresh && p.cfg.StartingPosition == Latest && p.coord == nil {
		c.atTip = map[string]bool{}
		for id := range progress {
			c.atTip[id] = true
		}
	}
	c.syncFinished(progress)
	c.g.sync(listing)
	c.reportStates()
	p.log.Info("mapping started", "shards", len(listing), "starting_position", p.cfg.StartingPosition, "batch_size", p.cfg.BatchSize)
	return c.run(ctx)
}

func shardInfos(listing []types.Shard, progress map[string]ShardProgress) []ShardInfo {
	out := make([]ShardInfo, 0, len(listing))
	for _, s := range listing {
		si := ShardInfo{ShardID: deref(s.ShardId), Parents: parentsOf(s.ParentShardId, s.AdjacentParentShardId), Initial: progress[deref(s.ShardId)]}
		if s.HashKeyRange != nil {
			si.StartingHashKey, si.EndingHashKey = deref(s.HashKeyRange.StartingHashKey), deref(s.HashKeyRange.EndingHashKey)
		}
		out = append(out, si)
	}
	return out
}

// coordinator is Run's state, owned by Run's goroutine.
type coordinator struct {
	p        *Poller
	g        *lineage
	progress map[string]ShardProgress
	cancels  map[string]context.CancelFunc // readers running
	results  chan readerResult
	wg       sync.WaitGroup
	fatal    error
	runCtx   context.Context
	workCtx  context.Context
	stopRun  context.CancelFunc
	// atTip: LATEST shards whose start this run decided; their first open is at LATEST itself.
	atTip map[string]bool
	// claimed: a claim of leases succeeded.
	claimed bool
}

func (c *coordinator) syncFinished(progress map[string]ShardProgress) {
	for id, pr := range progress {
		if pr.Finished {
			c.g.finished[id] = true
		}
	}
}

func (c *coordinator) run(ctx context.Context) error {
	p := c.p
	// runCtx stops reading; workCtx, which outlives it by ShutdownGrace, bounds in-flight
	// invocations, their checkpoints and the release of leases.
	var stopWork context.CancelFunc
	c.runCtx, c.stopRun = context.WithCancel(ctx)
	defer c.stopRun()
	c.workCtx, stopWork = context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	stopGrace := context.AfterFunc(c.runCtx, func() {
		t := time.AfterFunc(p.cfg.ShutdownGrace, stopWork)
		context.AfterFunc(c.workCtx, func() { t.Stop() })
	})
	defer stopGrace()
	defer c.wg.Wait()

	syncTicker := time.NewTicker(p.cfg.ShardSyncInterval)
	defer syncTicker.Stop()
	var claimTick <-chan time.Time
	if p.coord != nil {
		t := time.NewTicker(p.cfg.ClaimInterval)
		defer t.Stop()
		claimTick = t.C
		c.claim()
	}
	if p.ready != nil {
		p.ready()
	}
	if p.readiness != nil {
		p.readiness.start(p.coord != nil && !c.claimed)
	}
	for {
		if c.runCtx.Err() == nil && p.coord == nil {
			for _, id := range c.g.ready() {
				c.start(id)
			}
		}
		select {
		case res := <-c.results:
			c.handle(res)
		case <-syncTicker.C:
			c.resync()
		case <-claimTick:
			c.claim()
		case <-c.runCtx.Done():
			// Readers see runCtx too; wait for their results.
			for len(c.cancels) > 0 {
				c.handle(<-c.results)
			}
			if c.fatal == nil && ctx.Err() != nil {
				p.log.Info("mapping stopped")
			}
			return c.fatal
		}
	}
}

// start runs a reader for the shard.
func (c *coordinator) start(id string) {
	rctx, cancel := context.WithCancel(c.runCtx)
	c.cancels[id] = cancel
	c.g.running[id] = true
	r := &reader{p: c.p, shardID: id, progress: c.progress[id], atTip: c.atTip[id]}
	delete(c.atTip, id)
	c.p.log.Info("shard started", "shard_id", id, "position", r.describePosition())
	c.p.obs.ShardState(id, StateReading)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.results <- r.run(rctx, c.workCtx)
	}()
}

// handle takes a reader's result.
func (c *coordinator) handle(res readerResult) {
	p := c.p
	c.cancels[res.shardID]()
	delete(c.cancels, res.shardID)
	delete(c.g.running, res.shardID)
	switch {
	case res.err != nil:
		if c.fatal == nil {
			c.fatal = res.err
			p.log.Error("stopping mapping", "shard_id", res.shardID, "err", res.err)
		}
		c.stopRun()
	case res.finished:
		c.g.markFinished(res.shardID)
		pr := c.progress[res.shardID]
		pr.Finished = true
		c.progress[res.shardID] = pr
		p.log.Info("shard finished", "shard_id", res.shardID, "children", len(res.children))
		p.obs.ShardState(res.shardID, StateFinished)
		unknown := c.g.addChildren(res.children)
		if p.coord != nil && len(res.children) > 0 {
			var infos []ShardInfo
			for _, ch := range res.children {
				si := ShardInfo{ShardID: deref(ch.ShardId), Parents: ch.ParentShards}
				if ch.HashKeyRange != nil {
					si.StartingHashKey, si.EndingHashKey = deref(ch.HashKeyRange.StartingHashKey), deref(ch.HashKeyRange.EndingHashKey)
				}
				infos = append(infos, si)
			}
			if err := p.coord.Register(c.workCtx, infos); err != nil {
				p.log.Warn("register child shards failed; the periodic sync will retry", "err", err)
			}
		}
		if unknown {
			c.resync()
		}
		for _, ch := range res.children {
			if w := c.g.waitingOn(deref(ch.ShardId)); len(w) > 0 {
				p.log.Info("shard pending on parents", "shard_id", deref(ch.ShardId), "parents", w)
				p.obs.ShardState(deref(ch.ShardId), StatePending)
			}
		}
	case res.lost:
		p.log.Info("shard lease lost; reader stopped", "shard_id", res.shardID)
	}
	if !res.finished && res.err == nil {
		p.obs.ShardState(res.shardID, StateReleased)
	}
	if p.coord != nil && !res.finished && res.err == nil {
		// Stopped on a hand-over request, a shutdown or a lost lease: give the lease up so its
		// next owner starts at once (a lease already lost is left alone by Release).
		if err := p.coord.Release(c.workCtx, res.shardID); err != nil {
			p.log.Warn("release lease failed; it will expire", "shard_id", res.shardID, "err", err)
		} else if !res.lost {
			p.log.Info("shard lease released", "shard_id", res.shardID)
		}
	}
	if p.coord != nil && res.finished {
		// A finished shard's lease is of no more use to anyone.
		if err := p.coord.Release(c.workCtx, res.shardID); err != nil {
			p.log.Debug("release of a finished lease failed", "shard_id", res.shardID, "err", err)
		}
	}
}

// reportStates tells the observer which shards are finished and which wait on their parents.
func (c *coordinator) reportStates() {
	for id := range c.g.shards {
		switch {
		case c.g.finished[id]:
			c.p.obs.ShardState(id, StateFinished)
		case !c.g.running[id] && len(c.g.waitingOn(id)) > 0:
			c.p.obs.ShardState(id, StatePending)
		}
	}
}

// resync lists the shards again: new shards join the graph, trimmed ones count as finished.
func (c *coordinator) resync() {
	p := c.p
	listing, err := ListShards(c.runCtx, p.kin, p.cfg.StreamARN)
	if err != nil {
		if c.runCtx.Err() == nil {
			p.log.Warn("shard sync failed; will retry", "err", err)
		}
		return
	}
	c.g.sync(listing)
	c.reportStates()
	p.readRetention(c.runCtx)
	if p.coord != nil {
		if err := p.coord.Register(c.runCtx, shardInfos(listing, nil)); err != nil && c.runCtx.Err() == nil {
			p.log.Warn("register shards failed; will retry", "err", err)
		}
	}
	for id, cancel := range c.cancels {
		if c.g.finished[id] { // trimmed while being read
			p.log.Warn("shard trimmed by retention before it was read to its end", "shard_id", id)
			cancel()
		}
	}
}

// claim refreshes progress from the shared table (parents other workers finished unblock
// children here), asks the coordinator which ready shards this worker holds, starts those and
// stops readers of shards it no longer holds (hand-over requests and lost leases).
func (c *coordinator) claim() {
	p := c.p
	if c.runCtx.Err() != nil {
		return
	}
	progress, err := p.store.Load(c.runCtx)
	if err != nil {
		if c.runCtx.Err() == nil {
			p.log.Warn("load lease table failed; will retry", "err", err)
		}
		return
	}
	for id, pr := range progress {
		if !c.g.running[id] {
			c.progress[id] = pr
		}
	}
	c.syncFinished(progress)
	candidates := c.g.ready()
	for id := range c.cancels {
		candidates = append(candidates, id)
	}
	held, err := p.coord.Claim(c.runCtx, candidates)
	if p.readiness != nil {
		p.readiness.stored(err, true)
	}
	if err == nil {
		c.claimed = true
	}
	if err != nil {
		if c.runCtx.Err() == nil {
			p.log.Warn("claim leases failed; will retry", "err", err)
		}
		return
	}
	holds := make(map[string]bool, len(held))
	for _, id := range held {
		holds[id] = true
		if _, running := c.cancels[id]; !running && !c.g.finished[id] {
			c.start(id)
		}
	}
	for id, cancel := range c.cancels {
		if !holds[id] {
			p.log.Info("handing shard over", "shard_id", id)
			cancel()
		}
	}
}
