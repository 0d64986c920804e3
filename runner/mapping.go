package runner

import (
	"context"
	"log/slog"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// Mapping is one event source mapping as Run takes it: where its records come from, the function
// they go to, Lambda's settings, where its progress lives, and the hooks that watch it.
type Mapping struct {
	Source   Source
	Function Function
	// Config holds Lambda's settings of the mapping and the poller's runtime knobs.
	Config poller.Config
	Store  Store
	// UUID is the mapping's UUID (Lambda's EventSourceMappingUUID: the EMF dimension, the S3
	// destination's object keys). The caller that created the mapping (esm serve) gives it; when
	// empty it is read from the mapping's store (the state file or the lease table), where the
	// mapping's first run creates it: a random version 4 UUID, stable across restarts.
	UUID  string
	Hooks Hooks
}

// Source is the stream a mapping reads.
type Source struct {
	// Stream is a Kinesis stream's name or ARN, an enhanced fan-out consumer's ARN (then the
	// mapping reads through that consumer), or a DynamoDB table's stream ARN. Required.
	Stream string
	// Consumer, when set, is the enhanced fan-out consumer of a Kinesis Stream the mapping reads
	// through (SubscribeToShard): its ARN, or its name. It must be ACTIVE, or be waited for.
	Consumer string
	// RegisterConsumer registers Consumer (a name) when it does not exist, and waits until it is
	// ACTIVE.
	RegisterConsumer bool
	// found: Stream and Consumer are the ARNs Runner.Resolve found (Resolved.Source).
	found bool
}

// Function is the function a mapping invokes: an Invoker (an HTTP endpoint, execution
// environments, the Lambda API), or a Go handler run in this process.
type Function struct {
	// Invoker, when set, invokes the function.
	Invoker poller.Invoker
	// Handler, used when Invoker is nil, is a handler with one of aws-lambda-go's signatures,
	// invoked in this process (invoke/inprocess).
	Handler any
	// Name is the function's name, of which its ARN is made when ARN is empty (FunctionARN).
	// Default "example".
	Name string
	// ARN, when set, is the function's ARN: what it is invoked as (its InvokedFunctionArn), what
	// keys the mapping's checkpoints and what esm serve's API reports. Default: Name when it is an
	// ARN, else Name's ARN in the stream's partition, region and account (FunctionARN).
	ARN string
	// Timeout is the function's timeout. Default 3 s (invoke.DefaultTimeout). It bounds every
	// invocation (with 10 s more out of process): the lease table's takers of a dead worker's
	// shards, and the poller after an invocation whose answer was lost, wait for that bound. For
	// an Invoker that reaches Lambda (invoke/lambdaapi) give the function's own Timeout on Lambda
	// when it is longer (esm run and esm serve read it with GetFunctionConfiguration).
	Timeout time.Duration
	// Role is the execution role's ARN: a Kinesis event's invokeIdentityArn (default
	// arn:<partition>:iam::<stream account>:role/esm; a DynamoDB event has none).
	Role string
	// ReservedConcurrency, when set, caps the invocations of Handler at once (a template's
	// ReservedConcurrentExecutions; 0 throttles every one). An Invoker's own limit is its
	// opener's: one invoker may serve several mappings.
	ReservedConcurrency *int
}

// Store says where a mapping's progress lives: a state directory (the default), a DynamoDB lease
// table shared by several workers, or a store the caller opens.
type Store struct {
	// StateDir holds the checkpoint file. Default .esm.
	StateDir string
	// LeaseTable, when set, is the DynamoDB lease table through which this worker shares the
	// mapping's shards with the other workers of the table; progress then lives in the table and
	// StateDir is not used. One table per mapping.
	LeaseTable string
	// CreateLeaseTable creates LeaseTable when it does not exist (otherwise that is an error).
	CreateLeaseTable bool
	// WorkerID names this worker in the lease table; unique among its workers. Default
	// hostname-pid (DefaultWorkerID).
	WorkerID string
	// LeaseDuration is how long a lease lasts without renewal. Default 10 s (lease's default).
	LeaseDuration time.Duration
	// StatusAddr, when set, is the HOST:PORT where this worker serves its live page: published
	// in the lease table for the other workers' pages and esm status (lease.WithStatusAddr).
	StatusAddr string
	// Open, when set, opens the mapping's store instead (esm serve keeps each mapping's progress
	// under its UUID, so UUID is then required). A store that is a SharedStore (lease.Dynamo)
	// shares the mapping's shards with other workers: Run coordinates through it and renews its
	// leases until the poller stopped.
	Open func(ctx context.Context) (poller.Store, error)
}

// SharedStore is a mapping's progress shared with other workers through leases (lease.Dynamo):
// the poller coordinates with it, and Run renews its leases meanwhile.
type SharedStore interface {
	poller.Store
	poller.Coordinator
	Run(ctx context.Context) error
	ClaimInterval() time.Duration
}

// Hooks watch one mapping's run.
type Hooks struct {
	// Logger, when set, logs the mapping's run (default: the Runner's, WithLogger).
	Logger *slog.Logger
	// Observer, when set, receives the mapping's measurements (metrics).
	Observer poller.Observer
	// Tracer, when set, traces every invocation (see package tracing).
	Tracer poller.Tracer
	// BlockedAfter is how long a shard retries the same batch before it is reported blocked.
	// Default (zero) poller.DefaultBlockedAfter.
	BlockedAfter time.Duration
	// Ready, when set, is called once the mapping is running (store read, shards listed, first
	// leases claimed).
	Ready func()
	// Readiness, when set, follows the mapping's readiness: ready while it runs and its store
	// answers (see poller.Readiness).
	Readiness *poller.Readiness
	// OnUUID, when set, is told the mapping's UUID before the mapping starts (metrics created
	// before the store was opened take it from here).
	OnUUID func(string)
	// UntilCaughtUp, when set, ends the run once every shard is caught up
	// (poller.WithUntilCaughtUp): Run then returns nil.
	UntilCaughtUp *poller.UntilCaughtUp
	// Skips, when set, is where an operator's skips of blocked batches reach the mapping's
	// poller (poller.WithSkips).
	Skips *poller.Skips
	// Rewinds, when set, is where an operator's rewinds reach a mapping whose progress is in a
	// store of its own (no lease table): the runner applies them (localrewind.go).
	Rewinds *LocalRewinds
}

// pollerOptions are the options every poller of the mapping gets, whatever its store: logging,
// measurements and readiness (the on-failure destination, which needs the mapping's UUID, comes
// from destinationOptions once the store is open).
func (h Hooks) pollerOptions() []poller.Option {
	opts := []poller.Option{poller.WithLogger(h.Logger)}
	if h.Observer != nil {
		opts = append(opts, poller.WithObserver(h.Observer))
	}
	if h.Tracer != nil {
		opts = append(opts, poller.WithTracer(h.Tracer))
	}
	if h.BlockedAfter > 0 {
		opts = append(opts, poller.WithBlockedAfter(h.BlockedAfter))
	}
	if h.Ready != nil {
		opts = append(opts, poller.WithReady(h.Ready))
	}
	if h.Readiness != nil {
		opts = append(opts, poller.WithReadiness(h.Readiness))
	}
	if h.UntilCaughtUp != nil {
		opts = append(opts, poller.WithUntilCaughtUp(*h.UntilCaughtUp))
	}
	if h.Skips != nil {
		opts = append(opts, poller.WithSkips(h.Skips))
	}
	return opts
}
