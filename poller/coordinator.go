package poller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/kinesis-esm/esm/source"
)

// The coordinator: Run's goroutine, which owns the shard graph, starts a reader per ready shard
// and takes each reader's result when it ends (DESIGN.md, "Goroutines and ownership").

// resultKind is how a reader ended.
type resultKind int

const (
	resultStopped  resultKind = iota // asked to stop (a shutdown, a hand-over, a trimmed shard): not finished
	resultFinished                   // read to its end and every record handled: children follow
	resultLost                       // this worker lost the shard's lease: not an error, not finished
	resultFailed                     // fatal: err stops the mapping
)

// resultKindOf is the kind of result an error that ends a reader gives.
func resultKindOf(err error) resultKind {
	switch {
	case errors.Is(err, errLost):
		return resultLost
	case err == nil, errors.Is(err, errStopped):
		return resultStopped
	}
	return resultFailed
}

// readerResult is what a reader reports to the coordinator when it ends.
type readerResult struct {
	shardID  string
	kind     resultKind
	children []source.Shard // resultFinished: the ChildShards of the shard's end
	err      error          // resultFailed
	// abandoned: an invocation may still run (cut off by the end of the shutdown grace, or failed
	// after its request was sent less than the invocation bound ago): the lease is abandoned.
	abandoned bool
}

// endedBy is res as the error that ended the reader makes it.
func (res readerResult) endedBy(err error) readerResult {
	res.kind, res.err = resultKindOf(err), nil
	if res.kind == resultFailed {
		res.err = err
	}
	return res
}

// coordinator is Run's state, owned by Run's goroutine. Which shards run here and which are
// finished is the lineage graph's to say (g); the coordinator asks it.
type coordinator struct {
	p *Poller
	g *lineage
	// progress: where each shard's next reader starts (the store's, as last loaded). A running
	// reader keeps its own, as it writes it.
	progress map[string]ShardProgress
	results  chan readerResult
	wg       sync.WaitGroup
	fatal    error
	runCtx   context.Context
	workCtx  context.Context
	stopRun  context.CancelFunc
	// atTip: LATEST shards whose start this run decided; their first open is at LATEST itself.
	atTip map[string]bool
	// stopSaid: the Coordinator was told that the mapping stops (Stopper).
	stopSaid bool
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
	if p.readiness != nil {
		// With a Coordinator not ready until a claim succeeded: the claims tell it (Readiness.stored).
		p.readiness.start(p.coord != nil)
	}
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
		case <-p.until.kicked():
			c.untilDone()
		case <-c.runCtx.Done():
			// Readers see runCtx too; wait for their results.
			for c.g.readers() > 0 {
				c.handle(<-c.results)
			}
			if c.fatal == nil && ctx.Err() != nil {
				p.log.Info("mapping stopped")
			}
			return c.fatal
		}
	}
}

// start runs a reader for the shard, if the lineage graph lets it start now.
func (c *coordinator) start(id string) {
	rctx, cancel := context.WithCancel(c.runCtx)
	if !c.g.start(id, cancel) {
		cancel()
		return
	}
	r := &reader{p: c.p, shardID: id, progress: c.progress[id], atTip: c.atTip[id]}
	delete(c.atTip, id)
	c.p.log.Info("shard started", "shard_id", id, "position", r.describePosition())
	c.p.obs.ShardState(id, StateReading)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.p.skips.reading(r)
		res := r.run(rctx, c.workCtx)
		c.p.skips.gone(r)
		if res.kind != resultFailed && res.abandoned && c.runCtx.Err() == nil && r.awaitRunning(c.runCtx) {
			// Stopped (trimmed, handed over, lost) while an invocation of it may still run
			// (send.go), the mapping running on: the shard counts as read here until that has
			// passed, so that no child of it starts meanwhile; then its lease goes cleanly.
			res.abandoned = r.mayStillRun()
		}
		c.results <- res
	}()
}

// handle takes a reader's result.
func (c *coordinator) handle(res readerResult) {
	p := c.p
	c.g.ended(res.shardID, res.kind == resultFinished)
	switch res.kind {
	case resultFailed:
		if c.fatal == nil {
			c.fatal = res.err
			p.log.Error("stopping mapping", "shard_id", res.shardID, "err", res.err)
		}
		c.stopRun()
	case resultFinished:
		c.finished(res)
		c.untilDone()
	case resultLost:
		p.log.Info("shard lease lost; reader stopped", "shard_id", res.shardID)
	}
	switch {
	case res.kind == resultStopped || res.kind == resultLost:
		p.obs.ShardState(res.shardID, StateReleased)
		if p.coord == nil {
			break
		}
		if s, ok := p.coord.(Stopper); ok && c.runCtx.Err() != nil && !c.stopSaid {
			c.stopSaid = true
			s.Stopping(c.workCtx)
		}
		if a, ok := p.coord.(Abandoner); ok && res.abandoned {
			// Its next owner must wait for the invocation cut off, which no one can call back.
			p.log.Warn("shard lease kept: an invocation cut off by the shutdown grace may still run; the next owner waits for the function timeout",
				"shard_id", res.shardID)
			a.Abandon(res.shardID)
			break
		}
		// Stopped on a hand-over request, a shutdown or a lost lease: give the lease up so its
		// next owner starts at once (a lease already lost is left alone by Release).
		if err := p.coord.Release(c.workCtx, res.shardID); err != nil {
			p.log.Warn("release lease failed; it will expire", "shard_id", res.shardID, "err", err)
		} else if res.kind != resultLost {
			p.log.Info("shard lease released", "shard_id", res.shardID)
		}
	case res.kind == resultFinished && p.coord != nil:
		// A finished shard's lease is of no more use to anyone.
		if err := p.coord.Release(c.workCtx, res.shardID); err != nil {
			p.log.Debug("release of a finished lease failed", "shard_id", res.shardID, "err", err)
		}
	}
}

// finished takes the result of a shard read to its end: its children join the graph (and, with a
// Coordinator, the lease table).
func (c *coordinator) finished(res readerResult) {
	p := c.p
	p.log.Info("shard finished", "shard_id", res.shardID, "children", len(res.children))
	p.obs.ShardState(res.shardID, StateFinished)
	unknown := c.g.addChildren(res.children)
	if p.coord != nil && len(res.children) > 0 {
		var infos []ShardInfo
		for _, ch := range res.children {
			infos = append(infos, ShardInfo{ShardID: ch.ID, Parents: ch.Parents, StartingHashKey: ch.StartingHashKey, EndingHashKey: ch.EndingHashKey})
		}
		if err := p.coord.Register(c.workCtx, infos); err != nil {
			p.log.Warn("register child shards failed; the periodic sync will retry", "err", err)
		}
	}
	if unknown {
		c.resync()
	}
	for _, ch := range res.children {
		if p.detail != nil {
			p.detail.ShardLineage(ch.ID, ch.Parents)
		}
		if w := c.g.waitingOn(ch.ID); len(w) > 0 {
			p.log.Info("shard pending on parents", "shard_id", ch.ID, "parents", w)
			p.obs.ShardState(ch.ID, StatePending)
		}
	}
}

// reportStates tells the observer which shards are finished and which wait on their parents (and
// a DetailObserver every shard's parents).
func (c *coordinator) reportStates() {
	for id, n := range c.g.shards {
		if c.p.detail != nil {
			c.p.detail.ShardLineage(id, n.parents)
		}
		if st := c.g.observed(id); st != "" {
			c.p.obs.ShardState(id, st)
		}
	}
}

// resync lists the shards again: new shards join the graph, trimmed ones count as finished.
func (c *coordinator) resync() {
	p := c.p
	listing, err := c.p.listShards(c.runCtx)
	if err != nil {
		if c.runCtx.Err() == nil {
			p.log.Warn("shard sync failed; will retry", "err", err)
		}
		return
	}
	c.g.sync(listing)
	c.p.skips.listed(listing)
	c.reportStates()
	p.readRetention(c.runCtx)
	if p.coord != nil {
		if err := p.coord.Register(c.runCtx, shardInfos(listing, nil)); err != nil && c.runCtx.Err() == nil {
			p.log.Warn("register shards failed; will retry", "err", err)
		}
	}
	for _, id := range c.g.runningShards() {
		if c.g.isFinished(id) { // trimmed while being read
			p.log.Warn("shard trimmed by retention before it was read to its end", "shard_id", id)
			c.g.stop(id)
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
		if !c.g.isRunning(id) {
			c.progress[id] = pr
		}
	}
	c.g.syncProgress(progress)
	if c.g.childrenUnknown(progress) {
		c.resync()
	}
	candidates := append(c.g.ready(), c.g.runningShards()...)
	held, err := p.coord.Claim(c.runCtx, candidates)
	if p.readiness != nil {
		p.readiness.stored(err, true)
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
		if !c.g.isRunning(id) {
			c.start(id)
		}
	}
	for _, id := range c.g.runningShards() {
		if !holds[id] {
			p.log.Info("handing shard over", "shard_id", id)
			c.g.stop(id)
		}
	}
	c.probeOthers() // WithUntilCaughtUp: the shards other workers read
}
