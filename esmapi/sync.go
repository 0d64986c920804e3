package esmapi

import (
	"context"
	"errors"
	"time"
)

// syncLoop applies the changes other workers make to a shared catalog, every SyncInterval, until
// Close.
func (m *Manager) syncLoop() {
	t := time.NewTicker(m.o.syncInterval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			if err := m.Sync(m.ctx); err != nil && m.ctx.Err() == nil {
				m.log.Warn("read the shared mappings", "error", err)
			}
		}
	}
}

// Sync reads the catalog and applies here what other workers changed: a mapping created there
// starts here, one updated there (a higher Revision) is restarted with its new settings, one
// deleted there stops. Changes in progress here are left alone; the catalog is the truth for the
// rest.
func (m *Manager) Sync(ctx context.Context) error {
	start := time.Now()
	recs, err := m.catalog.Load(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applyLocked(recs, start)
	return nil
}

// applyLocked applies the catalog's records, read from start on, unless a read that began later
// was applied already (a conflicting write's): a mapping missing from them is then gone only
// from the older read. m.mu is held.
func (m *Manager) applyLocked(recs []Record, start time.Time) {
	if start.Before(m.applied) {
		return
	}
	m.applied = start
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		id := r.Mapping.UUID
		seen[id] = true
		e, ok := m.maps[id]
		switch {
		case m.deleted[id]:
		case !ok && r.Deleting: // being deleted elsewhere: nothing runs here
		case !ok:
			e = &entry{rec: r, known: start, state: StateDisabled}
			e.result.Store(new(ResultNone))
			m.maps[id] = e
			if r.Enabled {
				e.state = StateCreating
				m.startLocked(e)
			}
			m.log.Info("mapping created by another worker", "mapping", id)
		case r.Revision <= e.rec.Revision || transitional(e.state):
		case r.Deleting:
			e.rec, e.state = r, StateDeleting
			m.async(func() { m.finishDelete(e) })
			m.log.Info("mapping deleted by another worker", "mapping", id)
		default:
			m.replaceLocked(e, r)
			m.log.Info("mapping updated by another worker", "mapping", id, "state", e.state)
		}
	}
	for id, e := range m.maps {
		// Gone from the catalog: deleted elsewhere. A mapping written here since the catalog
		// began to be read may not be in what was read.
		if !seen[id] && e.known.Before(start) && e.state != StateDeleting {
			e.state = StateDeleting
			m.async(func() {
				m.stop(e)
				// The worker that deleted it dropped its progress before its record; a poller
				// of this worker that restarted meanwhile may have made it again.
				if err := m.progress.Delete(m.ctx, id); err != nil && m.ctx.Err() == nil {
					m.log.Warn("delete the progress of a mapping deleted by another worker", "mapping", id, "error", err)
				}
				m.forget(id)
			})
			m.log.Info("mapping deleted by another worker", "mapping", id)
		}
	}
}

// lostLocked answers a write of the mapping id that the catalog refused (err): when another
// worker changed or deleted the mapping first (ErrConflict), the catalog is read again and
// applied here, and the answer is Lambda's to a conflicting change: ResourceInUseException with
// the state the mapping is now in here (Updating, Deleting, …), or ResourceConflictException
// when it is not changing (the catalog could not be read). m.mu is held.
func (m *Manager) lostLocked(ctx context.Context, id string, err error) *APIError {
	if !errors.Is(err, ErrConflict) {
		return &APIError{Status: 500, Type: ServiceError, Message: oneLine(err)}
	}
	m.log.Info("mapping changed by another worker meanwhile; the request is refused", "mapping", id, "error", err)
	m.reloadLocked(ctx)
	if e, ok := m.maps[id]; ok && transitional(e.state) {
		return inUse(id, e.state)
	}
	return changedElsewhere(id)
}

// reloadLocked reads the catalog again and applies it here, after the catalog refused a write
// made from what this worker knew; a failure is logged (the next sync tries again). m.mu is
// held.
func (m *Manager) reloadLocked(ctx context.Context) {
	start := time.Now()
	recs, err := m.catalog.Load(ctx)
	if err != nil {
		m.log.Warn("read the shared mappings", "error", err)
		return
	}
	m.applyLocked(recs, start)
}
