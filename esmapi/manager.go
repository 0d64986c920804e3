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

	"github.com/google/uuid"

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
	// cfg is the mapping's configuration as the API checked it (Create, Update); nil: its record's
	// settings, which the runner checks when it starts the mapping (a catalog read).
	cfg *poller.Config
	gen int                // which start of the poller is current
	run *runner.Supervised // nil: no poller
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
	if o.syncInterval > 0 {
		m.async(m.syncLoop)
	}
	return m, nil
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
// runner checks it (and applies the defaults) when it starts the mapping.
func (m *Manager) config(e *entry) (poller.Config, error) {
	mc := m.o.base
	mc.StreamARN, mc.FunctionARN = e.rec.Mapping.EventSourceArn, e.rec.Mapping.FunctionArn
	err := settingsOf(&e.rec.Mapping, e.rec.Enabled).Apply(&mc)
	return mc, err
}

// mapping is how the mapping runs: its settings on the base, its function, its progress, and the
// hooks that keep its state (ready) and LastProcessingResult.
func (m *Manager) mapping(e *entry, ready func()) (runner.Mapping, error) {
	id := e.rec.Mapping.UUID
	var mc poller.Config
	if e.cfg != nil {
		mc = *e.cfg // as the API checked it: the runner does not check it again
	} else {
		var err error
		if mc, err = m.config(e); err != nil {
			return runner.Mapping{}, err
		}
	}
	fn := m.funcs[parseFunctionName(e.rec.FunctionName).name]
	var obs poller.Observer = resultObserver{m: m, e: e, id: id}
	if m.o.observe != nil {
		if more := m.o.observe(e.view()); more != nil {
			obs = metrics.Tee(obs, more)
		}
	}
	rm := runner.Mapping{
		Source:   runner.Source{Stream: e.rec.Mapping.EventSourceArn},
		Function: runner.Function{Invoker: fn.Invoker, Name: e.rec.FunctionName, Role: fn.Role},
		Config:   mc,
		Store:    runner.Store{Open: func(ctx context.Context) (poller.Store, error) { return m.progress.Store(ctx, id) }},
		UUID:     id,
		Hooks:    runner.Hooks{Logger: m.log.With("mapping", id), Observer: obs, Ready: ready},
	}
	if m.o.trace != nil {
		rm.Hooks.Tracer = m.o.trace(e.view())
	}
	return rm, nil
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
	rm, err := m.mapping(e, settle)
	if err != nil { // settings the catalog holds that no longer apply: a start cannot mend them
		m.log.Error("mapping failed", "mapping", id, "error", err)
		m.async(func() {
			m.setResult(e, id, ResultProblem+oneLine(err))
			settle()
		})
		return
	}
	e.run = m.sup.Start(rm, func(err error) {
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

// Create implements CreateEventSourceMapping.
func (m *Manager) Create(ctx context.Context, body []byte) (EventSourceMapping, *APIError) {
	req, aerr := parseCreate(body)
	if aerr != nil {
		return EventSourceMapping{}, aerr
	}
	return m.create(ctx, req)
}

// checkCreate checks a create request in Lambda's order (the model's constraints, the source,
// the function, then the settings) and returns the mapping's configuration, defaults applied.
func (m *Manager) checkCreate(req *createRequest) (poller.Checked, *APIError) {
	if req.FunctionName == nil {
		return poller.Checked{}, nullError("functionName")
	}
	if e := req.checkModel(); e != nil {
		return poller.Checked{}, e
	}
	if a := req.EventSourceArn; a != nil && !arnRE.MatchString(*a) {
		return poller.Checked{}, validation("1 validation error detected: Value '%s' at 'eventSourceArn' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *a, arnPattern)
	}
	if p := req.StartingPosition; p != nil && *p != poller.TrimHorizon && *p != poller.Latest && *p != poller.AtTimestamp {
		return poller.Checked{}, validation("1 validation error detected: Value '%s' at 'startingPosition' failed to satisfy constraint: Member must satisfy enum value set: [LATEST, AT_TIMESTAMP, TRIM_HORIZON]", *p)
	}
	if req.EventSourceArn == nil || *req.EventSourceArn == "" {
		return poller.Checked{}, invalidParameter(msgUnrecognizedSource)
	}
	ref := parseFunctionName(*req.FunctionName)
	if _, ok := m.funcs[ref.name]; !ok {
		return poller.Checked{}, invalidParameter(msgFunctionNotFound)
	}
	stream, err := sourceStream(*req.EventSourceArn)
	if err != nil {
		return poller.Checked{}, invalidParameter("%s esm serves Kinesis mappings: arn:aws:kinesis:<region>:<account>:stream/<name>, or a consumer of one.", msgUnrecognizedSource)
	}
	if e := req.checkKinesis(); e != nil {
		return poller.Checked{}, e
	}
	s := req.settings()
	s.StartingPosition = req.StartingPosition
	if req.StartingPositionTimestamp != nil {
		s.StartingPositionTimestamp = &req.StartingPositionTimestamp.Time
	}
	mc := m.o.base
	mc.StreamARN, mc.FunctionARN = *req.EventSourceArn, ref.arn(stream) // a consumer ARN moves to ConsumerARN
	if err := s.Apply(&mc); err != nil {
		return poller.Checked{}, fromConfig(err)
	}
	checked, err := mc.Check()
	if err != nil {
		return poller.Checked{}, fromConfig(err)
	}
	return checked, nil
}

func (m *Manager) create(ctx context.Context, req *createRequest) (EventSourceMapping, *APIError) {
	checked, aerr := m.checkCreate(req)
	if aerr != nil {
		return EventSourceMapping{}, aerr
	}
	mc := checked.Config()
	if _, err := m.runner.ResolveStream(ctx, mc.StreamARN); err != nil {
		if errors.Is(err, poller.ErrStreamNotFound) {
			return EventSourceMapping{}, invalidParameter("Stream not found: %s", mc.StreamARN)
		}
		return EventSourceMapping{}, &APIError{Status: 500, Type: ServiceError, Message: oneLine(err)}
	}
	if mc.ConsumerARN != "" {
		if _, err := m.runner.ResolveConsumer(ctx, mc.StreamARN, mc.ConsumerARN, false); err != nil {
			return EventSourceMapping{}, invalidParameter("Stream consumer not found: %s (%s)", mc.ConsumerARN, oneLine(err))
		}
	}
	rec := Record{FunctionName: *req.FunctionName, Tags: req.Tags}
	if req.KMSKeyArn != nil {
		rec.Mapping.KMSKeyArn = *req.KMSKeyArn
	}
	rec.Mapping.MetricsConfig = req.MetricsConfig
	m.mu.Lock()
	defer m.mu.Unlock()
	if other := m.conflictLocked(sourceOf(mc), mc.FunctionARN, ""); other != nil {
		return EventSourceMapping{}, conflict(*req.EventSourceArn, *req.FunctionName, other)
	}
	return m.addLocked(ctx, rec, checked)
}

func conflict(streamARN, functionName string, other *entry) *APIError {
	return &APIError{Status: 409, Type: ResourceConflict, Message: fmt.Sprintf(
		`The event source arn (" %s ") and function (" %s ") provided mapping already exists. Please update or delete the existing mapping with UUID %s`,
		streamARN, functionName, other.rec.Mapping.UUID)}
}

// addLocked stores a new mapping with the settings checked has and starts it; m.mu is held.
func (m *Manager) addLocked(ctx context.Context, rec Record, checked poller.Checked) (EventSourceMapping, *APIError) {
	mc, stream := checked.Config(), checked.Stream()
	now := time.Now()
	id := uuid.NewString()
	rec.Enabled, rec.Created = !mc.Disabled, now
	rec.Mapping.describe(mc)
	rec.Mapping.UUID, rec.Mapping.EventSourceMappingArn, rec.Mapping.LastModified = id, mappingARN(stream, id), Timestamp{now}
	if err := m.catalog.Put(ctx, rec); err != nil {
		return EventSourceMapping{}, &APIError{Status: 500, Type: ServiceError, Message: oneLine(err)}
	}
	e := &entry{rec: rec, known: time.Now(), state: StateCreating, cfg: &mc}
	e.result.Store(new(ResultNone))
	m.maps[id] = e
	view := e.view()
	if rec.Enabled {
		m.startLocked(e)
	} else {
		m.async(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if e.state == StateCreating {
				e.state = StateDisabled
			}
		})
	}
	m.log.Info("mapping created", "mapping", id, "stream", rec.Mapping.EventSourceArn, "function", rec.Mapping.FunctionArn, "enabled", rec.Enabled)
	return view, nil
}

// EnsureMapping creates the mapping mc describes (a template's), invoking the registered
// function functionName, unless the stream already has a mapping to that function. It reports
// whether it created one.
func (m *Manager) EnsureMapping(ctx context.Context, functionName string, mc poller.Config) (EventSourceMapping, bool, error) {
	if _, ok := m.funcs[functionName]; !ok {
		return EventSourceMapping{}, false, fmt.Errorf("function %s is not registered", functionName)
	}
	checked, err := mc.Check()
	if err != nil {
		return EventSourceMapping{}, false, err
	}
	mc = checked.Config()
	if _, err := m.runner.ResolveStream(ctx, mc.StreamARN); err != nil {
		return EventSourceMapping{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if other := m.conflictLocked(sourceOf(mc), mc.FunctionARN, ""); other != nil {
		return other.view(), false, nil
	}
	v, aerr := m.addLocked(ctx, Record{FunctionName: functionName}, checked)
	if aerr != nil {
		return v, false, aerr
	}
	return v, true, nil
}

// conflictLocked returns another mapping of the same stream and function, if any.
func (m *Manager) conflictLocked(streamARN, functionARN, except string) *entry {
	for id, e := range m.maps {
		if id != except && e.rec.Mapping.EventSourceArn == streamARN && e.rec.Mapping.FunctionArn == functionARN {
			return e
		}
	}
	return nil
}

// Get implements GetEventSourceMapping.
func (m *Manager) Get(id string) (EventSourceMapping, *APIError) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.maps[id]
	if !ok {
		return EventSourceMapping{}, notFound()
	}
	return e.view(), nil
}

// Update implements UpdateEventSourceMapping: the new settings apply live. The mapping's poller
// is stopped (in-flight invocations finish and are checkpointed) and started again with the new
// configuration from the stored progress, so nothing is lost or read twice.
func (m *Manager) Update(ctx context.Context, id string, body []byte) (EventSourceMapping, *APIError) {
	req, aerr := parseUpdate(body)
	if aerr != nil {
		return EventSourceMapping{}, aerr
	}
	if e := req.checkModel(); e != nil {
		return EventSourceMapping{}, e
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.maps[id]
	if !ok {
		return EventSourceMapping{}, notFound()
	}
	if e.state == StateDeleting || transitional(e.state) {
		return EventSourceMapping{}, inUse(id, e.state)
	}
	rec := e.rec
	stream, _ := sourceStream(rec.Mapping.EventSourceArn)
	if req.FunctionName != nil {
		ref := parseFunctionName(*req.FunctionName)
		if _, ok := m.funcs[ref.name]; !ok {
			return EventSourceMapping{}, invalidParameter(msgFunctionNotFound)
		}
		rec.FunctionName, rec.Mapping.FunctionArn = *req.FunctionName, ref.arn(stream)
	}
	if e := req.checkKinesis(); e != nil {
		return EventSourceMapping{}, e
	}
	mc := m.o.base
	mc.StreamARN, mc.FunctionARN = rec.Mapping.EventSourceArn, rec.Mapping.FunctionArn
	if err := settingsOf(&rec.Mapping, rec.Enabled).Apply(&mc); err != nil {
		return EventSourceMapping{}, fromConfig(err)
	}
	if err := req.settings().Apply(&mc); err != nil {
		return EventSourceMapping{}, fromConfig(err)
	}
	checked, err := mc.Check()
	if err != nil {
		return EventSourceMapping{}, fromConfig(err)
	}
	mc = checked.Config()
	if other := m.conflictLocked(sourceOf(mc), mc.FunctionARN, id); other != nil {
		return EventSourceMapping{}, conflict(sourceOf(mc), rec.FunctionName, other)
	}
	rec.Mapping.describe(mc)
	rec.Enabled = !mc.Disabled
	rec.Mapping.LastModified = Timestamp{time.Now()}
	rec.Revision++
	if req.KMSKeyArn != nil {
		rec.Mapping.KMSKeyArn = *req.KMSKeyArn
	}
	if req.MetricsConfig != nil {
		rec.Mapping.MetricsConfig = req.MetricsConfig
		if len(req.MetricsConfig.Metrics) == 0 {
			rec.Mapping.MetricsConfig = nil
		}
	}
	if err := m.catalog.Put(ctx, rec); err != nil {
		return EventSourceMapping{}, m.lostLocked(ctx, id, err)
	}
	m.replaceLocked(e, rec, &mc)
	view := e.view()
	m.log.Info("mapping updated", "mapping", id, "state", view.State)
	return view, nil
}

// replaceLocked gives the mapping its new settings: Updating (Enabling, Disabling) while its
// poller stops, the batch in flight finishing, then Enabled once it runs again with them from the
// stored progress (or Disabled). m.mu is held.
func (m *Manager) replaceLocked(e *entry, rec Record, cfg *poller.Config) {
	wasEnabled := e.rec.Enabled
	e.rec, e.cfg = rec, cfg
	switch {
	case rec.Enabled && !wasEnabled:
		e.state = StateEnabling
	case !rec.Enabled && wasEnabled:
		e.state = StateDisabling
	default:
		e.state = StateUpdating
	}
	m.async(func() {
		m.stop(e)
		m.mu.Lock()
		defer m.mu.Unlock()
		if e.state == StateDeleting {
			return
		}
		if e.rec.Enabled {
			m.startLocked(e)
		} else {
			e.state = StateDisabled
		}
	})
}

// Delete implements DeleteEventSourceMapping: the mapping is Deleting until its poller stopped
// and its progress and definition are removed; a Get then answers 404.
func (m *Manager) Delete(ctx context.Context, id string) (EventSourceMapping, *APIError) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.maps[id]
	if !ok {
		return EventSourceMapping{}, notFound()
	}
	if transitional(e.state) {
		return EventSourceMapping{}, inUse(id, e.state)
	}
	rec := e.rec
	rec.Deleting = true
	rec.Revision++
	if err := m.catalog.Put(ctx, rec); err != nil {
		return EventSourceMapping{}, m.lostLocked(ctx, id, err)
	}
	e.rec, e.state = rec, StateDeleting
	view := e.view()
	m.async(func() { m.finishDelete(e) })
	m.log.Info("mapping deleting", "mapping", id)
	return view, nil
}

// finishDelete stops the mapping and removes its progress and definition. A failure leaves it
// Deleting, to be finished at the next start.
func (m *Manager) finishDelete(e *entry) {
	m.stop(e)
	if m.o.deleteDelay > 0 {
		select {
		case <-m.ctx.Done(): // the next start finishes the deletion
			return
		case <-time.After(m.o.deleteDelay):
		}
	}
	m.mu.Lock()
	id, rev := e.rec.Mapping.UUID, e.rec.Revision
	m.mu.Unlock()
	if err := m.progress.Delete(m.ctx, id); err != nil {
		m.log.Error("delete the mapping's progress", "mapping", id, "error", err)
		return
	}
	if err := m.catalog.Delete(m.ctx, id, rev); err != nil {
		m.log.Error("delete the mapping", "mapping", id, "error", err)
		return
	}
	if m.o.results != nil {
		if err := m.o.results.DeleteResult(m.ctx, id); err != nil {
			m.log.Warn("delete the mapping's last processing result", "mapping", id, "error", err)
		}
	}
	m.mu.Lock()
	delete(m.maps, id)
	m.deleted[id] = true
	m.mu.Unlock()
	m.log.Info("mapping deleted", "mapping", id)
}

// ListInput are ListEventSourceMappings' query parameters.
type ListInput struct {
	EventSourceArn, FunctionName, Marker string
	MaxItems                             int
}

// DefaultMaxItems is the page size when MaxItems is not given.
const DefaultMaxItems = 100

// List implements ListEventSourceMappings: mappings in creation order, a page at a time.
func (m *Manager) List(in ListInput) ([]EventSourceMapping, string, *APIError) {
	if in.MaxItems == 0 {
		in.MaxItems = DefaultMaxItems
	}
	if in.MaxItems < 1 || in.MaxItems > 10000 {
		return nil, "", fromConfig(poller.RangeError("maxItems", int64(in.MaxItems), 1, 10000))
	}
	var after cursor
	if in.Marker != "" {
		var err error
		if after, err = parseCursor(in.Marker); err != nil {
			return nil, "", invalidParameter("Invalid Marker: %s", in.Marker)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []*entry
	for _, e := range m.maps {
		if in.EventSourceArn != "" && e.rec.Mapping.EventSourceArn != in.EventSourceArn {
			continue
		}
		if in.FunctionName != "" {
			stream, _ := sourceStream(e.rec.Mapping.EventSourceArn)
			if parseFunctionName(in.FunctionName).arn(stream) != e.rec.Mapping.FunctionArn {
				continue
			}
		}
		if in.Marker != "" && !after.before(cursorOf(e)) {
			continue
		}
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b *entry) int { return cursorOf(a).compare(cursorOf(b)) })
	next := ""
	if len(all) > in.MaxItems {
		all = all[:in.MaxItems]
		next = cursorOf(all[len(all)-1]).String()
	}
	out := make([]EventSourceMapping, 0, len(all))
	for _, e := range all {
		out = append(out, e.view())
	}
	return out, next, nil
}

// Tags returns the tags of the mapping with this ARN.
func (m *Manager) Tags(arn string) (map[string]string, *APIError) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byARNLocked(arn)
	if e == nil {
		return nil, notFound()
	}
	if e.rec.Tags == nil {
		return map[string]string{}, nil
	}
	return e.rec.Tags, nil
}

// SetTags adds tags to (or, with remove, removes tag keys from) the mapping with this ARN.
func (m *Manager) SetTags(ctx context.Context, arn string, add map[string]string, remove []string) *APIError {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byARNLocked(arn)
	if e == nil {
		return notFound()
	}
	if e.state == StateDeleting {
		// A deleted mapping's record stays at its Deleting revision until it is removed.
		return inUse(e.rec.Mapping.UUID, e.state)
	}
	rec := e.rec
	tags := map[string]string{}
	for k, v := range rec.Tags {
		tags[k] = v
	}
	for k, v := range add {
		tags[k] = v
	}
	for _, k := range remove {
		delete(tags, k)
	}
	rec.Tags = tags
	rec.Revision++
	if err := m.catalog.Put(ctx, rec); err != nil {
		return m.lostLocked(ctx, rec.Mapping.UUID, err)
	}
	e.rec = rec
	return nil
}

func (m *Manager) byARNLocked(arn string) *entry {
	for _, e := range m.maps {
		if e.rec.Mapping.EventSourceMappingArn == arn {
			return e
		}
	}
	return nil
}
