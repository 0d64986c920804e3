package lease

import (
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// shard is everything this worker knows of one shard, in four parts: what the poller registered,
// what it knows of the shard's item (item, with last), the lease it holds, and the marks and
// back-offs of its claim cycles. Dynamo keeps one per shard id it has come across (registered,
// read, a parent or a child named by an item), in Dynamo.shards, guarded by Dynamo.mu; the
// entries are never removed (a seen mark has to outlive the item).
type shard struct {
	// Registration. info is the shard as registered (the first registration, completed by
	// later ones); registered says the poller registered it.
	info       poller.ShardInfo
	registered bool
	firstSeen  time.Time // when it was first registered
	initial    bool      // in the first Register call
	restarted  bool      // registered with a LATEST start the table replaced by an earlier one
	children   []string  // its children, as the registered shards name their parents
	// itemChildren are the children the items of the whole-table reads name it a parent of:
	// descendants a listing older than them may not know (see descendantHasItem).
	itemChildren []string

	// The item. item says what last is (set by remember, forget and markFinished only).
	item itemState
	last Lease
	// seen: this worker has read or written an item of the shard since it started. An item
	// is deleted only once its shard is finished (see cleanUp), so one seen and then read
	// absent is finished, whatever the listing says.
	seen    bool
	missing bool // polled and found absent

	// The tenure.
	held *heldLease // the lease this worker holds, nil when none
	// orphan: the lease was lost while the poller read the shard (returned by Claim). Its
	// reader may still run, on the progress of that tenure, so the shard is not Held, claimed
	// or saved again here, even when this worker takes the lease anew, until Release says that
	// reader stopped (a worker paused past its lease rejoins and may retake it at once, while
	// its reader is still about to invoke a batch read before the pause).
	orphan bool
	// finishedHere: this worker finished the shard; it creates its children too.
	finishedHere bool

	// The claim cycles' marks.
	poll   pollState    // when to read the lease again; zero: at the next cycle
	legacy *observation // a lease of the previous protocol: its counter and since when
	// cleanup: a finished parent to check for deletion.
	cleanup bool
	asked   bool // a candidate of the last Claim
	// pending: placed here at some point and not seen owned by another since.
	pending bool
	waiting bool // placed here, owned by another live worker that does not hand it over
	// unlisted: an item the read after a rejoin found that this worker's listing knows
	// neither of nor of its parents: the listing is older than it is. Claim creates nothing
	// until the listing knows it, or for at most the shard settle time.
	unlisted bool
}

// itemState is what a shard's last holds.
type itemState uint8

const (
	// itemUnknown: no item known (none read yet, or read absent since); last is the zero Lease.
	itemUnknown itemState = iota
	// itemRead: last is the item last read or written.
	itemRead
	// itemFinished: last is finishedMarker, no item of the shard's own: deleted, or trimmed and
	// never created. Nothing says its parents' last batches ended (see parentsDone).
	itemFinished
)

// known: last is an item read or written, or finishedMarker.
func (s *shard) known() bool { return s.item != itemUnknown }

// shardLocked is the entry of a shard, made when there is none.
func (d *Dynamo) shardLocked(id string) *shard {
	s := d.shards[id]
	if s == nil {
		s = &shard{}
		d.shards[id] = s
	}
	return s
}

// peekLocked is a copy of what this worker knows of a shard, the zero shard when nothing.
func (d *Dynamo) peekLocked(id string) shard {
	if s := d.shards[id]; s != nil {
		return *s
	}
	return shard{}
}

// heldLocked is the lease this worker holds of a shard, nil when none.
func (d *Dynamo) heldLocked(id string) *heldLease {
	if s := d.shards[id]; s != nil {
		return s.held
	}
	return nil
}

// cachedLocked is the last item seen of a shard, and whether there is one.
func (d *Dynamo) cachedLocked(id string) (Lease, bool) {
	if s := d.shards[id]; s != nil && s.known() {
		return s.last, true
	}
	return Lease{}, false
}

// remember records an item read or written: the last one seen of its shard.
func (s *shard) remember(l Lease) {
	s.last, s.item, s.seen = l, itemRead, true
}

// forget drops the item seen of the shard (read absent since).
func (s *shard) forget() {
	s.last, s.item = Lease{}, itemUnknown
}

// markFinished records the shard finished, its item deleted (finishedMarker).
func (s *shard) markFinished(id string) {
	s.last, s.item = finishedMarker(id), itemFinished
}

// heldShardsLocked are the leases this worker holds, by shard id.
func (d *Dynamo) heldShardsLocked() map[string]*heldLease {
	out := map[string]*heldLease{}
	for id, s := range d.shards {
		if s.held != nil {
			out[id] = s.held
		}
	}
	return out
}

// parentsLocked are the parents the registered shard names.
func (d *Dynamo) parentsLocked(id string) []string {
	return nonEmpty(d.peekLocked(id).info.Parents)
}

// unlistedLocked: the read after a rejoin found items this worker's listing cannot link.
func (d *Dynamo) unlistedLocked() bool {
	for _, s := range d.shards {
		if s.unlisted {
			return true
		}
	}
	return false
}
