package esmapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
	"github.com/kinesis-esm/esm/source/dynamostreams"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// Create implements CreateEventSourceMapping.
func (m *Manager) Create(ctx context.Context, body []byte) (EventSourceMapping, *APIError) {
	req, aerr := parseCreate(body)
	if aerr != nil {
		return EventSourceMapping{}, aerr
	}
	return m.create(ctx, req)
}

// checkCreate checks a create request in Lambda's order (the model's constraints, the source,
// the function, then the settings) and returns the mapping it asks for: its source (not looked
// up yet), its function (the name given, and the ARN it is invoked as and reported with) and its
// settings, defaults applied.
func (m *Manager) checkCreate(req *createRequest) (runner.Mapping, *APIError) {
	c, aerr := m.checkCreateSettings(req)
	if aerr != nil {
		return runner.Mapping{}, aerr
	}
	src, err := checkSource(*req.EventSourceArn)
	if err != nil {
		return runner.Mapping{}, fromConfig(err)
	}
	stream, _ := sourceStream(*req.EventSourceArn) // checked with the settings
	fn := runner.Function{Name: *req.FunctionName, ARN: parseFunctionName(*req.FunctionName).arn(stream)}
	return runner.Mapping{Source: src, Function: fn, Config: c}, nil
}

// checkSource checks an EventSourceArn as a mapping's source: a DynamoDB stream's ARN, a Kinesis
// stream's, or an enhanced fan-out consumer's (then its stream is the consumer's).
func checkSource(eventSourceARN string) (runner.Source, error) {
	if dynamostreams.IsStreamARN(eventSourceARN) {
		a, err := dynamostreams.ParseStreamARN(eventSourceARN)
		return runner.Source{Stream: a.String()}, err
	}
	stream, consumer, err := kinesissrc.ParseSource(eventSourceARN, "")
	return runner.Source{Stream: stream.String(), Consumer: consumer}, err
}

// sourceARN is the EventSourceArn of a mapping of src: its consumer's ARN, or its stream's.
func sourceARN(src runner.Source) string { return cmp.Or(src.Consumer, src.Stream) }

// checkCreateSettings is checkCreate but for the source's ARNs and the function's.
func (m *Manager) checkCreateSettings(req *createRequest) (poller.Config, *APIError) {
	if req.FunctionName == nil {
		return poller.Config{}, nullError("functionName")
	}
	if e := req.checkModel(); e != nil {
		return poller.Config{}, e
	}
	if a := req.EventSourceArn; a != nil && !arnRE.MatchString(*a) {
		return poller.Config{}, validation("1 validation error detected: Value '%s' at 'eventSourceArn' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *a, arnPattern)
	}
	if p := req.StartingPosition; p != nil && *p != poller.TrimHorizon && *p != poller.Latest && *p != poller.AtTimestamp {
		return poller.Config{}, validation("1 validation error detected: Value '%s' at 'startingPosition' failed to satisfy constraint: Member must satisfy enum value set: [LATEST, AT_TIMESTAMP, TRIM_HORIZON]", *p)
	}
	if req.EventSourceArn == nil || *req.EventSourceArn == "" {
		return poller.Config{}, invalidParameter(msgUnrecognizedSource)
	}
	ref := parseFunctionName(*req.FunctionName)
	if _, ok := m.funcs[ref.name]; !ok {
		return poller.Config{}, invalidParameter(msgFunctionNotFound)
	}
	_, err := sourceStream(*req.EventSourceArn)
	switch {
	case err != nil && dynamostreams.IsStreamARN(*req.EventSourceArn):
		return poller.Config{}, invalidParameter("%s %s", msgUnrecognizedSource, oneLine(err))
	case err != nil:
		return poller.Config{}, invalidParameter("%s esm serves Kinesis and DynamoDB Streams mappings: arn:aws:kinesis:<region>:<account>:stream/<name>, a consumer of one, or arn:aws:dynamodb:<region>:<account>:table/<table>/stream/<label>.", msgUnrecognizedSource)
	}
	if req.StartingPosition != nil {
		if err := poller.CheckStartingPosition(*req.EventSourceArn, *req.StartingPosition); err != nil {
			return poller.Config{}, invalidParameter("%s", err.Error())
		}
	}
	if e := req.checkKinesis(); e != nil {
		return poller.Config{}, e
	}
	mc := m.o.base
	if err := req.apply(&mc); err != nil {
		return poller.Config{}, fromConfig(err)
	}
	if err := mc.Validate(*req.EventSourceArn); err != nil {
		return poller.Config{}, fromConfig(err)
	}
	return mc.Defaults(), nil
}

func (m *Manager) create(ctx context.Context, req *createRequest) (EventSourceMapping, *APIError) {
	rm, aerr := m.checkCreate(req)
	if aerr != nil {
		return EventSourceMapping{}, aerr
	}
	// Found once: the mapping's first start reads from the source found here.
	found, err := m.runner.Resolve(ctx, rm)
	switch src := rm.Source; {
	case errors.Is(err, poller.ErrStreamNotFound):
		return EventSourceMapping{}, invalidParameter("Stream not found: %s", src.Stream)
	case err != nil && src.Consumer != "" && (errors.Is(err, runner.ErrConsumerNotFound) || errors.Is(err, poller.ErrInvalidConfig)):
		return EventSourceMapping{}, invalidParameter("Stream consumer not found: %s (%s)", src.Consumer, oneLine(err))
	case err != nil:
		return EventSourceMapping{}, &APIError{Status: 500, Type: ServiceError, Message: oneLine(err)}
	}
	rec := Record{FunctionName: *req.FunctionName, Tags: req.Tags}
	if req.KMSKeyArn != nil {
		rec.Mapping.KMSKeyArn = *req.KMSKeyArn
	}
	rec.Mapping.MetricsConfig = req.MetricsConfig
	rec.Mapping.FunctionArn = found.FunctionARN
	v, err := m.add(ctx, rec, rm.Config, found.Source())
	if err != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		return EventSourceMapping{}, m.refusedLocked(ctx, err, *req.EventSourceArn, *req.FunctionName)
	}
	return v, nil
}

// refusedLocked answers a new record (or a new function) that the catalog refused: Lambda's 409
// when another mapping has the source and function (this worker then reads the catalog, and so
// knows that mapping), else a service error. m.mu is held.
func (m *Manager) refusedLocked(ctx context.Context, err error, source, functionName string) *APIError {
	var taken *PairTakenError
	if !errors.As(err, &taken) {
		return &APIError{Status: 500, Type: ServiceError, Message: oneLine(err)}
	}
	m.reloadLocked(ctx)
	return conflict(source, functionName, taken.UUID)
}

// conflict is Lambda's answer to a second mapping of one source and function.
func conflict(source, functionName, other string) *APIError {
	return &APIError{Status: 409, Type: ResourceConflict, Message: fmt.Sprintf(
		`The event source arn (" %s ") and function (" %s ") provided mapping already exists. Please update or delete the existing mapping with UUID %s`,
		source, functionName, other)}
}

// add stores a new mapping (rec names its function) with the settings mc (validated, defaults
// applied) and starts it, reading from src (as found). It returns the catalog's refusal: a *PairTakenError when another mapping has the source
// and function. m.mu is not held: the catalog may wait for another worker's write to the pair
// (see DynamoCatalog).
func (m *Manager) add(ctx context.Context, rec Record, mc poller.Config, src runner.Source) (EventSourceMapping, error) {
	stream, err := sourceStream(src.Stream)
	if err != nil {
		return EventSourceMapping{}, err
	}
	now := time.Now()
	rec.Enabled, rec.Created = !mc.Disabled, now
	rec.Mapping.describe(sourceARN(src), mc)
	rec.Mapping.LastModified = Timestamp{now}
	// A new record is refused as a conflict when another worker took its pair over meanwhile,
	// fencing this write off (see DynamoCatalog): it is written again under a new UUID, and
	// then meets that worker's claim.
	for range 3 {
		id := uuid.NewString()
		rec.Mapping.UUID, rec.Mapping.EventSourceMappingArn = id, mappingARN(stream, id)
		if err = m.catalog.Put(ctx, rec); !errors.Is(err, ErrConflict) {
			break
		}
	}
	if err != nil {
		return EventSourceMapping{}, err
	}
	id := rec.Mapping.UUID
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.maps[id]; ok { // a sync of this worker read it first, and runs it
		return e.view(), nil
	}
	e := &entry{rec: rec, known: time.Now(), state: StateCreating, src: &src}
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

// EnsureMapping creates the mapping rm (a template's: its source, the registered function
// rm.Function.Name, invoked as rm.Function.ARN when set, and the settings rm.Config), unless the
// stream already has a mapping to that function. It reports whether it created one.
func (m *Manager) EnsureMapping(ctx context.Context, rm runner.Mapping) (EventSourceMapping, bool, error) {
	functionName, mc := rm.Function.Name, rm.Config
	if _, ok := m.funcs[functionName]; !ok {
		return EventSourceMapping{}, false, fmt.Errorf("function %s is not registered", functionName)
	}
	found, err := m.runner.Resolve(ctx, rm)
	if err != nil {
		return EventSourceMapping{}, false, err
	}
	if err := mc.Validate(found.StreamARN); err != nil {
		return EventSourceMapping{}, false, err
	}
	mc = mc.Defaults()
	m.mu.Lock()
	if e := m.sameLocked(sourceARN(found.Source()), found.FunctionARN); e != nil {
		v := e.view()
		m.mu.Unlock()
		return v, false, nil
	}
	m.mu.Unlock()
	rec := Record{FunctionName: functionName}
	rec.Mapping.FunctionArn = found.FunctionARN
	v, err := m.add(ctx, rec, mc, found.Source())
	var taken *PairTakenError
	if !errors.As(err, &taken) {
		return v, err == nil, err
	}
	// Another worker made it first (N workers started with one template): this one adopts it.
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reloadLocked(ctx)
	if e, ok := m.maps[taken.UUID]; ok {
		return e.view(), false, nil
	}
	v = EventSourceMapping{UUID: taken.UUID, EventSourceArn: taken.EventSourceArn, FunctionArn: taken.FunctionArn, State: StateCreating}
	return v, false, nil
}

// sameLocked is this worker's mapping of the source to the function, if it knows one; m.mu is
// held. The catalog alone decides whether a new one may be made.
func (m *Manager) sameLocked(source, functionARN string) *entry {
	for _, e := range m.maps {
		if e.rec.Mapping.EventSourceArn == source && e.rec.Mapping.FunctionArn == functionARN {
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
	rec.Mapping.settings(rec.Enabled, &mc)
	if err := req.apply(&mc); err != nil {
		return EventSourceMapping{}, fromConfig(err)
	}
	if err := mc.Validate(rec.Mapping.EventSourceArn); err != nil {
		return EventSourceMapping{}, fromConfig(err)
	}
	mc = mc.Defaults()
	rec.Mapping.describe(rec.Mapping.EventSourceArn, mc)
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
	var err error
	if pairOf(&rec) == pairOf(&e.rec) {
		err = m.catalog.Put(ctx, rec)
	} else {
		// Taking another pair may wait for another worker's write to it (see
		// DynamoCatalog): not with m.mu held. A change made here meanwhile was made from the
		// same revision, so one of the two writes is refused.
		m.mu.Unlock()
		err = m.catalog.Put(ctx, rec)
		m.mu.Lock()
	}
	if err != nil {
		if errors.As(err, new(*PairTakenError)) {
			return EventSourceMapping{}, m.refusedLocked(ctx, err, rec.Mapping.EventSourceArn, rec.FunctionName)
		}
		return EventSourceMapping{}, m.lostLocked(ctx, id, err)
	}
	if e.rec.Revision >= rec.Revision { // a sync of this worker applied it, or a later change, first
		return e.view(), nil
	}
	m.replaceLocked(e, rec)
	view := e.view()
	m.log.Info("mapping updated", "mapping", id, "state", view.State)
	return view, nil
}

// replaceLocked gives the mapping its new settings: Updating (Enabling, Disabling) while its
// poller stops, the batch in flight finishing, then Enabled once it runs again with them from the
// stored progress (or Disabled). m.mu is held.
func (m *Manager) replaceLocked(e *entry, rec Record) {
	wasEnabled := e.rec.Enabled
	e.rec = rec
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
	m.forget(id)
	m.log.Info("mapping deleted", "mapping", id)
}

// forget drops the deleted mapping id, and remembers that it was deleted (a catalog read from
// before the deletion may still list it).
func (m *Manager) forget(id string) {
	m.mu.Lock()
	delete(m.maps, id)
	m.deleted[id] = true
	m.mu.Unlock()
	if m.o.onDeleted != nil {
		m.o.onDeleted(id)
	}
}
