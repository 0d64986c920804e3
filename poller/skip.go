package poller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kinesis-esm/esm/source"
)

// Skipping a blocked batch on an operator's word (esm skip): the batch a shard is retrying goes
// to the on-failure destination at once, as a failure record whose condition is
// ConditionOperatorSkipped (or is dropped, logged and counted, without a destination), and the
// checkpoint moves past it, so the shard goes on with the next records.
//
// A skip is an order handed to the goroutine that handles the batch (a batchRun), never done by
// the caller: it is taken between two attempts (the pause before the next retry is cut short; an
// invocation in flight is waited for), checked again there against the batch as it is then (the
// same first and last sequence numbers), and done under the shard's lease like any discard (the
// lease is asked first; the checkpoint write is fenced). So a skip aimed at one batch never skips
// another, a worker that lost the lease skips nothing, and an order is done once.

// ConditionOperatorSkipped is the condition of the failure record of a batch an operator skipped:
// esm's extension (Lambda documents RetryAttemptsExhausted and RecordAgeExceeded only). The
// message is otherwise Lambda's: responseContext is the last invocation's, absent when none
// reached the function.
const ConditionOperatorSkipped = "OperatorSkipped"

// Why a skip is refused. Every error Skip returns wraps one of them.
var (
	// ErrSkipUnknownShard: the stream has no such shard (as the mapping last listed it).
	ErrSkipUnknownShard = errors.New("unknown shard")
	// ErrSkipNotHere: the shard is not read by this worker (another worker's, finished, or not
	// started yet).
	ErrSkipNotHere = errors.New("shard not read here")
	// ErrSkipNotBlocked: no batch of the shard is failing.
	ErrSkipNotBlocked = errors.New("shard not blocked")
	// ErrSkipBatchChanged: the batch named is not (or no longer) the one the shard retries.
	ErrSkipBatchChanged = errors.New("batch changed")
	// ErrSkipAmbiguous: several batches of the shard are failing (ParallelizationFactor > 1)
	// and the request named none.
	ErrSkipAmbiguous = errors.New("several batches failing")
	// ErrSkipNotDone: the skip was ordered but did not happen (the lease was lost, the mapping
	// stopped, the request was withdrawn, the checkpoint could not be written).
	ErrSkipNotDone = errors.New("skip not done")
)

// SkipRequest names the batch to skip: the shard and, optionally, the batch's first and last
// sequence numbers as the operator saw them (esm status, the live page). Without them the batch
// the shard is retrying at the time of the request is skipped, if it is the only one.
type SkipRequest struct {
	ShardID     string
	First, Last string
}

// Skipped is a skip that happened.
type Skipped struct {
	ShardID     string
	First, Last string // the batch's sequence numbers
	Records     int
	// Destination is the on-failure destination the failure record went to; "" when the mapping
	// has none and the records were dropped.
	Destination string
	Attempts    int       // the batch's failed attempts before the skip
	At          time.Time // when the checkpoint moved past it (the poller's clock)
}

// SkipObserver is what an Observer may also implement to be told of skips (the live page, the
// metrics); the poller finds it by type assertion. Its methods must be cheap and safe for
// concurrent use.
type SkipObserver interface {
	// SkipPending: a skip of the shard's batch first..last was ordered (pending true), or was
	// answered: done (BatchSkipped came first), refused or withdrawn (pending false).
	SkipPending(shardID, first, last string, pending bool)
	// BatchSkipped: the batch was skipped.
	BatchSkipped(shardID string, s Skipped)
}

// Skips is where skip requests reach a running Poller (WithSkips): the caller keeps it and calls
// Skip. Safe for concurrent use; the zero value is not usable, call NewSkips.
type Skips struct {
	mu      sync.Mutex
	known   map[string]bool         // the shards of the stream listed so far
	readers map[string]*reader      // the shards being read, by id
	runs    map[string][]*skippable // their batches being handled, in the order they began
}

// NewSkips returns a Skips to give to WithSkips.
func NewSkips() *Skips {
	return &Skips{known: map[string]bool{}, readers: map[string]*reader{}, runs: map[string][]*skippable{}}
}

// WithSkips lets s's Skip reach the batches of the Poller (default: a Skips of its own, which
// nothing reaches).
func WithSkips(s *Skips) Option { return func(p *Poller) { p.skips = s } }

// skippable is a batch being handled, as Skips sees it.
type skippable struct {
	b      *batchRun
	cancel context.CancelFunc // cuts the current pause short
	order  *skipOrder         // pending, not yet taken; nil: none
}

// skipOrder is one skip handed to a batch: done is closed once it was answered.
type skipOrder struct {
	first, last string
	done        chan struct{}
	res         Skipped
	err         error
}

func (o *skipOrder) answer(res Skipped, err error) {
	o.res, o.err = res, err
	close(o.done)
}

// listed notes the shards of a listing.
func (s *Skips) listed(shards []source.Shard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sh := range shards {
		s.known[sh.ID] = true
	}
}

// reading notes that r reads its shard here (until gone).
func (s *Skips) reading(r *reader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readers[r.shardID] = r
	s.known[r.shardID] = true
}

// gone notes that r stopped reading its shard.
func (s *Skips) gone(r *reader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readers[r.shardID] == r {
		delete(s.readers, r.shardID)
	}
}

// Skip orders the skip of req's batch and waits until it was done or refused, or ctx ended (the
// order is then withdrawn if the batch had not taken it yet).
func (s *Skips) Skip(ctx context.Context, req SkipRequest) (Skipped, error) {
	o, so, err := s.arm(req)
	if err != nil {
		return Skipped{}, err
	}
	if so != nil {
		so.SkipPending(req.ShardID, o.first, o.last, true)
		defer so.SkipPending(req.ShardID, o.first, o.last, false)
	}
	select {
	case <-o.done:
		return o.res, o.err
	case <-ctx.Done():
	}
	if s.withdraw(req.ShardID, o) {
		return Skipped{}, fmt.Errorf("%w: shard %s: the request ended before the batch took it; nothing was skipped", ErrSkipNotDone, req.ShardID)
	}
	<-o.done // taken: it is being done now, and ends (the delivery and the checkpoint are bounded by the mapping's stop)
	return o.res, o.err
}

// arm finds the batch req names and hands it the order; so is the poller's SkipObserver, if any.
func (s *Skips) arm(req SkipRequest) (o *skipOrder, so SkipObserver, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.readers[req.ShardID]
	if r == nil && !s.known[req.ShardID] {
		return nil, nil, fmt.Errorf("%w: the stream has no shard %s (esm status lists them)", ErrSkipUnknownShard, req.ShardID)
	}
	if r == nil {
		return nil, nil, fmt.Errorf("%w: shard %s is not being read by this worker", ErrSkipNotHere, req.ShardID)
	}
	if !r.held() {
		return nil, nil, fmt.Errorf("%w: shard %s: this worker no longer holds its lease", ErrSkipNotHere, req.ShardID)
	}
	k, err := pick(r, s.runs[req.ShardID], req)
	if err != nil {
		return nil, nil, err
	}
	if k.order != nil {
		return nil, nil, fmt.Errorf("%w: shard %s: a skip of batch %s..%s is already under way", ErrSkipNotDone, req.ShardID, k.order.first, k.order.last)
	}
	r.sig.mu.Lock()
	first, last := k.b.stall.first, k.b.stall.last
	r.sig.mu.Unlock()
	k.order = &skipOrder{first: first, last: last, done: make(chan struct{})}
	k.cancel()
	so, _ = r.p.obs.(SkipObserver)
	return k.order, so, nil
}

// pick is the batch of runs req names: among the batches failing (each lane's innermost: a
// bisected batch's half, not the batch), the one with req's sequence numbers, or the only one.
func pick(r *reader, runs []*skippable, req SkipRequest) (*skippable, error) {
	var failing []*skippable
	tops := map[*lane]*skippable{}
	for _, k := range runs {
		tops[k.b.lane] = k // the last to begin on a lane is the innermost
	}
	r.sig.mu.Lock()
	for _, k := range runs {
		if st := &k.b.stall; tops[k.b.lane] == k && st.flying && (st.failures > 0 || st.reported) {
			failing = append(failing, k)
		}
	}
	r.sig.mu.Unlock()
	if len(failing) == 0 {
		return nil, fmt.Errorf("%w: shard %s is not retrying a batch (it may have gone through meanwhile); esm status shows the shards that are blocked", ErrSkipNotBlocked, req.ShardID)
	}
	if req.First == "" && req.Last == "" {
		if len(failing) > 1 {
			return nil, fmt.Errorf("%w: shard %s has %d batches failing (%s); name one with its first and last sequence numbers", ErrSkipAmbiguous, req.ShardID, len(failing), describe(r, failing))
		}
		return failing[0], nil
	}
	r.sig.mu.Lock()
	defer r.sig.mu.Unlock()
	for _, k := range failing {
		if st := &k.b.stall; (req.First == "" || req.First == st.first) && (req.Last == "" || req.Last == st.last) {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w: shard %s is not retrying batch %s..%s: it retries %s; look again (esm status) and name the batch it shows", ErrSkipBatchChanged, req.ShardID, orAny(req.First), orAny(req.Last), describeLocked(failing))
}

func orAny(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

// describe lists the batches of ks by their sequence numbers.
func describe(r *reader, ks []*skippable) string {
	r.sig.mu.Lock()
	defer r.sig.mu.Unlock()
	return describeLocked(ks)
}

func describeLocked(ks []*skippable) string {
	out := ""
	for i, k := range ks {
		if i > 0 {
			out += ", "
		}
		out += k.b.stall.first + ".." + k.b.stall.last
	}
	return out
}

// withdraw takes o back from the shard's batch, unless the batch took it; it reports whether it did.
func (s *Skips) withdraw(shardID string, o *skipOrder) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.runs[shardID] {
		if k.order == o {
			k.order = nil
			return true
		}
	}
	return false
}

// enter registers b as a batch an order may reach.
func (s *Skips) enter(b *batchRun) *skippable {
	k := &skippable{b: b, cancel: func() {}}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[b.r.shardID] = append(s.runs[b.r.shardID], k)
	return k
}

// leave unregisters k; an order it did not take is refused.
func (s *Skips) leave(k *skippable, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := k.b.r.shardID
	runs := s.runs[id]
	for i, x := range runs {
		if x == k {
			runs = append(runs[:i], runs[i+1:]...)
			break
		}
	}
	if len(runs) == 0 {
		delete(s.runs, id)
	} else {
		s.runs[id] = runs
	}
	if o := k.order; o != nil {
		k.order = nil
		why := "it went through (or was given up on by the mapping's own rules) before the skip took effect"
		if err != nil {
			why = "the shard stopped being handled here before the skip took effect"
		}
		o.answer(Skipped{}, fmt.Errorf("%w: shard %s batch %s..%s: %s", ErrSkipNotDone, id, o.first, o.last, why))
	}
}

// pauses is the context the batch's next pauses sleep on: the batch's run context, ended at once
// when an order is pending.
func (s *Skips) pauses(k *skippable) context.Context {
	ctx, cancel := context.WithCancel(k.b.runCtx)
	s.mu.Lock()
	defer s.mu.Unlock()
	k.cancel()
	k.cancel = cancel
	if k.order != nil {
		cancel()
	}
	return ctx
}

// take is k's pending order, taken (nil: none).
func (s *Skips) take(k *skippable) *skipOrder {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := k.order
	k.order = nil
	return o
}

// run runs b through the failure rules as retry does, and does an order that cuts a pause
// short: it returns once the batch was handled, discarded or skipped, or with errStopped.
func (b *batchRun) run() error {
	s := b.r.p.skips
	k := s.enter(b)
	var err error
	defer func() { s.leave(k, err) }()
	for {
		err = retry(s.pauses(k), &b.pace, b.attempt, nil)
		if !errors.Is(err, errStopped) || b.runCtx.Err() != nil {
			return err
		}
		if o := s.take(k); o != nil {
			if done, serr := b.skip(o); done {
				err = serr
				return err
			}
		}
	}
}

// skip does o, when the batch is still the one it names and the lease is held: the failure
// record goes to the destination (or the records are dropped), the checkpoint moves past them.
// It reports whether the batch is done with (skipped, or an error ends it).
func (b *batchRun) skip(o *skipOrder) (bool, error) {
	r := b.r
	first, last := b.recs[0].SequenceNumber, b.recs[len(b.recs)-1].SequenceNumber
	if first != o.first || last != o.last {
		o.answer(Skipped{}, fmt.Errorf("%w: shard %s: the batch became %s..%s (partly handled) before the skip of %s..%s took effect; nothing was skipped", ErrSkipBatchChanged, r.shardID, first, last, o.first, o.last))
		return false, nil
	}
	if !r.held() {
		o.answer(Skipped{}, fmt.Errorf("%w: shard %s: this worker lost its lease before the skip took effect; nothing was skipped", ErrSkipNotDone, r.shardID))
		return false, nil // the next attempt finds the lease gone
	}
	r.sig.mu.Lock()
	attempts := b.stall.failures
	r.sig.mu.Unlock()
	err := r.discard(b.runCtx, b.workCtx, b.recs, ConditionOperatorSkipped, max(b.invokes, 1), b.last, b.lastRequest)
	if err != nil {
		o.answer(Skipped{}, fmt.Errorf("%w: shard %s batch %s..%s: %w", ErrSkipNotDone, r.shardID, first, last, err))
		return true, err
	}
	res := Skipped{ShardID: r.shardID, First: first, Last: last, Records: len(b.recs), Attempts: attempts, At: r.p.now()}
	if r.p.dest != nil {
		res.Destination = r.p.cfg.OnFailureDestination
	}
	r.p.log.Warn("batch skipped by an operator: the shard moves on", "shard_id", r.shardID, "seq_first", first, "seq_last", last,
		"records", res.Records, "failed_attempts", attempts, "destination", res.Destination)
	if so, ok := r.p.obs.(SkipObserver); ok {
		so.BatchSkipped(r.shardID, res)
	}
	o.answer(res, nil)
	return true, nil
}
