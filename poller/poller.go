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
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/invoke"
)

// KinesisAPI is the part of the Kinesis client the poller reads with.
type KinesisAPI interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
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
	cfg   Config
	arn   StreamARN
	kin   KinesisAPI
	store Store
	inv   Invoker
	log   *slog.Logger
	now   func() time.Time
	enc   *eventEncoder
	dest  Destination
	// retry pacing of a batch that failed: exponential from retryBase, capped at retryMax.
	retryBase, retryMax time.Duration
}

// Option configures New.
type Option func(*Poller)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(p *Poller) { p.log = l } }

// WithDestination sets where discarded records are reported (the client for
// Config.OnFailureDestination). Without one, discarded records are only logged.
func WithDestination(d Destination) Option { return func(p *Poller) { p.dest = d } }

// WithClock sets the clock used for batching windows and timestamps (default time.Now).
func WithClock(now func() time.Time) Option { return func(p *Poller) { p.now = now } }

// New checks cfg and returns a Poller. Every configuration error wraps ErrInvalidConfig and is a
// *ValidationError naming the field.
func New(cfg Config, kin KinesisAPI, store Store, inv Invoker, opts ...Option) (*Poller, error) {
	p := &Poller{kin: kin, store: store, inv: inv, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now,
		retryBase: time.Second, retryMax: 5 * time.Second}
	for _, o := range opts {
		o(p)
	}
	var err error
	if p.cfg, err = cfg.withDefaults(p.now()); err != nil {
		return nil, err
	}
	p.arn, _ = ParseStreamARN(p.cfg.StreamARN) // checked by withDefaults
	if kin == nil || store == nil || inv == nil {
		return nil, errors.New("poller: Kinesis client, store and invoker are required")
	}
	p.enc = newEventEncoder(p.cfg.StreamARN, p.arn.Region, p.cfg.InvokeIdentityARN)
	p.log = p.log.With("stream", p.arn.Name)
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
// shard at its tip and treats closed shards as finished, since nothing in them is newer than now.
func initialProgress(shards []types.Shard, position string, now time.Time) map[string]ShardProgress {
	out := make(map[string]ShardProgress, len(shards))
	for _, s := range shards {
		closed := s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil
		pr := ShardProgress{Start: position, UpdatedAt: now}
		if position == Latest && closed {
			pr = ShardProgress{Finished: true, UpdatedAt: now}
		}
		out[deref(s.ShardId)] = pr
	}
	return out
}

type readerResult struct {
	shardID  string
	finished bool
	children []types.ChildShard
	err      error // fatal: stops the mapping
}

// Run polls the stream until ctx is cancelled, then stops gracefully: no new reads, in-flight
// invocations finish (bounded by ShutdownGrace), their checkpoints are written, and Run returns
// nil. It returns an error when the stream cannot be read at start (ErrStreamNotFound, an
// unreachable endpoint) or when progress cannot be stored.
func (p *Poller) Run(ctx context.Context) error {
	if p.cfg.Disabled {
		p.log.Info("mapping disabled: polling nothing")
		<-ctx.Done()
		return nil
	}
	listing, err := ListShards(ctx, p.kin, p.cfg.StreamARN)
	if err != nil {
		return err
	}
	progress, err := p.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("load checkpoints: %w", err)
	}
	if len(progress) == 0 {
		progress = initialProgress(listing, p.cfg.StartingPosition, p.now())
		if err := p.store.Save(ctx, progress); err != nil {
			return fmt.Errorf("save initial positions: %w", err)
		}
	}
	g := newLineage()
	for id, pr := range progress {
		if pr.Finished {
			g.finished[id] = true
		}
	}
	g.sync(listing)
	p.log.Info("mapping started", "shards", len(listing), "starting_position", p.cfg.StartingPosition, "batch_size", p.cfg.BatchSize)

	// runCtx stops reading; workCtx, which outlives it by ShutdownGrace, bounds in-flight
	// invocations and their checkpoints.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	stopGrace := context.AfterFunc(runCtx, func() {
		t := time.AfterFunc(p.cfg.ShutdownGrace, stopWork)
		context.AfterFunc(workCtx, func() { t.Stop() })
	})
	defer stopGrace()

	results := make(chan readerResult)
	cancels := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	defer wg.Wait()
	var fatal error

	ticker := time.NewTicker(p.cfg.ShardSyncInterval)
	defer ticker.Stop()

	resync := func() {
		listing, err := ListShards(runCtx, p.kin, p.cfg.StreamARN)
		if err != nil {
			if runCtx.Err() == nil {
				p.log.Warn("shard sync failed; will retry", "err", err)
			}
			return
		}
		g.sync(listing)
		for id, cancel := range cancels {
			if g.finished[id] { // trimmed while being read
				p.log.Warn("shard trimmed by retention before it was read to its end", "shard_id", id)
				cancel()
			}
		}
	}

	for {
		if runCtx.Err() == nil {
			for _, id := range g.ready() {
				rctx, cancel := context.WithCancel(runCtx)
				cancels[id] = cancel
				g.running[id] = true
				r := &reader{p: p, shardID: id, progress: progress[id]}
				p.log.Info("shard started", "shard_id", id, "position", r.describePosition())
				wg.Add(1)
				go func() {
					defer wg.Done()
					results <- r.run(rctx, workCtx)
				}()
			}
		}
		if len(cancels) == 0 && runCtx.Err() != nil {
			return fatal
		}
		select {
		case res := <-results:
			cancels[res.shardID]()
			delete(cancels, res.shardID)
			delete(g.running, res.shardID)
			switch {
			case res.err != nil:
				if fatal == nil {
					fatal = res.err
					p.log.Error("stopping mapping", "shard_id", res.shardID, "err", res.err)
				}
				stopRun()
			case res.finished:
				g.markFinished(res.shardID)
				pr := progress[res.shardID]
				pr.Finished = true
				progress[res.shardID] = pr
				p.log.Info("shard finished", "shard_id", res.shardID, "children", len(res.children))
				if g.addChildren(res.children) {
					resync()
				}
				for _, c := range res.children {
					if w := g.waitingOn(deref(c.ShardId)); len(w) > 0 {
						p.log.Info("shard pending on parents", "shard_id", deref(c.ShardId), "parents", w)
					}
				}
			}
		case <-ticker.C:
			resync()
		case <-runCtx.Done():
			// Readers see runCtx too; wait for their results.
			for len(cancels) > 0 {
				res := <-results
				cancels[res.shardID]()
				delete(cancels, res.shardID)
				if res.err != nil && fatal == nil {
					fatal = res.err
				}
			}
			if fatal == nil && ctx.Err() != nil {
				p.log.Info("mapping stopped")
			}
			return fatal
		}
	}
}
