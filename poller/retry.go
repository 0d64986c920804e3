package poller

import (
	"context"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/source"
)

// Retrying. Everything the poller does again until it works (the first listing and load, opening
// and reading a shard, saving progress, invoking a batch, closing a window, delivering a failure
// record, subscribing) goes through retry, or for the reader's reads through backoff.pause: one
// pacing rule, one way to stop. Every pause sleeps on a time.Timer, the one time source the
// poller waits on, which testing/synctest runs in virtual time (internal/testbed/sim).

var errStopped = errors.New("stopped")

// backoff is capped exponential backoff with full jitter over the upper half, drawn from src.
type backoff struct {
	base, max time.Duration
	n         int
	src       *rand.Rand // nil: the process's random source; else used by one goroutine at a time
}

// jitter is where a Poller's backoffs draw from when WithRand gave a source: each backoff has a
// source of its own, named by what it paces, so that the pauses of a seed do not depend on which
// goroutine drew first.
type jitter struct{ seed uint64 }

// source is the source of the backoff named name (nil without WithRand).
func (j *jitter) source(name string) *rand.Rand {
	if j == nil {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(j.seed, h.Sum64()))
}

// WithRand sets where the jitter of every retry's pause comes from (default: the process's random
// source): one draw from r seeds a source per backoff. A seeded r makes the pauses, and so a run
// in virtual time, replay exactly.
func WithRand(r *rand.Rand) Option { return func(p *Poller) { p.jit = &jitter{seed: r.Uint64()} } }

// pace is a backoff from base capped at max, named by what it paces (see jitter).
func (p *Poller) pace(name string, base, max time.Duration) backoff {
	return backoff{base: base, max: max, src: p.jit.source(name)}
}

// firstSeq is the sequence number of the first of recs ("" for none), naming a batch's pacing.
func firstSeq(recs []source.Record) string {
	if len(recs) == 0 {
		return ""
	}
	return recs[0].SequenceNumber
}

// readPace paces failed GetShardIterator and GetRecords calls.
func (p *Poller) readPace(name string) backoff {
	return p.pace(name, 100*time.Millisecond, 5*time.Second)
}

// retryPace paces the retries of a batch, a window's final invocation and a failure record's
// delivery: exponential from retryBase, capped at retryMax.
func (p *Poller) retryPace(name string) backoff { return p.pace(name, p.retryBase, p.retryMax) }

func (b *backoff) next() time.Duration {
	d := b.max
	if b.n < 30 {
		d = min(b.base<<b.n, b.max)
	}
	b.n++
	if b.src == nil {
		return d/2 + rand.N(d/2+1)
	}
	return d/2 + time.Duration(b.src.Int64N(int64(d/2+1)))
}

func (b *backoff) reset() { b.n = 0 }

// pause sleeps for the next backoff on ctx, after telling notify (when set and err is not nil)
// the error and the pause. It reports false when ctx ended first.
func (b *backoff) pause(ctx context.Context, err error, notify func(err error, pause time.Duration)) bool {
	d := b.next()
	if notify != nil && err != nil {
		notify(err, d)
	}
	return ctxwait.Sleep(ctx, d)
}

// step is what an attempt tells retry to do next.
type step int

const (
	stepDone  step = iota // finished: retry returns the attempt's error (nil: it succeeded)
	stepRetry             // failed: pause as the backoff paces it, then try again
	stepAgain             // made progress: try again at once, paced from the start again
)

// retry calls attempt with its number (from 1) until it reports stepDone, and returns the error
// that came with it. After stepRetry it pauses (bo.pause, which tells notify the attempt's
// error); when ctx ends before the pause does, retry returns errStopped. After stepAgain it resets
// bo and goes on at once.
func retry(ctx context.Context, bo *backoff, attempt func(n int) (step, error), notify func(err error, pause time.Duration)) error {
	for n := 1; ; n++ {
		switch s, err := attempt(n); s {
		case stepDone:
			return err
		case stepAgain:
			bo.reset()
		default:
			if !bo.pause(ctx, err, notify) {
				return errStopped
			}
		}
	}
}
