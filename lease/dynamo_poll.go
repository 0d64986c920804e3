package lease

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/internal/ctxwait"
)

// maxPollsPerCycle bounds the lease items one claim cycle reads.
const maxPollsPerCycle = 5 * batchGetMax

// readOrder lists the leases a cycle reads, at most maxPollsPerCycle, most urgent first: the
// parents a child waits on, then the wanted leases in the order toRead gives them (placed here
// now, then watched). A cycle that cut a sorted list instead read the same watched leases at
// every cycle and never reached the ones placed here (a staggered start: the first worker
// watches every shard it was once given).
func readOrder(wanted, lineage []string) []string {
	seen := make(map[string]bool, len(wanted)+len(lineage))
	var ids []string
	for _, id := range append(slices.Clone(lineage), wanted...) {
		if len(ids) == maxPollsPerCycle {
			break
		}
		if !seen[id] { // BatchGetItem refuses duplicate keys
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// pollAndTake reads the wanted and lineage leases (consistently, in batches) and takes the
// wanted ones that are free.
func (d *Dynamo) pollAndTake(ctx context.Context, wanted, lineage []string) {
	ids := readOrder(wanted, lineage)
	if len(ids) == 0 {
		return
	}
	retries := 0
	if len(lineage) > 0 { // a child waits on these reads: a fault would cost it a cycle
		retries = childRetries
	}
	items := d.batchGetRetry(ctx, ids, retries)
	now := d.cfg.now()
	d.mu.Lock()
	var take []Lease
	for _, id := range wanted {
		if it, ok := items[id]; ok && d.judgeReadLocked(id, it, now) { // not read (throttled): next cycle
			take = append(take, *it)
		}
	}
	d.markDeletedLocked(items, wanted, lineage)
	d.mu.Unlock()
	parallel(d.unblocked(ctx, d.confirmFree(ctx, take)), func(l Lease) { d.take(ctx, l) })
}

// unblocked leaves out the leases nobody has read yet whose parents are not done (see
// parentsDone): an item of a child may exist before its parents finished (KCL creates a child's
// lease when it lists the child), and its parent's last batch may still run elsewhere. A
// lease read before was taken after its parents were done.
func (d *Dynamo) unblocked(ctx context.Context, ls []Lease) []Lease {
	var fresh []string
	for _, l := range ls {
		if !started(l) {
			fresh = append(fresh, l.ShardID)
		}
	}
	if len(fresh) == 0 {
		return ls
	}
	done := d.parentsDone(ctx, fresh)
	return slices.DeleteFunc(ls, func(l Lease) bool { return !started(l) && !done[l.ShardID] })
}

// judgeReadLocked records what a read of a wanted lease found (it: nil when absent) and says
// whether to take it.
func (d *Dynamo) judgeReadLocked(id string, it *Lease, now time.Time) (take bool) {
	s := d.shardLocked(id)
	if it == nil && s.seen {
		// Seen before and gone now: deleted, so finished (see cleanUp). Never created
		// again, whatever this worker's listing says of the shard's children.
		s.markFinished(id)
		s.missing, s.pending, s.waiting = false, false, false
		return false
	}
	if it == nil {
		s.missing = true
		s.forget()
		// An absent lease names nobody: nothing to adopt. Claim creates it if it is placed
		// here; a watched one placed elsewhere is read less and less often (a worker of a
		// staggered start watches every shard it was once given, none created yet).
		d.backoffLocked(id, now)
		return false
	}
	s.missing = false
	if s.held != nil || it.Finished() {
		s.pending, s.waiting = false, false
		return false
	}
	if d.plan.owner[id] != d.id && it.Owner != d.id {
		s.pending = false // placed elsewhere now, and not ours
		return false
	}
	if it.OwnerEpoch == 0 && it.Owner != "" && it.Owner != d.id {
		if o := s.legacy; o == nil || o.counter != it.Counter {
			s.legacy = &observation{counter: it.Counter, since: now}
		}
	}
	ours := it.Owner == d.id && it.OwnerEpoch == d.me.epoch && !it.HandedOver
	if ours || d.takeableLocked(*it, now) && s.asked {
		// Free, or handed over to this worker, and asked for by the poller: a lease
		// taken for a shard the poller does not read (trimmed from its listing) would keep
		// the shard's children waiting for good (see parentsDone).
		s.waiting = false
		return true
	}
	if d.takeableLocked(*it, now) {
		d.backoffLocked(id, now)
		return false
	}
	if until := d.roster.buriedUntil(it.Owner, it.OwnerEpoch); !until.IsZero() {
		// Its owner is dead or replaced: takeable a claim interval before the tombstone's
		// wait ends here. Read it again then, not after a back-off.
		s.poll = pollState{next: until.Add(-d.ClaimInterval())}
		return false
	}
	if d.plan.owner[id] == d.id && s.poll.tries >= pollEager {
		s.waiting = true // ask the owner, through the roster, to look at it
	}
	d.backoffLocked(id, now)
	return false
}

// markDeletedLocked records finished the parents a read found absent that were deleted, or
// that nobody reads.
func (d *Dynamo) markDeletedLocked(items map[string]*Lease, wanted, lineage []string) {
	for _, p := range lineage {
		// A trimmed parent without an item is not read by anyone: never created (it was
		// closed before a LATEST start) or finished and deleted. One seen before was deleted.
		if it, ok := items[p]; ok && it == nil {
			if s := d.shardLocked(p); !s.registered || s.seen {
				s.markFinished(p)
			}
		}
	}
	for _, p := range append(slices.Clone(lineage), wanted...) {
		// A parent without an item whose child has one was finished and deleted (children
		// get items only once their parents are finished; see cleanUp).
		if it, ok := items[p]; ok && it == nil && slices.ContainsFunc(d.peekLocked(p).children, func(c string) bool {
			s := d.peekLocked(c)
			return s.known() || s.held != nil
		}) {
			d.shardLocked(p).markFinished(p)
		}
	}
}

// confirmFree keeps the leases that are free by a consistent read of the roster made after
// they were read: a worker that joined since this worker's last (eventually consistent) read
// would otherwise look gone. An entry, once replaced or removed, never comes back, so an owner
// whose entry a consistent read does not show with the lease's epoch is gone for good.
func (d *Dynamo) confirmFree(ctx context.Context, ls []Lease) []Lease {
	others := slices.ContainsFunc(ls, func(l Lease) bool { return l.Owner != "" && l.Owner != d.id && l.OwnerEpoch != 0 })
	if !others {
		return ls
	}
	if err := d.readRoster(ctx, true); err != nil {
		if ctx.Err() == nil {
			d.log.Warn("read roster failed; will retry", "err", err)
		}
		return slices.DeleteFunc(ls, func(l Lease) bool { return l.Owner != "" && l.Owner != d.id && l.OwnerEpoch != 0 })
	}
	now := d.cfg.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.DeleteFunc(ls, func(l Lease) bool { return !d.takeableLocked(l, now) })
}

// batchGet reads leases consistently: id → item, nil when absent; ids not read are left out.
func (d *Dynamo) batchGet(ctx context.Context, ids []string) map[string]*Lease {
	return d.batchGetRetry(ctx, ids, 0)
}

// batchGetRetry is batchGet, retrying a failed or throttled read up to retries times at once.
func (d *Dynamo) batchGetRetry(ctx context.Context, ids []string, retries int) map[string]*Lease {
	out := map[string]*Lease{}
	for chunk := range slices.Chunk(ids, batchGetMax) {
		keys := make([]map[string]types.AttributeValue, len(chunk))
		for i, id := range chunk {
			keys[i] = key(id)
		}
		req := map[string]types.KeysAndAttributes{d.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for try := 0; len(req) > 0 && ctx.Err() == nil; try++ {
			if try > 0 && !ctxwait.Sleep(ctx, time.Duration(try)*retryPause) {
				break
			}
			res, err := d.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				if try < retries {
					continue
				}
				if ctx.Err() == nil {
					d.log.Warn("read leases failed; will retry", "err", err)
				}
				return out
			}
			for _, it := range res.Responses[d.table] {
				l, err := decodeLease(it)
				if err != nil {
					d.log.Warn("unreadable lease item", "err", err)
					continue
				}
				out[l.ShardID] = &l
			}
			unprocessed := map[string]bool{}
			for _, k := range res.UnprocessedKeys[d.table].Keys {
				if v, ok := k[attrKey].(*types.AttributeValueMemberS); ok {
					unprocessed[v.Value] = true
				}
			}
			for _, id := range chunk {
				if _, ok := out[id]; !ok && !unprocessed[id] {
					out[id] = nil
				}
			}
			// Unprocessed keys (throttled) are retried, or wait for the next cycle.
			req = nil
			if u := res.UnprocessedKeys[d.table]; len(u.Keys) > 0 && try < retries {
				req = map[string]types.KeysAndAttributes{d.table: u}
			}
		}
	}
	d.mu.Lock()
	for _, l := range out {
		if l != nil {
			d.rememberLocked(*l)
		}
	}
	d.mu.Unlock()
	return out
}

// noteFailure records what a failed conditional write returned, or logs another failure.
func (d *Dynamo) noteFailure(id string, err error, what string) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		d.mu.Lock()
		if l, derr := decodeLease(ccf.Item); derr == nil && len(ccf.Item) > 0 {
			d.rememberLocked(l)
			d.backoffLocked(id, d.cfg.now())
		} else {
			// No item came back (dynalite ignores ReturnValuesOnConditionCheckFailure): read it
			// at once. A back-off here, renewed by each failed create, would defer that read
			// for good, and a lease handed over to this worker would never be taken.
			s := d.shardLocked(id)
			s.pending, s.poll = true, pollState{}
		}
		d.mu.Unlock()
		d.log.Debug(what+": another worker was first", "shard_id", id)
		return
	}
	d.mu.Lock()
	s := d.shardLocked(id)
	s.pending, s.poll = true, pollState{} // it may have gone through: read it again, at once
	d.mu.Unlock()
	d.log.Warn(what+" failed; will retry", "shard_id", id, "err", err)
}

// backoffLocked schedules the next read of a lease another worker holds: every claim cycle
// for the first few (a hand-over is on its way), then less and less often, up to pollMax.
func (d *Dynamo) backoffLocked(id string, now time.Time) {
	p := &d.shardLocked(id).poll
	p.tries++
	if p.tries > pollEager {
		p.backoff = min(max(2*p.backoff, pollMin), pollMax)
	}
	p.next = now.Add(p.backoff)
}
