package poller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/source"
)

// reader reads one shard from its position to its end (or until stopped), one batch in flight at
// a time. It is owned by the coordinator, which starts it once the shard's parents are finished.
// Its state is this struct; run is a loop over the states that state decides.
type reader struct {
	p        *Poller
	shardID  string
	progress ShardProgress // as last written

	// Where the shard is read from.
	iter     string // of the next read
	lastRead string // sequence number of the last record read from the shard
	// windowPast, replayOver: how far the replay of a rewind's window got (rewind.go); replay is
	// the shard's rewind as the reader began (a later write only forgets it), read without the
	// slots' progress lock.
	windowPast, replayOver bool
	replay                 *Rewind
	// discarded: the runs the progress named as the reader began (discarded.go), read without
	// the slots' progress lock; its own discards are not read again by it.
	discarded []DiscardedRun
	// atTip: the first open is at LATEST itself (this run decided the LATEST start); later
	// opens before a record was read resume AT_TIMESTAMP at the recorded start.
	atTip bool
	// sub: with enhanced fan-out, the subscription records are pushed on (subscribe.go).
	sub *subscription
	// readBy is how the shard was last reported read (SubscriptionObserver.ShardReadBy).
	readBy string

	// What was read and not yet delivered, and how the polling goes.
	poll pollState

	buf   []byte // event encoding buffer, reused across batches
	slots *slots // with ParallelizationFactor > 1: the batches in flight
	// lane: the shard's invocations (all of them with ParallelizationFactor 1; with more, its
	// window's final invocations, never made: a windowed mapping runs one slot). See send.
	lane lane
	// runsUntil: an invocation of the shard whose outcome is unknown (UnixNano) may run until
	// then (send.go): the lease must not be handed over as if it had ended (mayStillRun).
	runsUntil atomic.Int64

	sig signals // the shard's iterator age and blocked state (signals.go)

	idle *idleEntry    // its place in the Poller's idle poller (idle.go); nil until it first polls idle
	woke chan struct{} // 1-buffered: the watch's wake of the parked reader (park.go); nil until it first parks
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

// readDisposition says what a failed read means for the reader.
type readDisposition int

const (
	readRetry     readDisposition = iota // transient (5xx, network): back off, same iterator
	readThrottled                        // source.ErrThrottled: back off, same iterator
	readExpired                          // source.ErrExpired: new iterator from the last record read
	readStopped                          // the reader's context ended
	readFatal                            // source.ErrInvalidPosition: stop the mapping
)

// classifyRead is what err, an error of the source's Open or Read (classified there, see
// source.ErrThrottled), means for the reader.
func classifyRead(ctx context.Context, err error) readDisposition {
	switch {
	case ctx.Err() != nil:
		return readStopped
	case errors.Is(err, source.ErrThrottled):
		return readThrottled
	case errors.Is(err, source.ErrExpired):
		return readExpired
	case errors.Is(err, source.ErrInvalidPosition):
		return readFatal
	}
	return readRetry
}

// readerState is what the reader does next; state decides it, run does it.
type readerState int

const (
	stateDeliver     readerState = iota // records are due (pollState.invokeNow): deliver a batch
	stateFinish                         // the shard ended and nothing is pending: record it finished
	stateStop                           // runCtx ended: stop, the batch in flight done
	stateSlotFailed                     // a slot gave up: its error ends the reader
	stateCloseWindow                    // the open tumbling window is over and idle: close it
	stateAwaitWindow                    // the batching window ends before the next poll: wait for it
	stateRead                           // wait for the next poll, then read
)

// state decides what the reader does next, in this order: deliver what is due, finish an ended
// shard, stop, report a failed slot, close an idle window, wait (for the batching window or the
// next poll, the pause it returns) and read.
func (r *reader) state(runCtx context.Context) (readerState, time.Duration) {
	cfg, s, now := &r.p.cfg, &r.poll, r.p.now()
	switch {
	case s.invokeNow(cfg, now):
		return stateDeliver, 0
	case s.ended:
		return stateFinish, 0
	case runCtx.Err() != nil:
		return stateStop, 0
	case r.slots != nil && r.slots.failed() != nil:
		return stateSlotFailed, 0
	case s.windowIdle(r.openWindowState(), cfg, now):
		return stateCloseWindow, 0
	}
	wait, forWindow := s.pollWait(cfg, now, r.sub != nil)
	if forWindow {
		return stateAwaitWindow, wait
	}
	return stateRead, wait
}

// run reads the shard until its end or until runCtx ends. Invocations and checkpoints use
// workCtx, so a batch in flight when runCtx ends still completes (within the shutdown grace).
func (r *reader) run(runCtx, workCtx context.Context) (res readerResult) {
	defer r.closeSubscription()
	r.poll = newPollState(r.p.readPace(r.shardID + " read"))
	r.replay = r.progress.Rewind // before any slot writes the progress
	r.discarded = r.progress.Discarded
	if err := r.open(runCtx); err != nil {
		return r.result(err)
	}
	if r.p.cfg.ParallelizationFactor > 1 {
		stopSlots := r.startSlots(runCtx, workCtx)
		defer func() {
			res = stopSlots(res)
			res.abandoned = res.abandoned || r.mayStillRun()
		}()
	}
	for {
		var err error
		switch st, wait := r.state(runCtx); st {
		case stateDeliver:
			err = r.deliverPending(runCtx, workCtx)
		case stateFinish:
			if err = r.finishShard(runCtx, workCtx); err == nil {
				return readerResult{shardID: r.shardID, kind: resultFinished, children: r.poll.children}
			}
		case stateStop:
			err = errStopped
		case stateSlotFailed:
			err = r.slots.failed()
		case stateCloseWindow:
			// Caught up by a read that started after the window ended, and the window ended a
			// poll ago with nothing more for it (see pollState.windowIdle).
			err = r.closeWindow(runCtx, workCtx, false)
		case stateAwaitWindow: // then the window has closed: the next state delivers
			if !ctxwait.Sleep(runCtx, wait) {
				err = errStopped
			}
		case stateRead:
			r.noteCaughtUp()
			if r.pollsIdle() {
				err = r.pollIdle(runCtx, wait)
			} else {
				err = r.read(runCtx, wait)
			}
		}
		if err != nil {
			return r.result(err)
		}
	}
}

// result is how the reader ended, from the error that ended it.
func (r *reader) result(err error) readerResult {
	return readerResult{shardID: r.shardID, abandoned: r.mayStillRun()}.endedBy(err)
}

// startSlots starts the slots of a ParallelizationFactor above 1. The function it returns stops
// them and settles the reader's result: a slot that failed while the reader was stopping (or
// waiting for space) still decides it, since a store that kept failing is the mapping's error, not
// a stop.
func (r *reader) startSlots(runCtx, workCtx context.Context) func(readerResult) readerResult {
	sctx, cancel := context.WithCancel(runCtx)
	r.slots = newSlots(sctx, workCtx, r, r.p.cfg.ParallelizationFactor)
	return func(res readerResult) readerResult {
		cancel()
		r.slots.stop()
		if err := r.slots.failed(); err != nil && (res.kind == resultStopped || res.kind == resultLost) && !errors.Is(err, errStopped) {
			return res.endedBy(err)
		}
		return res
	}
}

// deliverPending delivers the batch at the head of what is pending: within one tumbling window,
// whose open window it makes the batch's first.
func (r *reader) deliverPending(runCtx, workCtx context.Context) error {
	s := &r.poll
	batch := s.pending
	if r.windowed() { // a batch never spans two tumbling windows
		if err := r.openWindow(runCtx, workCtx, r.windowOf(&s.pending[0])); err != nil {
			return err
		}
		batch = s.pending[:r.windowPrefix(s.pending)]
	}
	n, err := r.deliver(runCtx, workCtx, batch)
	if err != nil {
		return err
	}
	s.delivered(n)
	r.sent()
	return nil
}

// finishShard ends a shard read to its end: the shard's end closes its window, the slots finish
// their batches, and the shard is recorded finished.
func (r *reader) finishShard(runCtx, workCtx context.Context) error {
	if r.windowed() && r.progress.Window != nil {
		if err := r.closeWindow(runCtx, workCtx, false); err != nil {
			return err
		}
	}
	if r.slots != nil {
		if err := r.slots.drain(); err != nil {
			return err
		}
	}
	// Its children start once it is finished: not while one of its invocations may still run
	// (an ambiguous failure whose records were then discarded, send.go).
	if !r.awaitRunning(runCtx) {
		return errStopped
	}
	return r.finish(workCtx)
}

// read waits up to wait for the next poll, then reads the shard: its records join what is
// pending; a failed read backs off (same iterator), or reopens an expired iterator.
func (r *reader) read(ctx context.Context, wait time.Duration) error {
	if !r.await(ctx, wait) {
		return errStopped
	}
	if !r.held() {
		return errLost
	}
	limit := r.readLimit()
	r.poll.lastPoll = r.p.now()
	page, err := r.next(ctx, limit)
	if err != nil {
		return r.readFailed(ctx, err)
	}
	r.readDone(page, limit)
	return nil
}

// readLimit is how many records a read asks for: one batch, or with slots enough for every slot
// (at most the source's MaxRecordsPerRead), less what is pending.
func (r *reader) readLimit() int {
	cfg := &r.p.cfg
	return min(r.p.maxRead, cfg.BatchSize*cfg.ParallelizationFactor) - len(r.poll.pending)
}

// readDone takes what a read that asked for limit records got: its records join what is pending,
// and the reader's position and pacing follow.
func (r *reader) readDone(page source.Page, limit int) {
	s := &r.poll
	s.retry.reset()
	r.p.obs.RecordsPolled(r.shardID, len(page.Records))
	if len(page.Records) > 0 {
		r.lastRead = page.Records[len(page.Records)-1].SequenceNumber
	}
	if recs := r.discardedCut(r.replayCut(page.Records)); len(recs) > 0 {
		if len(s.pending) == 0 {
			s.pendingSince = r.p.now()
		}
		s.pending = append(s.pending, recs...)
		r.noteRecords()
	}
	behind := page.MillisBehind
	s.behind = behind > 0 || len(page.Records) >= limit
	if r.sub != nil { // the last event's: out's says "behind" until a probe shows otherwise
		behind = r.sub.behind
	}
	r.answered(behind)
	if !s.behind {
		s.caughtUpAt = r.caughtUpTime(s.lastPoll)
	}
	if page.Next == "" {
		s.ended, s.children = true, page.Children
	} else {
		r.iter = page.Next
	}
}

// readFailed handles a read that failed: it reports what ends the reader, and otherwise reopens
// an expired iterator or backs off before the next state.
func (r *reader) readFailed(ctx context.Context, err error) error {
	switch classifyRead(ctx, err) {
	case readStopped:
		return errStopped
	case readExpired:
		r.p.log.Info("shard iterator expired; reopening", "shard_id", r.shardID, "after", r.lastRead)
		return r.open(ctx)
	case readFatal:
		return fmt.Errorf("read shard %s: %w", r.shardID, err)
	}
	if !r.poll.retry.pause(ctx, err, func(err error, d time.Duration) {
		r.p.log.Warn("get records failed; backing off", "shard_id", r.shardID, "err", err, "backoff", d)
	}) {
		return errStopped
	}
	return nil
}

// next reads the shard's next records: with the source's Read, or from the subscription
// (subscribe.go).
func (r *reader) next(ctx context.Context, limit int) (source.Page, error) {
	if r.sub != nil {
		return r.readSubscription(ctx, limit)
	}
	return r.p.src.Read(ctx, r.shardID, r.iter, limit)
}

// reportReadBy tells the observer how the shard is read, when that changed.
func (r *reader) reportReadBy(mode string) {
	if r.readBy != mode {
		r.readBy = mode
		r.p.subscriptionObserver().ShardReadBy(r.shardID, mode)
	}
}

// open opens the shard at the current position (the source's Open), retrying transient failures.
func (r *reader) open(ctx context.Context) error {
	if r.subscribing() { // enhanced fan-out: subscribe instead (subscribe.go)
		r.reportReadBy(ReadBySubscription)
		return r.subscribe(ctx)
	}
	r.reportReadBy(ReadByPolling)
	bo := r.p.readPace(r.shardID + " open")
	return retry(ctx, &bo, func(int) (step, error) {
		pos, _ := r.openPosition()
		it, err := r.p.src.Open(ctx, r.shardID, pos.at())
		if err == nil {
			r.iter, r.atTip = it, false
			r.p.log.Debug("shard iterator opened", "shard_id", r.shardID, "type", pos.kind, "seq", pos.seq)
			return stepDone, nil
		}
		switch classifyRead(ctx, err) {
		case readStopped:
			return stepDone, errStopped
		case readFatal:
			return stepDone, fmt.Errorf("open shard %s at %s %s: %w", r.shardID, pos.kind, pos.seq, err)
		}
		return stepRetry, err
	}, func(err error, d time.Duration) {
		r.p.log.Warn("get shard iterator failed; backing off", "shard_id", r.shardID, "err", err, "backoff", d)
	})
}

// deliver handles the longest prefix of pending that fits one batch, following Lambda's failure
// rules (process), and returns how many records it took. When runCtx ends it stops retrying and
// returns errStopped; a batch already in flight still completes on workCtx.
func (r *reader) deliver(runCtx, workCtx context.Context, pending []source.Record) (int, error) {
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
	if err := r.process(runCtx, workCtx, &r.lane, matched, payload); err != nil {
		return 0, err
	}
	if tail := pending[take-1]; tail.SequenceNumber != matched[len(matched)-1].SequenceNumber {
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
func (r *reader) selectBatch(pending []source.Record) (take int, matched []source.Record, pos []int) {
	size := r.p.cfg.BatchSize
	if r.p.filters == nil {
		n := min(len(pending), size)
		return n, pending[:n], nil
	}
	for i := range pending {
		if len(matched) == size {
			return i, matched, pos
		}
		if r.match(&pending[i]) {
			matched = append(matched, pending[i])
			pos = append(pos, i)
		}
	}
	return len(pending), matched, pos
}

// match applies the mapping's FilterCriteria to one record (eventEncoder.match: to each user
// record of an aggregate that enhanced fan-out de-aggregates).
func (r *reader) match(rec *source.Record) bool { return r.p.enc.match(rec) }
