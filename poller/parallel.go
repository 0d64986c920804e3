package poller

import (
	"context"
	"hash/fnv"
	"sync"
	"time"

	"github.com/kinesis-esm/esm/source"
)

// slots runs a shard's batches ParallelizationFactor at a time. Records are routed to a slot by a
// stable hash of their partition key, so records of one key stay in order, one batch at a time;
// each slot applies the failure rules to its own batches. The shard's checkpoint only covers the
// contiguous prefix of records every slot has finished (tracker).
type slots struct {
	r       *reader
	workCtx context.Context
	queues  []*slotQueue
	track   *tracker
	wg      sync.WaitGroup

	// ck is held while the shard's progress is read or written (one checkpoint write at a time,
	// moving forward only). A channel rather than a mutex: it is held across a store's retries,
	// and a goroutine waiting on a channel counts as blocked for testing/synctest.
	ck chan struct{}

	mu    sync.Mutex
	err   error         // first error of a slot (errLost, errStopped or fatal)
	space chan struct{} // signalled when outstanding records drop
	max   int           // most records dispatched and not yet finished
	// tipAt, atTip: the reader was caught up by a read that started at tipAt with every record
	// read dispatched (WithUntilCaughtUp, caughtup.go).
	tipAt time.Time
	atTip bool
}

type slotQueue struct {
	mu     sync.Mutex
	recs   []source.Record
	ready  chan struct{} // capacity 1: records were added or the queue closed
	closed bool
	lane   lane // the slot's invocations (send.go)
}

func (q *slotQueue) push(recs []source.Record) {
	q.mu.Lock()
	q.recs = append(q.recs, recs...)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *slotQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take waits for records and returns up to maxRecords of them; nil when the queue is closed and empty
// or ctx ends.
func (q *slotQueue) take(ctx context.Context, maxRecords int) []source.Record {
	for {
		q.mu.Lock()
		if n := min(len(q.recs), maxRecords); n > 0 {
			out := q.recs[:n:n]
			q.recs = q.recs[n:]
			q.mu.Unlock()
			return out
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil
		}
	}
}

// unshift puts records back at the head of the queue (the part of a batch the payload limit cut).
func (q *slotQueue) unshift(recs []source.Record) {
	q.mu.Lock()
	q.recs = append(append(make([]source.Record, 0, len(recs)+len(q.recs)), recs...), q.recs...)
	q.mu.Unlock()
}

func slotOf(partitionKey string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(partitionKey))
	return int(h.Sum32() % uint32(n))
}

func newSlots(runCtx, workCtx context.Context, r *reader, n int) *slots {
	s := &slots{r: r, workCtx: workCtx, track: newTracker(), ck: make(chan struct{}, 1), space: make(chan struct{}, 1), max: 2 * n * r.p.cfg.BatchSize}
	for range n {
		q := &slotQueue{ready: make(chan struct{}, 1)}
		s.queues = append(s.queues, q)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.work(runCtx, workCtx, q)
		}()
	}
	return s
}

// work processes one slot's batches until its queue is closed and empty, runCtx ends, or a batch
// fails beyond what the reader can handle.
func (s *slots) work(runCtx, workCtx context.Context, q *slotQueue) {
	r := s.r
	var buf []byte
	for {
		recs := q.take(runCtx, r.p.cfg.BatchSize)
		if recs == nil {
			return
		}
		payload, n := r.batch(buf, recs, len(recs), MaxPayloadBytes)
		if n < len(recs) {
			q.unshift(recs[n:])
		}
		err := r.process(runCtx, workCtx, &q.lane, recs[:n], payload)
		buf = payload[:0]
		if err != nil {
			s.fail(err)
			return
		}
	}
}

// fail records a slot's error and wakes a dispatch waiting for space, which then returns it.
func (s *slots) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	select {
	case s.space <- struct{}{}:
	default:
	}
}

// dispatch hands records to their slots, waiting while too many are outstanding. It returns the
// first slot error, if any.
func (s *slots) dispatch(ctx context.Context, recs []source.Record) error {
	for s.track.outstanding() >= s.max {
		if err := s.failed(); err != nil {
			return err
		}
		select {
		case <-s.space:
		case <-ctx.Done():
			return errStopped
		}
	}
	s.track.add(recs)
	per := make([][]source.Record, len(s.queues))
	var filtered []source.Record
	for _, rec := range recs {
		if s.r.p.filters != nil && !s.r.match(&rec) {
			filtered = append(filtered, rec)
			continue
		}
		i := slotOf(rec.PartitionKey, len(s.queues))
		per[i] = append(per[i], rec)
	}
	if len(filtered) > 0 { // done as soon as read: the checkpoint may pass them
		s.r.p.obs.RecordsFilteredOut(s.r.shardID, len(filtered))
		if err := s.r.ack(s.workCtx, filtered); err != nil {
			return err
		}
	}
	for i, rs := range per {
		if len(rs) > 0 {
			s.queues[i].push(rs)
		}
	}
	return s.failed()
}

// signalSpace wakes a dispatch waiting for outstanding records to drop.
func (s *slots) signalSpace() {
	select {
	case s.space <- struct{}{}:
	default:
	}
}

func (s *slots) lockProgress()   { s.ck <- struct{}{} }
func (s *slots) unlockProgress() { <-s.ck }

func (s *slots) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// drain closes the queues and waits until every slot has finished its records (or stopped).
func (s *slots) drain() error {
	for _, q := range s.queues {
		q.close()
	}
	s.wg.Wait()
	if err := s.failed(); err != nil {
		return err
	}
	if s.track.outstanding() > 0 {
		return errStopped
	}
	return nil
}

// stop waits for the slot goroutines after runCtx ended.
func (s *slots) stop() { s.wg.Wait() }

// tracker follows records dispatched to slots in shard order and finds the contiguous prefix that
// is finished: the shard's checkpoint may move only to the last record of that prefix.
type tracker struct {
	mu    sync.Mutex
	seqs  []string
	done  []bool
	index map[string]int // sequence number → position in seqs (offset by base)
	base  int
}

func newTracker() *tracker { return &tracker{index: map[string]int{}} }

func (t *tracker) add(recs []source.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range recs {
		seq := r.SequenceNumber
		t.index[seq] = t.base + len(t.seqs)
		t.seqs = append(t.seqs, seq)
		t.done = append(t.done, false)
	}
}

func (t *tracker) outstanding() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seqs)
}

// finish marks records finished and returns the last sequence number of the finished prefix when
// it grew ("" when it did not).
func (t *tracker) finish(recs []source.Record) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range recs {
		if i, ok := t.index[r.SequenceNumber]; ok {
			t.done[i-t.base] = true
		}
	}
	n := 0
	for n < len(t.done) && t.done[n] {
		delete(t.index, t.seqs[n])
		n++
	}
	if n == 0 {
		return ""
	}
	last := t.seqs[n-1]
	t.seqs, t.done = t.seqs[n:], t.done[n:]
	t.base += n
	return last
}

// ack records that recs (contiguous, in order) were handled or discarded. With one batch in flight
// the checkpoint moves to their last record; with slots, to the end of the finished prefix.
func (r *reader) ack(ctx context.Context, recs []source.Record) error {
	if r.slots == nil {
		return r.checkpoint(ctx, recs[len(recs)-1].SequenceNumber)
	}
	r.slots.lockProgress() // checkpoints move forward only, one write at a time
	defer r.slots.unlockProgress()
	last := r.slots.track.finish(recs)
	r.slots.signalSpace()
	if last == "" {
		return nil
	}
	if err := r.checkpoint(ctx, last); err != nil {
		return err
	}
	r.slots.slotsIdle()
	return nil
}
