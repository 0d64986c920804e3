package poller

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// storeFailLimit is how many store operations in a row may fail before a mapping reports itself
// not ready: a single failed write that the next retry fixes leaves it ready.
const storeFailLimit = 3

// Readiness tells a health check whether a mapping can do its work now. It is ready once the
// mapping runs (its progress was read and its shards listed) and, with a Coordinator, once a
// claim of leases succeeded; it is not ready while the store (or the lease table) keeps failing,
// and ready again after the next success. Give one to New with WithReadiness; Err is safe for
// concurrent use.
type Readiness struct {
	mu        sync.Mutex
	started   bool
	needClaim bool  // a Coordinator is used and no claim succeeded yet
	fails     int   // store operations failed in a row
	last      error // the last of them
}

// NewReadiness returns a Readiness that is not ready until its mapping runs.
func NewReadiness() *Readiness { return &Readiness{} }

// Err is nil when the mapping is ready, else why it is not.
func (r *Readiness) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.started:
		return errors.New("starting: progress not read or shards not listed yet")
	case r.needClaim:
		return errors.New("starting: no claim of leases has succeeded yet")
	case r.fails >= storeFailLimit:
		return fmt.Errorf("store failing (%d operations in a row): %w", r.fails, r.last)
	}
	return nil
}

func (r *Readiness) start(coordinated bool) {
	r.mu.Lock()
	r.started, r.needClaim = true, coordinated
	r.mu.Unlock()
}

// stored records the outcome of one store operation (a claim of leases counts as one).
func (r *Readiness) stored(err error, claim bool) {
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrLeaseLost) {
		return // a stop or a fenced write says nothing about the store's health
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.fails++
		r.last = err
		return
	}
	r.fails = 0
	if claim {
		r.needClaim = false
	}
}

// WithReadiness makes the mapping report its readiness to r (see Readiness).
func WithReadiness(r *Readiness) Option { return func(p *Poller) { p.readiness = r } }

// trackedStore reports every store operation's outcome to a Readiness.
type trackedStore struct {
	Store
	r *Readiness
}

func (s trackedStore) Load(ctx context.Context) (map[string]ShardProgress, error) {
	m, err := s.Store.Load(ctx)
	s.r.stored(err, false)
	return m, err
}

func (s trackedStore) Save(ctx context.Context, u map[string]ShardProgress) error {
	err := s.Store.Save(ctx, u)
	s.r.stored(err, false)
	return err
}
