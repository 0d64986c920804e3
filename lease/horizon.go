package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/poller"
)

// The in-flight horizon (DESIGN.md, "Takeover at the speed of what was in flight"): every
// heartbeat publishes r, how long after its send an invocation of this worker may still run (none
// when nothing can), and the worker sends no invocation whose deadline (its send plus the
// invocation bound B) the horizon the table may hold does not cover; when one would not be, it
// first writes a heartbeat with a larger horizon. A worker declared dead is then waited for until
// its last horizon ends, not for a whole bound after its death.

// outlastRate is how long an observer waits for something that lasts at most d on other clocks
// whose rates may differ from its own by up to 1/1,000 (1,000 ppm: ten times a crystal's
// tolerance, twice the most NTP slews a clock): (1 + 1/1000)/(1 − 1/1000) < 1 + 1/400.
func outlastRate(d time.Duration) time.Duration { return d + d/400 }

// flight is what this worker's invocations need of its heartbeats. Guarded by Dynamo.mu.
type flight struct {
	// gated: every invocation of this worker goes through StartInvocation (the poller said so,
	// GateInvocations). Until then the heartbeats publish Held's window and the whole bound.
	gated    bool
	next     uint64
	inflight map[uint64]flying // invocations that may still run, by ticket
	started  time.Time         // when an invocation was last admitted (or wanted)
	// cover is how far the horizons the table may hold reach: the last successful heartbeat's,
	// or less when an attempt sent since (written or not, nobody knows) published less.
	cover    time.Time
	attempts uint64 // heartbeat attempts composed under this epoch
	lastSend time.Time
	// latency is how long the last heartbeat that went through took: a window shorter than
	// that would leave the invocation that asked for it uncovered when the write returns.
	latency time.Duration
}

// flying is an invocation that may still run: its shard and its deadline. An inherited one is
// a dead (or replaced) owner's whose lease this worker took before its tombstone's wait ended
// (see takeableLocked): no invocation of the shard is admitted here before until.
type flying struct {
	shard     string
	until     time.Time
	inherited bool
}

// horizonUnit is the precision horizons are published with: tenths of a second, rounded up.
const horizonUnit = 100 * time.Millisecond

// window is how long past a heartbeat's send the invocations it lets start may begin: half a
// claim interval. A worker admitting invocations all along writes its entry about every window
// (DESIGN.md, "Costs"); a shorter window would cost more writes, a longer one would let the
// published horizon pass its last invocation's deadline by more (the takeover bound).
func (d *Dynamo) window() time.Duration { return d.ClaimInterval() / 2 }

// horizonLocked is the horizon a heartbeat sent at now publishes: past every deadline of an
// invocation that may still run (or that an inherited one may) and, when an invocation was
// admitted (or wanted) since the previous heartbeat, far enough for invocations starting until
// a window later. Zero when nothing can run.
func (d *Dynamo) horizonLocked(now time.Time) time.Duration {
	if !d.fl.gated { // invocations it does not see may start until Held ends
		return d.safe + d.cfg.functionTimeout
	}
	var end time.Time
	for k, f := range d.fl.inflight {
		if !f.until.After(now) {
			delete(d.fl.inflight, k)
			continue
		}
		end = later(end, f.until)
	}
	if !d.fl.started.Before(d.fl.lastSend) {
		end = later(end, now.Add(max(d.window(), 2*d.fl.latency)+d.cfg.functionTimeout))
	}
	if !end.After(now) {
		return 0
	}
	// Published in tenths of a second, rounded up: three significant digits in the roster item
	// for bounds under 100 s, which the epochs' 8 digits pay for (see DESIGN.md, "Costs": a
	// heartbeat of 100 busy workers stays at 4 write units, an idle one at 3).
	return roundHorizon(end.Sub(now))
}

// roundHorizon rounds a horizon up to the unit it is published in.
func roundHorizon(r time.Duration) time.Duration {
	return (r + horizonUnit - 1).Truncate(horizonUnit)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// composeBeatLocked records a heartbeat attempt sent at now that publishes r: until one is known
// to have gone through, the table may hold it, so nothing it does not cover may start.
func (d *Dynamo) composeBeatLocked(now time.Time, r time.Duration) uint64 {
	d.fl.attempts++
	d.fl.lastSend = now
	if end := now.Add(r); end.Before(d.fl.cover) {
		d.fl.cover = end
	}
	return d.fl.attempts
}

// beatWentThroughLocked: attempt n, sent at sent with horizon r and returned at got, is the
// table's; the horizon
// reaches sent + r unless a later attempt was composed meanwhile.
func (d *Dynamo) beatWentThroughLocked(n uint64, sent, got time.Time, r time.Duration) {
	d.fl.latency = got.Sub(sent)
	if n == d.fl.attempts {
		d.fl.cover = sent.Add(r)
	}
}

// joinHorizonLocked is the horizon a join's entry publishes: none, a new epoch has invoked
// nothing; an ungated worker's, Held's window and B, as it may invoke at once.
func (d *Dynamo) joinHorizonLocked() time.Duration {
	if d.fl.gated {
		return 0
	}
	return d.safe + d.cfg.functionTimeout
}

// joinedLocked starts a new epoch's horizon: its entry publishes none (a gated worker's).
func (d *Dynamo) joinedLocked(sent time.Time) {
	d.fl.attempts, d.fl.cover, d.fl.lastSend = 0, sent, sent
}

// GateInvocations implements poller.InvocationGate: the poller admits every invocation through
// StartInvocation from now on, so the heartbeats publish only what those may still run.
func (d *Dynamo) GateInvocations() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fl.gated = true
}

// StartInvocation implements poller.InvocationGate: an invocation of the shard may be sent now
// when this worker holds its lease (Held) and the horizon the table may hold covers its deadline
// (now plus the invocation bound); if it does not, a heartbeat with a larger horizon is written
// first, retried while the lease is held. The ticket is asked again just before the send
// (Recheck) and told when the invocation ended.
func (d *Dynamo) StartInvocation(ctx context.Context, shardID string) (poller.InvocationTicket, bool) {
	d.mu.Lock()
	d.fl.next++
	t := &ticket{d: d, ctx: ctx, shard: shardID, id: d.fl.next}
	d.mu.Unlock()
	if !t.Recheck() {
		return nil, false
	}
	return t, true
}

type ticket struct {
	d     *Dynamo
	ctx   context.Context
	shard string
	id    uint64
}

// Recheck admits the invocation at this instant: its deadline is now plus the invocation bound.
func (t *ticket) Recheck() bool {
	d := t.d
	for {
		d.mu.Lock()
		now := d.cfg.now()
		s := d.peekLocked(t.shard)
		if s.held == nil || s.orphan || !d.aliveLocked(now) || d.rewindDueLocked() {
			d.mu.Unlock()
			return false
		}
		d.fl.started = now
		if until := d.inheritedLocked(t.shard, now); !until.IsZero() {
			// The shard's previous owner may still be invoking it: not before its horizon.
			d.mu.Unlock()
			if !ctxwait.Sleep(t.ctx, until.Sub(now)) {
				return false
			}
			continue
		}
		dl := now.Add(d.cfg.functionTimeout)
		if !dl.After(d.fl.cover) {
			if d.fl.inflight == nil {
				d.fl.inflight = map[uint64]flying{}
			}
			d.fl.inflight[t.id] = flying{shard: t.shard, until: later(d.fl.inflight[t.id].until, dl)}
			d.mu.Unlock()
			return true
		}
		d.mu.Unlock()
		if !d.publishHorizon(t.ctx, dl) {
			return false
		}
	}
}

// End implements poller.InvocationTicket: an invocation that ended (a response came, or it was
// never sent) runs no more; one that may run on (an ambiguous failure, a call cut off) counts
// until its deadline.
func (t *ticket) End(ended bool) {
	if !ended {
		return
	}
	t.d.mu.Lock()
	delete(t.d.fl.inflight, t.id)
	t.d.mu.Unlock()
}

// publishHorizon writes a heartbeat whose horizon covers deadline dl, unless one that does went
// through while it waited for the heartbeat's turn. False when ctx ended; after a failed write
// it pauses (beatRetry) and reports true, so that the caller checks Held again.
func (d *Dynamo) publishHorizon(ctx context.Context, dl time.Time) bool {
	if !d.lockBeats(ctx) {
		return false
	}
	defer d.unlockBeats()
	d.mu.Lock()
	covered, joined := !dl.After(d.fl.cover), d.me.joined
	d.mu.Unlock()
	if covered || !joined {
		return true
	}
	err := d.heartbeat(ctx)
	d.mu.Lock()
	// The next regular heartbeat a period after this one returned, as if it had been this one:
	// one that waited for this turn through a stall of the table would otherwise go out, and
	// count, the instant the stall ended, and a member whose own heartbeat the stall held back
	// be declared dead on two of this worker's heartbeats around the stall.
	d.me.lastBeatTry = d.cfg.now()
	d.mu.Unlock()
	if err != nil {
		d.log.Warn("publishing the invocation horizon failed; retrying while the lease is held", "err", err)
		tm := time.NewTimer(beatRetry)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
			return false
		}
		return true
	}
	return true
}

// inheritLocked records, for a lease just taken from an owner whose tombstone's wait ends at
// until (after now), that an invocation of that owner's may run until then.
func (d *Dynamo) inheritLocked(shard string, until, now time.Time) {
	if !until.After(now) {
		return
	}
	if d.fl.inflight == nil {
		d.fl.inflight = map[uint64]flying{}
	}
	d.fl.next++
	d.fl.inflight[d.fl.next] = flying{shard: shard, until: until, inherited: true}
}

// inheritedLocked is when the shard's previous owner's invocations may have ended, when that is
// after now (zero otherwise).
func (d *Dynamo) inheritedLocked(shard string, now time.Time) time.Time {
	var end time.Time
	for _, f := range d.fl.inflight {
		if f.inherited && f.shard == shard && f.until.After(now) {
			end = later(end, f.until)
		}
	}
	return end
}

// inflightEndLocked is when the last invocation that may still run ends (zero: none).
func (d *Dynamo) inflightEndLocked(now time.Time) time.Time {
	return d.shardInflightLocked("", now)
}

// shardInflightLocked is when the last invocation of shard (any, for "") that may still run ends
// (zero: none).
func (d *Dynamo) shardInflightLocked(shard string, now time.Time) time.Time {
	var end time.Time
	for _, f := range d.fl.inflight {
		if f.until.After(now) && (shard == "" || f.shard == shard) {
			end = later(end, f.until)
		}
	}
	return end
}

// horizonWait is how long after now the leases of a worker whose last heartbeat published r
// stay unfree, when that heartbeat was first seen on a read that returned at got: the heartbeat
// was sent before got, so its invocations end by got + r on its clocks.
func horizonWait(r time.Duration, got, now time.Time) time.Duration {
	return max(0, outlastRate(r)-now.Sub(got))
}

// TakeoverBound is how long after a dead worker's last heartbeat its shards may wait for a taker
// (DESIGN.md, "The takeover bound"): max(L + 2c, ρ·r + c), with c the claim interval, r the
// horizon that heartbeat published (zero when nothing could run) and ρ the clock-rate margin.
func TakeoverBound(leaseDuration, horizon time.Duration) time.Duration {
	c := min(time.Second, leaseDuration/10)
	return max(leaseDuration+2*c, outlastRate(horizon)+c)
}

// PublishedHorizon is the horizon worker id's entry in the roster of table publishes now (zero
// when it publishes none), and whether the roster has an entry for it.
func PublishedHorizon(ctx context.Context, api DynamoAPI, table, id string) (time.Duration, bool, error) {
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key(rosterKey), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0, false, fmt.Errorf("read roster: %w", err)
	}
	ms, _, err := decodeRoster(out.Item)
	if err != nil {
		return 0, false, err
	}
	m, ok := ms[id]
	return m.horizon, ok, nil
}

// BusyHorizon is the longest horizon a worker admitting invocations publishes with a heartbeat
// (rounded up as published): a window of starts (half a claim interval) and the invocation bound
// B. At most this after its last heartbeat, its invocations have all ended.
func BusyHorizon(leaseDuration, bound time.Duration) time.Duration {
	return roundHorizon(min(time.Second, leaseDuration/10)/2 + bound)
}
