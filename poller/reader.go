package poller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/filter"
)

// reader reads one shard from its position to its end (or until stopped), one batch in flight at
// a time. It is owned by the coordinator, which starts it once the shard's parents are finished.
type reader struct {
	p        *Poller
	shardID  string
	progress ShardProgress
	iter     *string
	lastRead string // sequence number of the last record read from the shard
	buf      []byte // event encoding buffer, reused across batches
	slots    *slots // with ParallelizationFactor > 1: the batches in flight
	// atTip: the first open is at LATEST itself (this run decided the LATEST start); later
	// opens before a record was read resume AT_TIMESTAMP at the recorded start.
	atTip bool

	// sub: with enhanced fan-out, the subscription records are pushed on (subscribe.go).
	sub *subscription
}

// currentProgress is the shard's progress as last written. With slots, whose goroutines write it
// in checkpoint, it is read under the slots' progress lock.
func (r *reader) currentProgress() ShardProgress {
	if r.slots != nil {
		r.slots.lockProgress()
		defer r.slots.unlockProgress()
	}
	return r.progress
}

// position is where GetShardIterator starts: after the last record read, else after the
// checkpoint, else the shard's starting position (its first record for shards found later).
type position struct {
	kind      types.ShardIteratorType
	seq       string
	timestamp time.Time
}

func resumePosition(lastRead string, pr ShardProgress, ts time.Time) position {
	switch {
	case lastRead != "":
		return position{kind: types.ShardIteratorTypeAfterSequenceNumber, seq: lastRead}
	case pr.Checkpoint != "":
		return position{kind: types.ShardIteratorTypeAfterSequenceNumber, seq: pr.Checkpoint}
	case pr.Start == Latest && !pr.StartTimestamp.IsZero():
		return position{kind: types.ShardIteratorTypeAtTimestamp, timestamp: pr.StartTimestamp}
	case pr.Start == Latest:
		return position{kind: types.ShardIteratorTypeLatest}
	case pr.Start == AtTimestamp:
		return position{kind: types.ShardIteratorTypeAtTimestamp, timestamp: ts}
	default:
		return position{kind: types.ShardIteratorTypeTrimHorizon}
	}
}

func (r *reader) describePosition() string {
	pos := resumePosition(r.lastRead, r.progress, r.p.cfg.StartingPositionTimestamp)
	switch pos.kind {
	case types.ShardIteratorTypeAfterSequenceNumber:
		return "after " + pos.seq
	case types.ShardIteratorTypeAtTimestamp:
		return "at " + pos.timestamp.UTC().Format(time.RFC3339Nano)
	}
	return string(pos.kind)
}

// readDisposition says what a failed Kinesis read means for the reader.
type readDisposition int

const (
	readRetry     readDisposition = iota // transient (5xx, network): back off, same iterator
	readThrottled                        // ProvisionedThroughputExceeded: back off, same iterator
	readExpired                          // iterator expired: new iterator from the last record read
	readStopped                          // the reader's context ended
	readFatal                            // the position itself is invalid: stop the mapping
)

func classifyRead(ctx context.Context, err error) readDisposition {
	var (
		throttled *types.ProvisionedThroughputExceededException
		expired   *types.ExpiredIteratorException
		invalid   *types.InvalidArgumentException
	)
	switch {
	case ctx.Err() != nil:
		return readStopped
	case errors.As(err, &throttled):
		return readThrottled
	case errors.As(err, &expired):
		return readExpired
	case errors.As(err, &invalid):
		return readFatal
	}
	return readRetry
}

// backoff is capped exponential backoff with full jitter over the upper half.
type backoff struct {
	base, max time.Duration
	n         int
}

func (b *backoff) next() time.Duration {
	d := b.max
	if b.n < 30 {
		if e := b.base << b.n; e < b.max {
			d = e
		}
	}
	b.n++
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.n = 0 }

// sleep waits for d or until ctx ends; it reports whether the full time passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

var errStopped = errors.New("stopped")

// run reads the shard until its end or until runCtx ends. Invocations and checkpoints use
// workCtx, so a batch in flight when runCtx ends still completes (within the shutdown grace).
func (r *reader) run(runCtx, workCtx context.Context) (result readerResult) {
	res := readerResult{shardID: r.shardID}
	log := r.p.log.With("shard_id", r.shardID)
	cfg := &r.p.cfg
	defer r.closeSubscription()
	if err := r.open(runCtx); err != nil {
		if !errors.Is(err, errStopped) {
			res.err = err
		}
		return res
	}
	if cfg.ParallelizationFactor > 1 {
		sctx, stopSlots := context.WithCancel(runCtx)
		r.slots = newSlots(sctx, workCtx, r, cfg.ParallelizationFactor)
		defer func() {
			stopSlots()
			r.slots.stop()
			// A slot that failed while the reader was stopping (or waiting for space) still
			// decides the result: a store that kept failing is the mapping's error, not a stop.
			if err := r.slots.failed(); err != nil && result.err == nil && !result.finished {
				switch {
				case errors.Is(err, errLost):
					result.lost = true
				case !errors.Is(err, errStopped):
					result.err = err
				}
			}
		}()
	}
	fail := func(err error) readerResult {
		switch {
		case errors.Is(err, errLost):
			res.lost = true
		case !errors.Is(err, errStopped):
			res.err = err
		}
		return res
	}
	var (
		pending      []types.Record
		pendingSince time.Time
		flush        bool // the previous batch was cut by the payload limit: send the rest now
		lastPoll     time.Time
		behind       = true
		caughtUpAt   time.Time // when the last read that left the reader caught up started
		ended        bool
		children     []types.ChildShard
		bo           = backoff{base: 100 * time.Millisecond, max: 5 * time.Second}
	)
	for {
		if len(pending) > 0 && (ended || flush || cfg.MaximumBatchingWindow == 0 || len(pending) >= cfg.BatchSize ||
			r.p.now().Sub(pendingSince) >= cfg.MaximumBatchingWindow) {
			batch := pending
			if r.windowed() { // a batch never spans two tumbling windows
				if err := r.openWindow(runCtx, workCtx, r.windowOf(&pending[0])); err != nil {
					return fail(err)
				}
				batch = pending[:r.windowPrefix(pending)]
			}
			n, err := r.deliver(runCtx, workCtx, batch)
			if err != nil {
				return fail(err)
			}
			clear(pending[:n]) // drop references to delivered data
			pending = pending[n:]
			flush = len(pending) > 0
			if len(pending) == 0 {
				pending = pending[:0:0]
			}
			continue
		}
		if ended {
			if r.windowed() && r.progress.Window != nil { // the shard's end closes its window
				if err := r.closeWindow(runCtx, workCtx, false); err != nil {
					return fail(err)
				}
			}
			if r.slots != nil {
				if err := r.slots.drain(); err != nil {
					return fail(err)
				}
			}
			if err := r.finish(workCtx); err != nil {
				return fail(err)
			}
			res.finished, res.children = true, children
			return res
		}
		if runCtx.Err() != nil {
			return res
		}
		if r.slots != nil {
			if err := r.slots.failed(); err != nil {
				return fail(err)
			}
		}

		if w := r.openWindowState(); w != nil && len(pending) == 0 && !behind &&
			!caughtUpAt.Before(w.Start.Add(cfg.TumblingWindow)) &&
			!r.p.now().Before(w.Start.Add(cfg.TumblingWindow+cfg.PollInterval)) {
			// Caught up by a read that started after the window ended, and the window ended a
			// poll ago with nothing more for it: close it. A read from before the window's end
			// (a long invocation since) or a read that failed (an expired iterator) may have
			// missed records that still belong to the window.
			if err := r.closeWindow(runCtx, workCtx, false); err != nil {
				return fail(err)
			}
			continue
		}
		wait := cfg.PollInterval
		if behind {
			wait = cfg.MinPollSpacing
		}
		wait -= r.p.now().Sub(lastPoll)
		if len(pending) > 0 {
			if untilWindow := cfg.MaximumBatchingWindow - r.p.now().Sub(pendingSince); untilWindow < wait {
				if !sleep(runCtx, untilWindow) {
					return res
				}
				continue // the window closed: invoke what is pending
			}
		}
		if !r.await(runCtx, wait) {
			return res
		}

		if !r.held() {
			res.lost = true
			return res
		}
		// One batch per read, or with slots enough for every slot (Kinesis returns at most 10000).
		limit := int32(min(MaxBatchSize, cfg.BatchSize*cfg.ParallelizationFactor) - len(pending))
		lastPoll = r.p.now()
		out, err := r.next(runCtx, limit)
		if err != nil {
			switch classifyRead(runCtx, err) {
			case readStopped:
				return res
			case readExpired:
				log.Info("shard iterator expired; reopening", "after", r.lastRead)
				if err := r.open(runCtx); err != nil {
					if !errors.Is(err, errStopped) {
						res.err = err
					}
					return res
				}
			case readFatal:
				res.err = fmt.Errorf("read shard %s: %w", r.shardID, err)
				return res
			default:
				d := bo.next()
				log.Warn("get records failed; backing off", "err", err, "backoff", d)
				if !sleep(runCtx, d) {
					return res
				}
			}
			continue
		}
		bo.reset()
		r.p.obs.RecordsPolled(r.shardID, len(out.Records))
		if len(out.Records) > 0 {
			if len(pending) == 0 {
				pendingSince = r.p.now()
			}
			pending = append(pending, out.Records...)
			r.lastRead = deref(out.Records[len(out.Records)-1].SequenceNumber)
		}
		behind = aws.ToInt64(out.MillisBehindLatest) > 0 || len(out.Records) >= int(limit)
		if !behind {
			caughtUpAt = r.caughtUpTime(lastPoll)
		}
		if out.NextShardIterator == nil {
			ended, children = true, out.ChildShards
		} else {
			r.iter = out.NextShardIterator
		}
	}
}

// next reads the shard's next records: with GetRecords, or from the subscription (subscribe.go).
func (r *reader) next(ctx context.Context, limit int32) (*kinesis.GetRecordsOutput, error) {
	if r.sub != nil {
		return r.readSubscription(ctx, limit)
	}
	return r.p.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: r.iter, Limit: aws.Int32(limit)})
}

// open gets a shard iterator for the current position, retrying transient failures.
func (r *reader) open(ctx context.Context) error {
	if r.subscribing() { // enhanced fan-out: subscribe instead (subscribe.go)
		return r.subscribe(ctx)
	}
	bo := backoff{base: 100 * time.Millisecond, max: 5 * time.Second}
	for {
		pr := r.currentProgress()
		pos := resumePosition(r.lastRead, pr, r.p.cfg.StartingPositionTimestamp)
		if r.atTip && pos.kind == types.ShardIteratorTypeAtTimestamp && pr.Start == Latest {
			pos = position{kind: types.ShardIteratorTypeLatest}
		}
		in := &kinesis.GetShardIteratorInput{StreamARN: &r.p.cfg.StreamARN, ShardId: &r.shardID, ShardIteratorType: pos.kind}
		if pos.seq != "" {
			in.StartingSequenceNumber = aws.String(pos.seq)
		}
		if pos.kind == types.ShardIteratorTypeAtTimestamp {
			in.Timestamp = aws.Time(pos.timestamp)
		}
		out, err := r.p.kin.GetShardIterator(ctx, in)
		if err == nil {
			r.iter, r.atTip = out.ShardIterator, false
			r.p.log.Debug("shard iterator opened", "shard_id", r.shardID, "type", pos.kind, "seq", pos.seq)
			return nil
		}
		switch classifyRead(ctx, err) {
		case readStopped:
			return errStopped
		case readFatal:
			return fmt.Errorf("open shard %s at %s %s: %w", r.shardID, pos.kind, pos.seq, err)
		}
		d := bo.next()
		r.p.log.Warn("get shard iterator failed; backing off", "shard_id", r.shardID, "err", err, "backoff", d)
		if !sleep(ctx, d) {
			return errStopped
		}
	}
}

// deliver handles the longest prefix of pending that fits one batch, following Lambda's failure
// rules (see failure.go), and returns how many records it took. When runCtx ends it stops
// retrying and returns errStopped; a batch already in flight still completes on workCtx.
func (r *reader) deliver(runCtx, workCtx context.Context, pending []types.Record) (int, error) {
	if r.slots != nil {
		return len(pending), r.slots.dispatch(runCtx, pending)
	}
	take, matched, pos := r.selectBatch(pending)
	if r.p.filters != nil {
		r.p.obs.RecordsFilteredOut(r.shardID, take-len(matched))
	}
	if len(matched) == 0 { // every record filtered out: nothing to invoke, the checkpoint moves on
		return take, r.ack(workCtx, pending[:take])
	}
	payload, n := r.batch(r.buf, matched, r.p.cfg.BatchSize, MaxPayloadBytes)
	r.buf = payload[:0]
	if n < len(matched) { // cut by the payload limit
		take, matched = n, matched[:n]
		if pos != nil {
			take = pos[n]
		}
	}
	if err := r.process(runCtx, workCtx, matched, payload); err != nil {
		return 0, err
	}
	if tail := pending[take-1]; deref(tail.SequenceNumber) != deref(matched[len(matched)-1].SequenceNumber) {
		// Records filtered out after the last invoked one are done too.
		if err := r.ack(workCtx, pending[take-1:take]); err != nil {
			return 0, err
		}
	}
	return take, nil
}

// selectBatch picks the next batch from pending: up to BatchSize records that pass the filters
// (matched) and how many pending records that covers (take), filtered ones included. pos holds the
// index in pending of each matched record when filters are on.
func (r *reader) selectBatch(pending []types.Record) (take int, matched []types.Record, pos []int) {
	max := r.p.cfg.BatchSize
	if r.p.filters == nil {
		n := min(len(pending), max)
		return n, pending[:n], nil
	}
	for i := range pending {
		if len(matched) == max {
			return i, matched, pos
		}
		if r.match(&pending[i]) {
			matched = append(matched, pending[i])
			pos = append(pos, i)
		}
	}
	return len(pending), matched, pos
}

// match applies the mapping's FilterCriteria to one record.
func (r *reader) match(rec *types.Record) bool {
	fr := filter.Record{Data: rec.Data, PartitionKey: deref(rec.PartitionKey), SequenceNumber: deref(rec.SequenceNumber)}
	if rec.ApproximateArrivalTimestamp != nil {
		fr.ApproximateArrivalTimestamp = *rec.ApproximateArrivalTimestamp
	}
	return r.p.filters.Match(fr)
}

func (r *reader) checkpoint(ctx context.Context, seq string) error {
	pr := r.progress
	pr.Checkpoint = seq
	pr.UpdatedAt = r.p.now()
	if err := r.save(ctx, pr); err != nil {
		if errors.Is(err, errLost) {
			return err
		}
		return fmt.Errorf("checkpoint shard %s at %s: %w", r.shardID, seq, err)
	}
	r.progress = pr
	return nil
}

// saveAttempts bounds how often a failing progress write is tried before the mapping stops.
const saveAttempts = 8

// save writes the shard's progress, retrying a store that fails for a while (a lease table that is
// briefly unreachable) as long as this worker still holds the shard; a write fenced off by the
// lease table is errLost at once.
func (r *reader) save(ctx context.Context, pr ShardProgress) error {
	bo := backoff{base: r.p.retryBase / 5, max: r.p.retryMax}
	for attempt := 1; ; attempt++ {
		err := r.p.store.Save(ctx, map[string]ShardProgress{r.shardID: pr})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrLeaseLost):
			return errLost
		case attempt == saveAttempts || ctx.Err() != nil:
			return err
		case !r.held():
			return errLost
		}
		d := bo.next()
		r.p.log.Warn("saving progress failed; retrying", "shard_id", r.shardID, "err", err, "attempt", attempt, "backoff", d)
		if !sleep(ctx, d) {
			return err
		}
	}
}

func (r *reader) finish(ctx context.Context) error {
	pr := r.progress
	pr.Finished = true
	pr.UpdatedAt = r.p.now()
	if err := r.save(ctx, pr); err != nil {
		if errors.Is(err, errLost) {
			return err
		}
		return fmt.Errorf("record shard %s finished: %w", r.shardID, err)
	}
	r.progress = pr
	return nil
}
