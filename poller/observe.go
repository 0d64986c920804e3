package poller

import (
	"time"
)

// Shard states reported to an Observer.
const (
	StatePending  = "pending"  // waiting for its parents to finish
	StateReading  = "reading"  // being read by this worker
	StateFinished = "finished" // read to its end and handled
	StateReleased = "released" // stopped here: another worker may read it
)

// Observer receives the mapping's measurements, named as Lambda names its event source mapping
// metrics. Every method must be cheap and safe for concurrent use. All are optional: embed
// NopObserver to implement only some.
type Observer interface {
	// RecordsPolled: records read from the shard (PolledEventCount).
	RecordsPolled(shardID string, n int)
	// RecordsFilteredOut: records FilterCriteria dropped (FilteredOutEventCount).
	RecordsFilteredOut(shardID string, n int)
	// BatchInvoked: one invocation that reached the function, with its records
	// (InvokedEventCount), whether it failed (FailedInvokeEventCount, partial failures included)
	// and how long it took.
	BatchInvoked(shardID string, records int, d time.Duration, failed bool)
	// RecordsDropped: records discarded without reaching an on-failure destination
	// (DroppedEventCount).
	RecordsDropped(shardID string, n int)
	// RecordsDelivered: records whose failure record reached the on-failure destination
	// (OnFailureDestinationDeliveredEventCount).
	RecordsDelivered(shardID string, n int)
	// FunctionError: an invocation that reached the function failed with a function error (an
	// error returned, a panic, a timeout): Lambda's Errors. Partial and invalid batch responses
	// are not function errors.
	FunctionError(shardID string)
	// Throttled: an invoke request refused as throttled; it reached no function and is retried
	// without counting: Lambda's Throttles.
	Throttled(shardID string)
	// DestinationDeliveryFailed: a send to the on-failure destination failed:
	// Lambda's DestinationDeliveryFailures.
	DestinationDeliveryFailed(shardID string)
	// IteratorAge: how far the shard's reading is behind the stream's tip, told whenever it
	// changed: at each GetRecords answer and subscription event (its MillisBehindLatest, 0
	// once caught up), at each batch sent (the age of its last record, Lambda's IteratorAge),
	// and every second while batches are in flight (the age of the oldest one's last record,
	// growing while an invocation hangs or a batch is retried). See signals.go.
	IteratorAge(shardID string, age time.Duration)
	// ShardState: a shard changed state (StatePending, StateReading, StateFinished, StateReleased).
	ShardState(shardID, state string)
	// ShardBlocked: the shard has been on the same batch (retrying it, or waiting for one
	// invocation) for longer than WithBlockedAfter allows (blocked), told at the instant it
	// passes the threshold, or no longer is (the batch went through, was discarded, or the shard
	// stopped being read here). esm's own signal; Lambda has none.
	ShardBlocked(shardID string, blocked bool)
	// BatchItemFailuresIgnored: the function returned a non-empty batchItemFailures while the
	// mapping lacks ReportBatchItemFailures, so the response was ignored, as Lambda ignores it,
	// and the batch counted as handled. esm's own signal; Lambda has none.
	BatchItemFailuresIgnored(shardID string)
}

// DetailObserver is an Observer that also wants what a live view of the mapping shows: the
// shard graph, the checkpoints and the batches being retried. The poller finds it by a type
// assertion on the Observer given to WithObserver. Its methods must be cheap and safe for
// concurrent use.
type DetailObserver interface {
	// ShardLineage: the shard and its parents (none, one, or two for a merge), as a listing or a
	// parent's ChildShards told them; told again at every listing.
	ShardLineage(shardID string, parents []string)
	// Checkpointed: the shard's checkpoint moved to sequenceNumber.
	Checkpointed(shardID, sequenceNumber string)
	// BatchFailing: a batch of the shard failed (at each failure), or was judged blocked (also
	// while its first invocation hangs); it is retried, or given up on (discarded) next.
	// BatchFailing(shardID, BatchFailure{}) once no batch of the shard is failing.
	BatchFailing(shardID string, f BatchFailure)
}

// BatchFailure is a shard's failing batch, as a DetailObserver is told it. The zero value: none.
type BatchFailure struct {
	First, Last string    // the batch's first and last sequence numbers
	Cause       string    // the last failure ("function error: …"), or that an invocation has not returned
	FailedAt    time.Time // the last failure's time (the poller's clock); zero while none
	// Since is when the batch was first sent (a failure record, first offered to the
	// destination): the shard has been on it since. The halves of a bisected batch keep its.
	Since    time.Time
	Attempts int  // failed attempts: invocations that failed or did not reach the function, failed deliveries
	Blocked  bool // the shard was reported blocked on it (Observer.ShardBlocked)
}

// NopObserver ignores everything; embed it to implement part of Observer.
type NopObserver struct{}

func (NopObserver) RecordsPolled(string, int)                     {}
func (NopObserver) RecordsFilteredOut(string, int)                {}
func (NopObserver) BatchInvoked(string, int, time.Duration, bool) {}
func (NopObserver) RecordsDropped(string, int)                    {}
func (NopObserver) RecordsDelivered(string, int)                  {}
func (NopObserver) FunctionError(string)                          {}
func (NopObserver) Throttled(string)                              {}
func (NopObserver) DestinationDeliveryFailed(string)              {}
func (NopObserver) IteratorAge(string, time.Duration)             {}
func (NopObserver) ShardState(string, string)                     {}
func (NopObserver) ShardBlocked(string, bool)                     {}
func (NopObserver) BatchItemFailuresIgnored(string)               {}

// WithObserver sends the mapping's measurements to o (and its details, when o is also a
// DetailObserver).
func WithObserver(o Observer) Option {
	return func(p *Poller) {
		p.obs = o
		p.detail, _ = o.(DetailObserver)
	}
}

// How a shard is read, for SubscriptionObserver.ShardReadBy.
const (
	ReadByPolling      = "polling"      // GetRecords
	ReadBySubscription = "subscription" // SubscribeToShard, through an enhanced fan-out consumer
)

// SubscriptionObserver is what an Observer may also implement to see how shards are read and
// their enhanced fan-out subscriptions; the poller finds it by type assertion. Every method must
// be cheap and safe for concurrent use.
type SubscriptionObserver interface {
	// ShardReadBy: the shard is read by ReadByPolling or ReadBySubscription from now on.
	ShardReadBy(shardID, mode string)
	// Subscribed: a SubscribeToShard call for the shard succeeded at at; renewal is false for
	// the first subscription after the reader (re)opened the shard, true for a renewal (the
	// lifetime, a drop).
	Subscribed(shardID string, at time.Time, renewal bool)
	// SubscriptionInUse: a SubscribeToShard call was refused with ResourceInUseException.
	SubscriptionInUse(shardID string)
	// SubscriptionEvent: an event of the shard's subscription arrived at at.
	SubscriptionEvent(shardID string, at time.Time)
}

// subscriptionObserver is the mapping's SubscriptionObserver, or one that ignores everything.
func (p *Poller) subscriptionObserver() SubscriptionObserver {
	if so, ok := p.obs.(SubscriptionObserver); ok {
		return so
	}
	return nopSubscriptionObserver{}
}

type nopSubscriptionObserver struct{}

func (nopSubscriptionObserver) ShardReadBy(string, string)          {}
func (nopSubscriptionObserver) Subscribed(string, time.Time, bool)  {}
func (nopSubscriptionObserver) SubscriptionInUse(string)            {}
func (nopSubscriptionObserver) SubscriptionEvent(string, time.Time) {}
