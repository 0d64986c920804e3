package poller

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kinesis-esm/esm/internal/ctxwait"
)

// Retrying. Everything the poller does again until it works (the first listing and load, opening
// and reading a shard, saving progress, invoking a batch, closing a window, delivering a failure
// record, subscribing) goes through retry, or for the reader's reads through backoff.pause: one
// pacing rule, one way to stop. Every pause sleeps on a time.Timer, the one time source the
// poller waits on, which testing/synctest runs in virtual time (internal/sim).

var errStopped = errors.New("stopped")

// backoff is capped exponential backoff with full jitter over the upper half, drawn from src.
type backoff struct {
	base, max time.Duration
	n         int
	src       *jitter // nil: the process's random source
}

// jitter is the random source of a Poller's backoffs (see WithRand), shared by its goroutines.
type jitter struct {
	mu sync.Mutex
	r  *rand.Rand
}

// n draws from [0, d).
func (j *jitter) n(d time.Duration) time.Duration {
	if j == nil {
		return rand.N(d)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return time.Duration(j.r.Int64N(int64(d)))
}

// WithRand sets the source of the jitter of every retry's pause (default: the process's random
// source). A seeded one makes the pauses, and so a run in virtual time, replay exactly.
func WithRand(r *rand.Rand) Option { return func(p *Poller) { p.jit = &jitter{r: r} } }

// pace is a backoff from base capped at max, drawing its jitter from the Poller's source.
func (p *Poller) pace(base, max time.Duration) backoff {
	return backoff{base: base, max: max, src: p.jit}
}

// readPace paces failed GetShardIterator and GetRecords calls.
func (p *Poller) readPace() backoff { return p.pace(100*time.Millisecond, 5*time.Second) }

// retryPace paces the retries of a batch, a window's final invocation and a failure record's
// delivery: exponential from retryBase, capped at retryMax.
func (p *Poller) retryPace() backoff { return p.pace(p.retryBase, p.retryMax) }

func (b *backoff) next() time.Duration {
	d := b.max
	if b.n < 30 {
		d = min(b.base<<b.n, b.max)
	}
	b.n++
	return d/2 + b.src.n(d/2+1)
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
