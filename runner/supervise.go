package runner

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Restart pacing of a supervised mapping: the first pause after a failure, doubled after each
// failure up to MaxRestartBackoff.
const (
	DefaultRestartBackoff = time.Second
	MaxRestartBackoff     = 30 * time.Second
)

// errStopped is a supervised run that ended without an error while it was to go on.
var errStopped = errors.New("the poller stopped")

// Supervisor runs mappings, each until it is stopped, and starts a mapping again after each
// failure, after a pause that grows. esm serve runs every mapping of its catalog under one.
type Supervisor struct {
	r       *Runner
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	backoff time.Duration

	mu   sync.Mutex
	runs map[*Supervised]struct{}
}

// SuperviseOption configures Supervise. A nil SuperviseOption is ignored.
type SuperviseOption func(*Supervisor)

// WithRestartBackoff sets the first pause before a failed mapping is started again; it doubles up
// to MaxRestartBackoff (default DefaultRestartBackoff; zero or negative keeps it).
func WithRestartBackoff(d time.Duration) SuperviseOption {
	return func(s *Supervisor) {
		if d > 0 {
			s.backoff = d
		}
	}
}

// Supervise returns a Supervisor of mappings run on r. Its mappings run until they are stopped,
// ctx ends or Close is called.
func (r *Runner) Supervise(ctx context.Context, opts ...SuperviseOption) *Supervisor {
	s := &Supervisor{r: r, backoff: DefaultRestartBackoff, runs: map[*Supervised]struct{}{}}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	return s
}

// Supervised is one mapping a Supervisor runs.
type Supervised struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	status Status
}

// Status is what a supervised mapping is doing.
type Status struct {
	// UUID is the mapping's (Mapping.UUID).
	UUID string
	// Running: the mapping's current start has not ended (it may not be ready yet).
	Running bool
	// Starts counts the starts of the mapping, the first one included.
	Starts int
	// Err is the error that ended the last failed start, nil before any failure.
	Err error
}

// Start runs m until the returned Supervised is stopped or the Supervisor closed. When a start of
// m ends with an error (or without one, before it was stopped), onFailure (when set) is told the
// error, and m is started again after the back-off.
func (s *Supervisor) Start(m Mapping, onFailure func(error)) *Supervised {
	ctx, cancel := context.WithCancel(s.ctx)
	sv := &Supervised{cancel: cancel, done: make(chan struct{}), status: Status{UUID: m.UUID}}
	log := s.r.withDefaults(m).Hooks.Logger
	s.mu.Lock()
	s.runs[sv] = struct{}{}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(sv.done)
		defer cancel()
		defer s.forget(sv)
		backoff := s.backoff
		for {
			sv.set(func(st *Status) { st.Running, st.Starts = true, st.Starts+1 })
			err := s.r.Run(ctx, m)
			sv.set(func(st *Status) { st.Running = false })
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				err = errStopped
			}
			sv.set(func(st *Status) { st.Err = err })
			log.Error("mapping failed; starting it again", "error", err, "in", backoff)
			if onFailure != nil {
				onFailure(err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, MaxRestartBackoff)
		}
	}()
	return sv
}

func (s *Supervisor) forget(sv *Supervised) {
	s.mu.Lock()
	delete(s.runs, sv)
	s.mu.Unlock()
}

// Status is the status of every mapping the Supervisor runs.
func (s *Supervisor) Status() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.runs))
	for sv := range s.runs {
		out = append(out, sv.Status())
	}
	return out
}

// Close stops every mapping gracefully (in-flight invocations finish and are checkpointed) and
// waits for them.
func (s *Supervisor) Close() {
	s.cancel()
	s.wg.Wait()
}

// Stop stops the mapping and waits until its run ended.
func (sv *Supervised) Stop() {
	sv.cancel()
	<-sv.done
}

// Status is what the mapping is doing.
func (sv *Supervised) Status() Status {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.status
}

func (sv *Supervised) set(f func(*Status)) {
	sv.mu.Lock()
	f(&sv.status)
	sv.mu.Unlock()
}
