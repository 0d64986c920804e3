package poller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kinesis-esm/esm/source"
)

// Discards the checkpoint cannot pass yet (ParallelizationFactor > 1). A slot's batch that is
// given up on (sent to the on-failure destination, dropped, or skipped by an operator) is done
// with, but the shard's checkpoint only moves to the end of the finished prefix: while a batch
// of another slot before it is still handled, it stays behind the discarded records. Were the
// worker lost then, the next owner would read them again and invoke them: a record an operator
// skipped (possibly never invoked) would reach the function after later records of its key, and
// a poison batch would block the shard again. So the run is written into the shard's progress
// (ShardProgress.Discarded) in the same fenced write that acknowledges it, before the slot takes
// its next batch, and a reader drops the records of the runs it began with (discardedCut); each
// run is forgotten once the checkpoint passes its last record. DESIGN.md, "Discards the
// checkpoint cannot pass yet".

// DiscardedRun names the records of one discarded slot batch: those with a sequence number in
// [First, Last] whose partition key falls in slot Slot of Of (slotOf). A slot's batch is a
// contiguous run of the records routed to it, so that is exactly the batch, whatever the
// ParallelizationFactor of the worker that reads them again.
type DiscardedRun struct {
	First string `json:"first"`
	Last  string `json:"last"`
	Slot  int    `json:"slot"`
	Of    int    `json:"of"`
	// Replay is the revision of the rewind whose window was being replayed when the run was
	// discarded (0: none). A later replay invokes the runs of its window discarded before it
	// again; those discarded while it replays stay discarded.
	Replay int64 `json:"replay,omitempty"`
}

// covers says whether rec is one of the run's records.
func (d DiscardedRun) covers(rec *source.Record) bool {
	seq := rec.SequenceNumber
	if seqLess(seq, d.First) || seqLess(d.Last, seq) {
		return false
	}
	return d.Of <= 1 || slotOf(rec.PartitionKey, d.Of) == d.Slot
}

// pruneDiscarded forgets the runs pr's checkpoint passed (all of them once it is finished),
// without touching the slice pr shares with the progress written before.
func pruneDiscarded(pr ShardProgress) ShardProgress {
	if len(pr.Discarded) == 0 {
		return pr
	}
	var keep []DiscardedRun
	if !pr.Finished {
		for _, d := range pr.Discarded {
			if seqLess(pr.Checkpoint, d.Last) {
				keep = append(keep, d)
			}
		}
	}
	pr.Discarded = keep
	return pr
}

// discardedCut drops from one read's records those of the discarded runs the reader began
// with, except, in a rewind's window being replayed, those of runs discarded before that
// rewind (the replay invokes them again).
func (r *reader) discardedCut(recs []source.Record) []source.Record {
	if len(r.discarded) == 0 {
		return recs
	}
	rw := r.replay
	out := recs[:0:0]
	for i := range recs {
		rec := &recs[i]
		inWindow := rw != nil && !rw.Until.IsZero() && !rec.ArrivalTime.IsZero() && rec.ArrivalTime.Before(rw.Until)
		if slices.ContainsFunc(r.discarded, func(d DiscardedRun) bool { return d.covers(rec) && (!inWindow || d.Replay >= rw.Revision) }) {
			continue
		}
		out = append(out, *rec)
	}
	if n := len(recs) - len(out); n > 0 {
		r.p.log.Info("records discarded before a change of owner not read again", "shard_id", r.shardID, "records", n)
	}
	return out
}

// ackDiscarded moves the checkpoint past discarded records; with slots, when it cannot pass
// them yet, the run is written into the progress instead (in the same write).
func (r *reader) ackDiscarded(workCtx context.Context, recs []source.Record) error {
	var err error
	if r.slots != nil {
		err = r.slots.ackDiscarded(workCtx, recs)
	} else {
		err = r.ack(workCtx, recs)
	}
	if err != nil && !errors.Is(err, errLost) {
		return fmt.Errorf("after discarding: %w", err)
	}
	return err
}

// ackDiscarded is ack for a discarded slot batch: when the finished prefix does not reach its
// last record, the progress written (the checkpoint moved or not) names the run.
func (s *slots) ackDiscarded(ctx context.Context, recs []source.Record) error {
	r := s.r
	s.lockProgress()
	defer s.unlockProgress()
	last := s.track.finish(recs)
	s.signalSpace()
	pr := r.progress
	if last != "" {
		pr.Checkpoint = last
	}
	end := recs[len(recs)-1].SequenceNumber
	if seqLess(pr.Checkpoint, end) {
		run := DiscardedRun{First: recs[0].SequenceNumber, Last: end, Slot: slotOf(recs[0].PartitionKey, len(s.queues)), Of: len(s.queues)}
		if rw := r.replay; rw != nil && !rw.Until.IsZero() {
			run.Replay = rw.Revision
		}
		pr.Discarded = append(slices.Clone(pr.Discarded), run)
	} else if last == "" {
		return nil
	}
	if err := r.store(ctx, pr, func(err error) error {
		return fmt.Errorf("record the discarded records %s..%s of shard %s: %w", recs[0].SequenceNumber, end, r.shardID, err)
	}); err != nil {
		return err
	}
	if last != "" {
		if r.p.detail != nil {
			r.p.detail.Checkpointed(r.shardID, last)
		}
		s.slotsIdle()
	}
	return nil
}
