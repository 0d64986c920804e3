// Package logdedup rate-limits repeated identical log lines: a slog.Handler wrapper that lets the
// first record with a given level, message and error through, drops identical ones for a window,
// and then reports how many it dropped on the next one it lets through. A shard that retries a
// failing call every few seconds logs once per window instead of once per attempt.
package logdedup

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// DefaultWindow is how long identical records are suppressed.
const DefaultWindow = 30 * time.Second

// Handler wraps another slog.Handler. Only records at Warn and above are rate-limited; state
// changes at Info always pass.
type Handler struct {
	next   slog.Handler
	window time.Duration
	now    func() time.Time
	seen   *seenMap
}

type seenMap struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	last       time.Time
	suppressed int
}

// New wraps next; window <= 0 means DefaultWindow.
func New(next slog.Handler, window time.Duration) *Handler {
	if window <= 0 {
		window = DefaultWindow
	}
	return &Handler{next: next, window: window, now: time.Now, seen: &seenMap{m: map[string]*entry{}}}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	key := r.Level.String() + "\x00" + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" || a.Key == "error" || a.Key == "shard_id" {
			key += "\x00" + a.Key + "=" + a.Value.String()
		}
		return true
	})
	now := h.now()
	h.seen.mu.Lock()
	e := h.seen.m[key]
	if e != nil && now.Sub(e.last) < h.window {
		e.suppressed++
		h.seen.mu.Unlock()
		return nil
	}
	suppressed := 0
	if e == nil {
		if len(h.seen.m) > 10000 { // bound memory: forget everything old
			for k, v := range h.seen.m {
				if now.Sub(v.last) >= h.window {
					delete(h.seen.m, k)
				}
			}
		}
		e = &entry{}
		h.seen.m[key] = e
	}
	suppressed, e.suppressed, e.last = e.suppressed, 0, now
	h.seen.mu.Unlock()
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.String("repeated", fmt.Sprintf("%d times in the last %s", suppressed, h.window)))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler; the copies share the rate limit.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	return &c
}

// WithGroup implements slog.Handler; the copies share the rate limit.
func (h *Handler) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	return &c
}
