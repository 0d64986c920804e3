package esmapi

import (
	"context"
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
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		id := r.Mapping.UUID
		seen[id] = true
		e, ok := m.maps[id]
		switch {
		case m.deleted[id]:
		case !ok && r.Deleting: // being deleted elsewhere: nothing runs here
		case !ok:
			e = &entry{rec: r, state: StateDisabled}
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
		// Gone from the catalog: deleted elsewhere. A mapping created here since the catalog
		// was read is not in what was read.
		if !seen[id] && e.rec.Created.Before(start) && e.state != StateDeleting {
			e.state = StateDeleting
			m.async(func() {
				m.stop(e)
				m.mu.Lock()
				delete(m.maps, id)
				m.deleted[id] = true
				m.mu.Unlock()
			})
			m.log.Info("mapping deleted by another worker", "mapping", id)
		}
	}
	return nil
}
