package esmapi

import (
	"context"
	"log/slog"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// Progress keeps each mapping's progress, keyed by the mapping's UUID.
type Progress interface {
	// Store returns the store of the mapping's progress; it is asked each time the mapping's
	// poller starts. A store that is a SharedProgress (lease.Dynamo) also shares the mapping's
	// shards with other workers.
	Store(ctx context.Context, uuid string) (poller.Store, error)
	// Delete removes a deleted mapping's progress.
	Delete(ctx context.Context, uuid string) error
}

// ProgressFuncs is a Progress made of two functions, as http.HandlerFunc makes a Handler of one.
type ProgressFuncs struct {
	StoreFunc  func(ctx context.Context, uuid string) (poller.Store, error)
	DeleteFunc func(ctx context.Context, uuid string) error
}

// Store implements Progress.
func (p ProgressFuncs) Store(ctx context.Context, uuid string) (poller.Store, error) {
	return p.StoreFunc(ctx, uuid)
}

// Delete implements Progress.
func (p ProgressFuncs) Delete(ctx context.Context, uuid string) error { return p.DeleteFunc(ctx, uuid) }

// Option configures Open. A nil Option is ignored.
type Option func(*options)

type options struct {
	functions      []Function
	base           poller.Config
	logger         *slog.Logger
	deleteDelay    time.Duration
	syncInterval   time.Duration
	restartBackoff time.Duration
	observe        func(EventSourceMapping) poller.Observer
	onDeleted      func(uuid string)
	trace          func(EventSourceMapping) poller.Tracer
	results        Results
	blockedAfter   time.Duration
	rewind         RewindFunc
	tableSkip      SkipFunc // WithTableSkips
}

// WithFunctions registers functions that mappings may invoke, known by their names (repeatable;
// default none).
func WithFunctions(fns ...Function) Option {
	return func(o *options) { o.functions = append(o.functions, fns...) }
}

// WithBase sets what every poller gets besides the mapping's own settings: the polling cadence
// and the shutdown grace (default: poller's defaults).
func WithBase(cfg poller.Config) Option { return func(o *options) { o.base = cfg } }

// WithLogger sets the logger (default, or nil: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithDeleteDelay sets how long a deletion waits, once this worker stopped the mapping, before
// it removes the mapping's progress: with a catalog shared by several workers, the time the
// others need to see the deletion and stop (two sync intervals and a ShutdownGrace). Default 0.
func WithDeleteDelay(d time.Duration) Option { return func(o *options) { o.deleteDelay = d } }

// WithSyncInterval sets, when positive, how often a catalog shared with other workers
// (DynamoCatalog) is read again to apply what they changed (see Sync). Default 0: the catalog is
// this process's alone.
func WithSyncInterval(d time.Duration) Option { return func(o *options) { o.syncInterval = d } }

// WithRestartBackoff sets the first pause before a failed poller is started again; it doubles up
// to 30 s (default 1 s; zero or negative keeps it).
func WithRestartBackoff(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.restartBackoff = d
		}
	}
}

// WithObserver gives each mapping's poller an observer of its own besides the manager's (which
// keeps LastProcessingResult): observe is called each time a mapping's poller starts, with the
// mapping as the API shows it, and may return nil for none. Default: none.
func WithObserver(observe func(EventSourceMapping) poller.Observer) Option {
	return func(o *options) { o.observe = observe }
}

// WithOnDeleted calls deleted with a mapping's UUID once the mapping is deleted and stopped here
// (deleted through this worker or, with a shared catalog, another): what WithObserver made for it
// can go. Default: none.
func WithOnDeleted(deleted func(uuid string)) Option {
	return func(o *options) { o.onDeleted = deleted }
}

// WithTracer traces each mapping's invocations: trace is called each time a mapping's poller
// starts, with the mapping as the API shows it, and may return nil for none. Default: none.
func WithTracer(trace func(EventSourceMapping) poller.Tracer) Option {
	return func(o *options) { o.trace = trace }
}

// WithBlockedAfter sets how long a shard of any mapping may be on the same batch before it is
// reported blocked (poller.WithBlockedAfter; default, or zero: poller.DefaultBlockedAfter).
func WithBlockedAfter(d time.Duration) Option { return func(o *options) { o.blockedAfter = d } }

// WithResults keeps each mapping's LastProcessingResult in r across restarts (default: none,
// every mapping starts with "No records processed").
func WithResults(r Results) Option { return func(o *options) { o.results = r } }
