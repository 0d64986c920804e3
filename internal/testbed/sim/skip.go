package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// Operator skips (esm skip) mid-run: at an EvSkip the operator asks every running worker to skip
// the blocked batch of every shard (poller.Skips, as the worker's route does), sometimes naming a
// batch that is not the one retried, which must be refused. A schedule with skips may retry for
// ever on poison records (MaximumRetryAttempts -1): the operator then keeps skipping after the
// last event, until the mapping is done. Judged (InvSkip): each skip that succeeded put its batch
// on the destination exactly once, as OperatorSkipped, nothing of it went there again (the
// checkpoint passed it before the skip answered or, at ParallelizationFactor > 1 with a batch
// before it still handled, the progress names it as discarded), and the worker's observer
// counted it; each OperatorSkipped failure record is a skip the operator asked
// for (one that succeeded, or one stopped before its checkpoint: a crash, a stop, a lost lease).
// The other invariants (nothing lost, order, lineage, overlap, checkpoints) judge the rest.

// EvSkip: the operator skips the blocked batches of every shard.
const EvSkip EventKind = "skip"

// InvSkip is the skips' invariant.
const InvSkip = "a skipped batch goes to the destination once, as OperatorSkipped, and is counted"

// Injected kinds of the skips.
const (
	SkipDone    = "operator-skip"
	SkipRefused = "operator-skip-refused"
)

// withSkips gives a third of the seeds an operator who skips blocked batches, from a random
// stream of its own (every other event of the seed stays as it was). With retries for ever,
// poison records often come with it: only the skips move their shards on.
func (s *Schedule) withSkips() {
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0x5c1b))
	if rng.Float64() >= 0.35 {
		return
	}
	s.Skips = true
	if s.Retries < 0 && rng.Float64() < 0.7 {
		s.PoisonPct = 0.5 + 2*rng.Float64()
	}
	for range 1 + rng.IntN(5) {
		at := time.Second + time.Duration(rng.Int64N(int64(s.Length)))
		s.Events = append(s.Events, Event{At: at, Kind: EvSkip, N: rng.IntN(3)})
		if rng.Float64() < 0.3 { // the destination is down when the skip sends the batch: it waits
			s.Events = append(s.Events, Event{At: max(0, at-time.Second), Kind: EvFault, Fault: FDestDown, D: time.Duration(1+rng.IntN(5)) * time.Second})
		}
	}
}

// skipped is a skip that succeeded, by the worker that did it.
type skipped struct {
	inc int
	k   poller.Skipped
}

// skipTimeout bounds one skip request (virtual time): an invocation in flight ends first.
const skipTimeout = 30 * time.Second

// skipAll asks every running worker to skip the blocked batch of every shard; with pin 1 it names
// a batch no shard retries (refused). It runs on a goroutine of its own, which d.skipping waits for.
func (d *driver) skipAll(pin int) {
	w := d.w
	w.mu.Lock()
	incs := make([]*incarnation, 0, len(w.live))
	for _, n := range slices.Sorted(maps.Keys(w.live)) {
		incs = append(incs, w.live[n])
	}
	shards := slices.Sorted(maps.Keys(w.byShard))
	w.mu.Unlock()
	d.skipping.Go(func() {
		for _, inc := range incs {
			for _, shard := range shards {
				req := poller.SkipRequest{ShardID: shard}
				if pin == 1 {
					req.First = "1" // no batch begins there
				}
				k, err := skipOne(inc, req)
				if errors.Is(err, poller.ErrSkipAmbiguous) {
					// Several batches of the shard fail: the operator names the one the live
					// page shows (the last told failing).
					w.skipAnswered(inc, req, k, err)
					f := inc.obs.failingOf(shard)
					req.First, req.Last = f.First, f.Last
					k, err = skipOne(inc, req)
					req.First = "" // a batch named as it was seen: not a wrong pin
				}
				w.skipAnswered(inc, req, k, err)
			}
		}
	})
}

// skipOne asks inc to skip req's batch.
func skipOne(inc *incarnation, req poller.SkipRequest) (poller.Skipped, error) {
	ctx, cancel := context.WithTimeout(context.Background(), skipTimeout)
	defer cancel()
	return inc.skips.Skip(ctx, req)
}

// skipAnswered records a skip's answer.
func (w *world) skipAnswered(inc *incarnation, req poller.SkipRequest, k poller.Skipped, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil && req.First != "":
		w.violateLocked("skip: worker %d skipped %s %s..%s although the request named batch %s..", inc.id, k.ShardID, k.First, k.Last, req.First)
	case err == nil:
		w.skips = append(w.skips, skipped{inc: inc.id, k: k})
		w.injected[SkipDone]++
		w.trace = append(w.trace, fmt.Sprintf("%8s worker %d skipped %s %s..%s (%d records)",
			w.now().Sub(epoch).Round(time.Millisecond), inc.id, k.ShardID, k.First, k.Last, k.Records))
	case errors.Is(err, poller.ErrSkipNotDone):
		w.skipsNotDone[inc.id]++
	case errors.Is(err, poller.ErrSkipBatchChanged), errors.Is(err, poller.ErrSkipAmbiguous):
		w.injected[SkipRefused]++
	}
}

// checkSkipsLocked judges InvSkip.
func (w *world) checkSkipsLocked(j *judge, incs []*incarnation) {
	claimed := map[int]bool{} // discards matched to a skip
	for _, s := range w.skips {
		j.res.Checked[InvSkip]++
		n := 0
		for i, d := range w.discards {
			if d.condition == poller.ConditionOperatorSkipped && d.inc == s.inc && len(d.seqs) == s.k.Records &&
				d.seqs[0] == s.k.First && d.seqs[len(d.seqs)-1] == s.k.Last && !claimed[i] {
				claimed[i] = true
				n++
				break
			}
		}
		if n != 1 {
			j.bad("skip: worker %d's skip of %s %s..%s (%d records) matches %d OperatorSkipped failure records", s.inc, s.k.ShardID, s.k.First, s.k.Last, s.k.Records, n)
		}
		for _, d := range w.discards {
			if d.at.After(s.k.At) && !w.rewoundBetweenLocked(s.k.At, d.at) && (slices.Contains(d.seqs, s.k.First) || slices.Contains(d.seqs, s.k.Last)) {
				j.bad("skip: batch %s..%s skipped at %s went to the destination again at %s (%s)", s.k.First, s.k.Last, s.k.At.Sub(epoch), d.at.Sub(epoch), d.condition)
			}
		}
	}
	unmatched := map[int]int{}
	for i, d := range w.discards {
		if d.condition == poller.ConditionOperatorSkipped && !claimed[i] {
			unmatched[d.inc]++
		}
	}
	for inc, n := range unmatched {
		j.res.Checked[InvSkip]++
		if n > w.skipsNotDone[inc] {
			j.bad("skip: worker %d sent %d OperatorSkipped failure records nobody's skip accounts for (%d skips stopped before their checkpoint)", inc, n, w.skipsNotDone[inc])
		}
	}
	for _, inc := range incs {
		want := 0
		for _, s := range w.skips {
			if s.inc == inc.id {
				want++
			}
		}
		inc.obs.mu.Lock()
		got := inc.obs.skipped
		inc.obs.mu.Unlock()
		if want > 0 || got > 0 {
			j.res.Checked[InvSkip]++
		}
		if got != want {
			j.bad("skip: worker %d's observer counted %d skips, it did %d", inc.id, got, want)
		}
	}
}

// rewoundBetweenLocked says whether a rewind was applied between from and to: the records it
// moved back to are read again, and a batch skipped before it may be blocked and skipped again.
func (w *world) rewoundBetweenLocked(from, to time.Time) bool {
	for _, rw := range w.rewinds {
		if rw.applied.After(from) && rw.applied.Before(to) {
			return true
		}
	}
	return false
}
