// Package poller is the engine of esm: it reads every shard of a stream (a Source: a Kinesis
// stream, package source/kinesis, or a DynamoDB table's stream, source/dynamostreams) in lineage
// order (parents drained before children), batches records as Lambda's event source mapping
// does, invokes the function and keeps durable checkpoints.
//
// A mapping is made with New and run with Run, until its context ends:
//
//	p, err := poller.New(src, cfg, store, inv, poller.WithLogger(logger))
//	err = p.Run(ctx)
//
// New takes the mapping in four parts:
//   - src, a Source, is the stream: its identity and limits, its shards with their parents, and
//     reading a shard from a position. source/kinesis and source/dynamostreams make one.
//   - cfg, a Config, is Lambda's settings of the mapping (batch size, starting position, retries,
//     bisection, destination, filters…) and the poller's pace, zero fields at their defaults.
//   - store, a Store, keeps the shards' progress: a MemoryStore, a state file (package
//     checkpoint), or a lease table shared by several workers (package lease, whose Dynamo is
//     also the Coordinator given with WithCoordinator).
//   - inv, an Invoker, calls the function: in this process, over HTTP, or through Lambda's API
//     (package invoke and its packages).
//
// The settings are checked in two ways: alone, with Config.Validate (before a mapping is
// accepted), and as a whole mapping, by New with its source. Every configuration error wraps
// ErrInvalidConfig and is a *ValidationError naming the field. Package runner builds all four
// from an aws.Config and a description of the mapping; most programs start there.
//
// One coordinator goroutine owns the shard graph. It starts one reader goroutine per shard whose
// parents are finished, learns of new shards from the children a reader sees at the end of its
// shard and from a periodic listing, and stops every reader on shutdown. See DESIGN.md.
package poller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesis-esm/esm/filter"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/source"
)

// Invoker runs the function once with an event payload. A nil error means the function was
// reached (see invoke.Response for success versus function error); a non-nil error means it was
// not (throttled or unavailable) and the same batch is tried again, or, wrapping
// invoke.ErrAmbiguous, that it may have been and may still run: the same batch is tried again
// once the invocation bound has passed (send.go).
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) (invoke.Response, error)
}

// Poller runs one event source mapping. Create it with New and call Run once.
type Poller struct {
	cfg Config
	src Source
	// functionARN is the mapped function's (WithFunctionARN), or "".
	functionARN string
	id          source.Identity // src's
	maxRead     int             // the most records a read asks for: the source's MaxRecordsPerRead
	store       Store
	inv         Invoker
	log         *slog.Logger
	now         func() time.Time
	enc         *eventEncoder
	structs     KinesisEvents // src, when it builds the struct a RecordsInvoker takes; else nil
	dest        Destination
	coord       Coordinator
	filters     *filter.Filters // nil: every record is invoked
	obs         Observer
	detail      DetailObserver // obs, when it is one; else nil
	ready       func()         // called once the mapping is running (see WithReady)
	// readiness, when set, follows the store's health (see WithReadiness).
	readiness *Readiness
	efo       *efo         // with a consumer: enhanced fan-out (subscribe.go)
	idle      *idlePolls   // while Run runs: the polls of caught-up shards (idle.go)
	watch     *subWatch    // while Run runs with enhanced fan-out: the parked readers (park.go)
	sigClock  *signalClock // the shards with batches in flight, judged on the clock (signals.go)
	// retry pacing of a batch that failed: exponential from retryBase, capped at retryMax.
	retryBase, retryMax time.Duration
	retention           atomic.Int64  // the stream's retention period (a time.Duration); 0 until read
	blockedAfter        time.Duration // see WithBlockedAfter
	warnedIgnored       atomic.Bool   // the ignored batchItemFailures were logged (blocked.go)
	tracer              Tracer        // nil: invocations are not traced (trace.go)
	bound               time.Duration // B: how long an invocation may run once sent (send.go)
	jit                 *jitter       // the backoffs' random source (nil: the process's; see WithRand)
	until               *caughtUp     // with WithUntilCaughtUp: which shards are caught up (caughtup.go)
	skips               *Skips        // where skips reach the batches (skip.go)
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

// WithFunctionARN names the mapped function by its ARN: the ARN it is invoked as (its
// InvokedFunctionArn, invoke.WithFunctionARN) and the one its on-failure records carry. Without
// it the invoker's own default applies and the records name no function.
func WithFunctionARN(arn string) Option { return func(p *Poller) { p.functionARN = arn } }

// WithClock sets the clock used for batching windows and timestamps (default time.Now).
func WithClock(now func() time.Time) Option { return func(p *Poller) { p.now = now } }

// New checks the whole mapping once, cfg's settings with the rules of src's kind (as
// Config.Validate does) and with the poller's clock, and returns the Poller of the mapping that
// reads src with cfg's settings (their zero fields at their defaults), keeps its progress in store
// and invokes inv. Every configuration error wraps ErrInvalidConfig and is a *ValidationError
// naming the field.
func New(src Source, cfg Config, store Store, inv Invoker, opts ...Option) (*Poller, error) {
	p := &Poller{src: src, store: store, inv: inv, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now,
		retryBase: time.Second, retryMax: 5 * time.Second, obs: NopObserver{}, blockedAfter: DefaultBlockedAfter, bound: DefaultInvocationBound,
		sigClock: newSignalClock()}
	for _, o := range opts {
		o(p)
	}
	if p.skips == nil {
		p.skips = NewSkips()
	}
	var err error
	if p.cfg, p.filters, err = settle(src, cfg, p.now()); err != nil {
		return nil, err
	}
	p.cfg.ClaimInterval = cmp.Or(p.cfg.ClaimInterval, p.claimInterval())
	p.id = src.Identity()
	if field := missingDependency(store, inv); field != "" {
		return nil, &ValidationError{Field: field, Message: "poller: a store and an invoker are required"}
	}
	if err := p.useSource(); err != nil {
		return nil, err
	}
	if err := CheckInvoker(src, inv); err != nil {
		return nil, err
	}
	if p.readiness != nil {
		p.store = trackedStore{Store: store, r: p.readiness}
	}
	p.enc = newEventEncoder(src, p.filters)
	p.structs, _ = src.(KinesisEvents)
	p.log = p.log.With("stream", p.id.Name)
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

// missingDependency names the first of New's dependencies that is nil, or is "".
func missingDependency(store Store, inv Invoker) string {
	switch {
	case store == nil:
		return "Store"
	case inv == nil:
		return "Invoker"
	}
	return ""
}

// initialProgress decides where each shard present when the mapping first runs starts from.
// TRIM_HORIZON and AT_TIMESTAMP keep lineage order from the oldest shards. LATEST starts every open
// shard at its tip, recording when (see ShardProgress.StartTimestamp), and treats closed shards as
// finished, since nothing in them is newer than now.
func initialProgress(shards []source.Shard, position string, now time.Time) map[string]ShardProgress {
	out := make(map[string]ShardProgress, len(shards))
	for _, s := range shards {
		closed := s.Closed
		pr := ShardProgress{Start: position, UpdatedAt: now}
		switch {
		case position == Latest && closed:
			pr = ShardProgress{Finished: true, UpdatedAt: now}
		case position == Latest:
			pr.StartTimestamp = now.Truncate(time.Millisecond).UTC()
		}
		out[s.ID] = pr
	}
	return out
}

// startAttempts bounds how often the first listing and the first load of progress are tried: a
// brief 5xx, throttle or store outage at start is survived (about 10 s with the default pacing);
// a stream that does not exist, or a dependency that keeps failing, ends Run.
const startAttempts = 8

// atStart runs one step of the start, retrying it as startAttempts says.
func atStart[T any](ctx context.Context, p *Poller, what string, do func() (T, error)) (T, error) {
	bo := p.pace("start "+what, p.retryBase/10, p.retryMax)
	var (
		v       T
		attempt int
	)
	err := retry(ctx, &bo, func(n int) (step, error) {
		var err error
		v, err = do()
		attempt = n
		switch {
		case err != nil && ctx.Err() != nil:
			return stepDone, errStopped // stopped while starting: a graceful stop, not a failure
		case err == nil, errors.Is(err, ErrStreamNotFound), n == startAttempts:
			return stepDone, err
		}
		return stepRetry, err
	}, func(err error, d time.Duration) {
		p.log.Warn(what+" failed; retrying", "err", err, "attempt", attempt, "backoff", d)
	})
	return v, err
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
	if g, ok := p.coord.(InvocationGate); ok {
		g.GateInvocations()
	}
	listing, err := atStart(ctx, p, "listing shards", func() ([]source.Shard, error) { return p.listShards(ctx) })
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
	c := &coordinator{p: p, g: newLineage(), progress: progress, results: make(chan readerResult)}
	if p.until != nil {
		p.until.started(p.now())
	}
	// With a coordinator a shard is read only once its lease is taken, seconds after the start
	// was decided: LATEST then would skip what arrived meanwhile, so it opens AT_TIMESTAMP.
	if fresh && p.cfg.StartingPosition == Latest && p.coord == nil {
		c.atTip = map[string]bool{}
		for id := range progress {
			c.atTip[id] = true
		}
	}
	c.g.syncProgress(progress)
	c.g.sync(listing)
	p.skips.listed(listing)
	c.reportStates()
	p.log.Info("mapping started", "shards", len(listing), "starting_position", p.cfg.StartingPosition, "batch_size", p.cfg.BatchSize)
	// The idle poller, the watch of parked subscriptions and the clock outlive the readers,
	// which c.run waits for.
	p.idle = newIdlePolls(p.src)
	if p.efo != nil {
		p.watch = newSubWatch(p.cfg.PollInterval)
	}
	ictx, stopIdle := context.WithCancel(context.WithoutCancel(ctx))
	var helpers sync.WaitGroup
	helpers.Go(func() { p.idle.run(ictx) })
	helpers.Go(func() { p.sigClock.run(ictx, p) })
	if p.watch != nil {
		helpers.Go(func() { p.watch.run(ictx) })
	}
	defer func() {
		stopIdle()
		helpers.Wait()
		p.idle.stop()
	}()
	return c.run(ctx)
}

func shardInfos(listing []source.Shard, progress map[string]ShardProgress) []ShardInfo {
	out := make([]ShardInfo, 0, len(listing))
	for _, s := range listing {
		out = append(out, ShardInfo{ShardID: s.ID, Parents: s.Parents, Initial: progress[s.ID], StartingHashKey: s.StartingHashKey, EndingHashKey: s.EndingHashKey})
	}
	return out
}
