package poller

import (
	"context"
	"errors"
)

// ErrLeaseLost is returned (wrapped) by a Coordinator's Store.Save when this worker no longer
// holds the shard's lease: the write was fenced off. The shard's reader stops; it is not an error
// of the mapping.
var ErrLeaseLost = errors.New("lease lost")

var errLost = errors.New("lease lost: reader stopped")

// Coordinator shares a mapping's shards among several workers through leases (the lease package
// implements it on a DynamoDB table). Without one, a Poller reads every shard itself. The Store
// given to New must then be the coordinator's own: Load returns every worker's progress, and Save
// is fenced by the lease (ErrLeaseLost when this worker no longer holds it).
type Coordinator interface {
	// Register makes sure a lease exists for each shard, recording its parents and hash range and,
	// for a new lease, the shard's initial progress. Several workers may register the same
	// shards at once.
	Register(ctx context.Context, shards []ShardInfo) error
	// Claim is called every ClaimInterval with the shards that may be read now (parents finished)
	// or are being read here. It takes leases towards this worker's fair share and returns the
	// candidates this worker holds; a shard left out is to be stopped and released (a hand-over).
	// A shard returned that may not be read now (it was no candidate: a parent is not finished,
	// or it is finished) is not read until it may.
	Claim(ctx context.Context, candidates []string) (held []string, err error)
	// Held reports whether this worker still safely holds the shard's lease. Readers ask before
	// every read and invocation and stop when it says no: a worker that may have lost a lease
	// stops before the lease can be taken by anyone else.
	Held(shardID string) bool
	// Release gives up the lease of a shard whose reader stopped after its last checkpoint, so
	// that another worker takes it at once. Releasing a lease no longer held does nothing.
	Release(ctx context.Context, shardID string) error
}

// Stopper is implemented by a Coordinator that is told when the mapping stops (its Run's
// context ended, or a reader failed for good): the poller calls Stopping once, before it
// releases the first lease of the stop. Readers released before it stopped for other reasons
// (a lost lease, a trimmed shard, a hand-over).
type Stopper interface {
	Stopping(ctx context.Context)
}

// Abandoner is implemented by a Coordinator that can keep a lease whose reader stopped with an
// invocation cut off by the end of the shutdown grace (ShutdownGrace shorter than the function
// timeout): such an invocation, sent to Lambda or an HTTP endpoint, may still run, so the lease
// must not go to a next owner at once. The poller then calls Abandon instead of Release.
type Abandoner interface {
	Abandon(shardID string)
}

// ShardInfo describes a shard for Coordinator.Register.
type ShardInfo struct {
	ShardID                        string
	Parents                        []string
	StartingHashKey, EndingHashKey string
	// Initial is the progress a new lease starts with (its Start, or Finished for a closed shard
	// under LATEST); zero for shards found later, which start at their first record.
	Initial ShardProgress
}

// WithCoordinator shares the mapping's shards with other workers through c. The store given to
// New must be c's.
func WithCoordinator(c Coordinator) Option { return func(p *Poller) { p.coord = c } }

// held reports whether the reader may go on reading and invoking.
func (r *reader) held() bool { return r.p.coord == nil || r.p.coord.Held(r.shardID) }

// InvocationGate is implemented by a Coordinator that must know of every invocation before it is
// sent and after it returned: the lease package publishes how long this worker's invocations may
// still run, so that a dead worker's shards wait for exactly that. The poller then asks it
// instead of Held before each invocation.
type InvocationGate interface {
	// GateInvocations is called once by the poller before it invokes anything: from then on it
	// sends no invocation StartInvocation did not admit. A gate that is never told so (a
	// wrapper of the coordinator that does not pass it on) must assume invocations it does not
	// see.
	GateInvocations()
	// StartInvocation reports whether an invocation of the shard may be sent now; it may first
	// publish something and wait for it. The ticket is asked again just before the send
	// (Recheck), and told with End whether the invocation has surely ended (a response came,
	// or it was never sent) or may run on (an ambiguous failure, a call cut off).
	StartInvocation(ctx context.Context, shardID string) (InvocationTicket, bool)
}

// InvocationTicket is one invocation admitted by an InvocationGate.
type InvocationTicket interface {
	Recheck() bool
	End(ended bool)
}
