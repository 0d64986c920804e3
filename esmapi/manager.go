package esmapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// Function is a function that mappings may invoke, known by its name.
type Function struct {
	Name    string
	Invoker poller.Invoker
	// Role is the execution role's ARN: the events' invokeIdentityArn (default: poller's).
	Role string
	// Timeout is the function's timeout (default 3 s): with the 10 s before it, how long an
	// invocation may run (runner.Function.Timeout).
	Timeout time.Duration
}

// Manager runs every mapping created through the API, one poller each, and answers the API
// (Handler). Open it, serve its Handler, and Close it.
type Manager struct {
	runner   *runner.Runner
	sup      *runner.Supervisor
	catalog  Catalog
	progress Progress
	o        options
	log      *slog.Logger
	funcs    map[string]Function

	ctx    context.Context // the pollers' context; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // transitions

	mu   sync.Mutex
	maps map[string]*entry
	// deleted are the mappings deleted while this process runs: a catalog read from before
	// their deletion must not bring them back.
	deleted map[string]bool
	// applied is when the catalog read last applied here began (this process's clock): a read
	// that began earlier is older than what this worker knows, and is not applied.
	applied time.Time
}

type entry struct {
	rec Record
	// known is when the record was last known to be in the catalog (this process's clock): a
	// catalog read that began later and lacks it shows that it was deleted.
	known  time.Time
	state  string
	result atomic.Pointer[string] // LastProcessingResult
	// resultMu orders the changes of result with their saving (setResult).
	resultMu sync.Mutex
	// src is the mapping's source as Create found it; nil: its record's, which the runner finds
	// when it starts the mapping.
	src *runner.Source
	gen int                // which start of the poller is current
	run *runner.Supervised // nil: no poller
	// skips reach the mapping's pollers (esm's skip route); made with the entry's first poller.
	skips *poller.Skips
	// rewinds reach the mapping's pollers when its progress is in a store of this process (no
	// WithRewinds: the state directory); made with the entry's first poller.
	rewinds *runner.LocalRewinds
}

// transitional states: the mapping is changing and refuses updates and deletes meanwhile.
func transitional(state string) bool {
	switch state {
	case StateCreating, StateEnabling, StateDisabling, StateUpdating, StateDeleting:
		return true
	}
	return false
}

// Open loads the catalog's mappings and starts the enabled ones, each from its stored progress:
// r finds the streams and runs the mappings (restarting each after a failure), catalog keeps the
// mappings, progress their progress.
func Open(ctx context.Context, r *runner.Runner, catalog Catalog, progress Progress, opts ...Option) (*Manager, error) {
	if pf, ok := progress.(ProgressFuncs); ok && (pf.StoreFunc == nil || pf.DeleteFunc == nil) {
		progress = nil
	}
	if r == nil || catalog == nil || progress == nil {
		return nil, errors.New("esmapi: a runner, a catalog and a progress are required")
	}
	o := options{logger: slog.New(slog.NewTextHandler(io.Discard, nil)), restartBackoff: time.Second}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	m := &Manager{runner: r, catalog: catalog, progress: progress, o: o, log: o.logger,
		funcs: map[string]Function{}, maps: map[string]*entry{}, deleted: map[string]bool{}}
	for _, f := range o.functions {
		if _, dup := m.funcs[f.Name]; dup {
			return nil, fmt.Errorf("function %s registered twice", f.Name)
		}
		m.funcs[f.Name] = f
	}
	loaded := time.Now()
	recs, err := catalog.Load(ctx)
	if err != nil {
		return nil, err
	}
	m.applied = loaded
	m.ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	m.sup = r.Supervise(m.ctx, runner.WithRestartBackoff(o.restartBackoff))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range recs {
		e := &entry{rec: r, known: loaded}
		e.result.Store(new(ResultNone))
		if o.results != nil {
			if kept, err := o.results.LoadResult(ctx, r.Mapping.UUID); err != nil {
				m.log.Warn("the mapping's last processing result is lost", "mapping", r.Mapping.UUID, "error", err)
			} else if kept != "" {
				e.result.Store(&kept)
			}
		}
		m.maps[r.Mapping.UUID] = e
		switch {
		case r.Deleting:
			e.state = StateDeleting
			m.async(func() { m.finishDelete(e) })
		case r.Enabled:
			e.state = StateEnabling
			m.startLocked(e)
		default:
			e.state = StateDisabled
		}
	}
	m.log.Info("mappings loaded", "mappings", len(recs))
	warnDuplicates(m.log, recs)
	if o.syncInterval > 0 {
		m.async(m.syncLoop)
	}
	return m, nil
}

// warnDuplicates names the mappings that share a source and function: a catalog written before
// esm kept one mapping per pair may hold such, and every record is then invoked once per mapping.
func warnDuplicates(log *slog.Logger, recs []Record) {
	first := map[pair]string{}
	for i := range recs {
		p := pairOf(&recs[i])
		if other, dup := first[p]; dup {
			log.Warn("two mappings of one source and function (made before esm kept one per pair): delete one",
				"mapping", recs[i].Mapping.UUID, "other", other, "source", p.source, "function", p.function)
			continue
		}
		first[p] = recs[i].Mapping.UUID
	}
}

// Close stops every poller gracefully (in-flight invocations finish and are checkpointed) and
// waits for them.
func (m *Manager) Close() {
	m.cancel()
	m.wg.Wait()
	m.sup.Close()
}

func (m *Manager) async(f func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
}

// Functions are the names of the registered functions, sorted.
func (m *Manager) Functions() []string {
	names := make([]string, 0, len(m.funcs))
	for n := range m.funcs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// config is the mapping's configuration as its record gives it: its settings on the base. The
// runner checks it when it starts the mapping (poller.New), as the API did when it stored it.
func (m *Manager) config(e *entry) poller.Config {
	mc := m.o.base
	e.rec.Mapping.settings(e.rec.Enabled, &mc)
	return mc
}

// mapping is how the mapping runs: its settings on the base, its function, its progress, and the
// hooks that keep its state (ready) and LastProcessingResult.
func (m *Manager) mapping(e *entry, ready func()) runner.Mapping {
	id := e.rec.Mapping.UUID
	fn := m.funcs[parseFunctionName(e.rec.FunctionName).name]
	var obs poller.Observer = resultObserver{m: m, e: e, id: id}
	if m.o.observe != nil {
		if more := m.o.observe(e.view()); more != nil {
			obs = metrics.Tee(obs, more)
		}
	}
	src := runner.Source{Stream: e.rec.Mapping.EventSourceArn}
	if e.src != nil {
		src = *e.src
	}
	rm := runner.Mapping{
		Source:   src,
		Function: runner.Function{Invoker: fn.Invoker, Name: e.rec.FunctionName, ARN: e.rec.Mapping.FunctionArn, Role: fn.Role, Timeout: fn.Timeout},
		Config:   m.config(e),
		Store:    runner.Store{Open: func(ctx context.Context) (poller.Store, error) { return m.progress.Store(ctx, id) }},
		UUID:     id,
		Hooks:    runner.Hooks{Logger: m.log.With("mapping", id), Observer: obs, Ready: ready, BlockedAfter: m.o.blockedAfter},
	}
	if e.skips == nil {
		e.skips = poller.NewSkips()
	}
	rm.Hooks.Skips = e.skips
	if m.o.rewind == nil { // progress of this process only: it applies rewinds itself
		if e.rewinds == nil {
			e.rewinds = runner.NewLocalRewinds()
		}
		rm.Hooks.Rewinds = e.rewinds
	}
	if m.o.trace != nil {
		rm.Hooks.Tracer = m.o.trace(e.view())
	}
	return rm
}

// startLocked starts the mapping's poller; m.mu is held. The state becomes Enabled once the
// poller runs (or fails: LastProcessingResult then names the problem and the supervisor starts
// the poller again after a pause).
func (m *Manager) startLocked(e *entry) {
	e.gen++
	gen := e.gen
	id := e.rec.Mapping.UUID
	settle := func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if e.gen == gen && transitional(e.state) && e.state != StateDeleting && e.state != StateDisabling {
			e.state = StateEnabled
		}
	}
	rm := m.mapping(e, settle)
	fnName := e.rec.FunctionName
	e.run = m.sup.Start(rm, func(err error) {
		if errors.Is(err, runner.ErrNoFunction) {
			err = fmt.Errorf("function %s is not registered", fnName)
		}
		m.setResult(e, id, ResultProblem+oneLine(err))
		settle()
	})
}

// SharedProgress is a mapping's progress shared with other workers through leases
// (lease.Dynamo): the poller coordinates with it, and the runner renews its leases meanwhile.
type SharedProgress = runner.SharedStore

// stop stops the mapping's poller, if any, and waits for it; m.mu is not held.
func (m *Manager) stop(e *entry) {
	m.mu.Lock()
	r := e.run
	e.run = nil
	m.mu.Unlock()
	if r != nil {
		r.Stop()
	}
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// resultObserver keeps the mapping's LastProcessingResult.
type resultObserver struct {
	poller.NopObserver
	m  *Manager
	e  *entry
	id string
}

func (o resultObserver) BatchInvoked(_ string, _ int, _ time.Duration, failed bool) {
	if failed {
		o.m.setResult(o.e, o.id, ResultProblem+"Function call failed")
		return
	}
	o.m.setResult(o.e, o.id, ResultOK)
}

// setResult sets the mapping's LastProcessingResult and, when it changed, keeps it
// (WithResults). Batches of several shards may report at once: a change and its saving happen
// in one order.
func (m *Manager) setResult(e *entry, id, result string) {
	if old := e.result.Load(); old != nil && *old == result {
		return // the hot path: nothing changed
	}
	e.resultMu.Lock()
	defer e.resultMu.Unlock()
	if old := e.result.Swap(&result); old != nil && *old == result {
		return
	}
	if m.o.results != nil {
		if err := m.o.results.SaveResult(m.ctx, id, result); err != nil {
			m.log.Warn("the mapping's last processing result is not kept", "mapping", id, "error", err)
		}
	}
}

// view is the mapping as the API returns it; m.mu is held.
func (e *entry) view() EventSourceMapping {
	v := e.rec.Mapping
	v.State, v.StateTransitionReason, v.LastProcessingResult = e.state, userAction, *e.result.Load()
	return v
}
