package metrics

import (
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// Tee returns an observer that passes every measurement to each of obs, in order (and the
// details of a poller.DetailObserver to those of obs that are one). Nil observers
// are skipped; with none left it returns poller.NopObserver, with one it returns that one. The
// result is as safe for concurrent use as obs are, and each call costs the sum of theirs.
func Tee(obs ...poller.Observer) poller.Observer {
	t := make(tee, 0, len(obs))
	for _, o := range obs {
		if o != nil {
			t = append(t, o)
		}
	}
	switch len(t) {
	case 0:
		return poller.NopObserver{}
	case 1:
		return t[0]
	}
	return t
}

type tee []poller.Observer

func (t tee) RecordsPolled(shardID string, n int) {
	for _, o := range t {
		o.RecordsPolled(shardID, n)
	}
}

func (t tee) RecordsFilteredOut(shardID string, n int) {
	for _, o := range t {
		o.RecordsFilteredOut(shardID, n)
	}
}

func (t tee) BatchInvoked(shardID string, records int, d time.Duration, failed bool) {
	for _, o := range t {
		o.BatchInvoked(shardID, records, d, failed)
	}
}

func (t tee) RecordsDropped(shardID string, n int) {
	for _, o := range t {
		o.RecordsDropped(shardID, n)
	}
}

func (t tee) RecordsDelivered(shardID string, n int) {
	for _, o := range t {
		o.RecordsDelivered(shardID, n)
	}
}

func (t tee) IteratorAge(shardID string, age time.Duration) {
	for _, o := range t {
		o.IteratorAge(shardID, age)
	}
}

func (t tee) ShardState(shardID, state string) {
	for _, o := range t {
		o.ShardState(shardID, state)
	}
}

func (t tee) FunctionError(shardID string) {
	for _, o := range t {
		o.FunctionError(shardID)
	}
}

func (t tee) Throttled(shardID string) {
	for _, o := range t {
		o.Throttled(shardID)
	}
}

func (t tee) DestinationDeliveryFailed(shardID string) {
	for _, o := range t {
		o.DestinationDeliveryFailed(shardID)
	}
}

var _ poller.SubscriptionObserver = tee(nil)

func (t tee) ShardReadBy(shardID, mode string) {
	for _, o := range t {
		if so, ok := o.(poller.SubscriptionObserver); ok {
			so.ShardReadBy(shardID, mode)
		}
	}
}

func (t tee) Subscribed(shardID string, at time.Time, renewal bool) {
	for _, o := range t {
		if so, ok := o.(poller.SubscriptionObserver); ok {
			so.Subscribed(shardID, at, renewal)
		}
	}
}

func (t tee) SubscriptionInUse(shardID string) {
	for _, o := range t {
		if so, ok := o.(poller.SubscriptionObserver); ok {
			so.SubscriptionInUse(shardID)
		}
	}
}

func (t tee) SubscriptionEvent(shardID string, at time.Time) {
	for _, o := range t {
		if so, ok := o.(poller.SubscriptionObserver); ok {
			so.SubscriptionEvent(shardID, at)
		}
	}
}

func (t tee) ShardBlocked(shardID string, blocked bool) {
	for _, o := range t {
		o.ShardBlocked(shardID, blocked)
	}
}

func (t tee) BatchItemFailuresIgnored(shardID string) {
	for _, o := range t {
		o.BatchItemFailuresIgnored(shardID)
	}
}

func (t tee) ShardLineage(shardID string, parents []string) {
	for _, o := range t {
		if d, ok := o.(poller.DetailObserver); ok {
			d.ShardLineage(shardID, parents)
		}
	}
}

func (t tee) Checkpointed(shardID, sequenceNumber string) {
	for _, o := range t {
		if d, ok := o.(poller.DetailObserver); ok {
			d.Checkpointed(shardID, sequenceNumber)
		}
	}
}

func (t tee) BatchFailing(shardID string, f poller.BatchFailure) {
	for _, o := range t {
		if d, ok := o.(poller.DetailObserver); ok {
			d.BatchFailing(shardID, f)
		}
	}
}

var _ poller.SkipObserver = tee(nil)

func (t tee) SkipPending(shardID, first, last string, pending bool) {
	for _, o := range t {
		if so, ok := o.(poller.SkipObserver); ok {
			so.SkipPending(shardID, first, last, pending)
		}
	}
}

func (t tee) BatchSkipped(shardID string, s poller.Skipped) {
	for _, o := range t {
		if so, ok := o.(poller.SkipObserver); ok {
			so.BatchSkipped(shardID, s)
		}
	}
}

var _ poller.RewindObserver = tee(nil)

func (t tee) RewindSeen(n poller.RewindNotice) {
	for _, o := range t {
		if ro, ok := o.(poller.RewindObserver); ok {
			ro.RewindSeen(n)
		}
	}
}

func (t tee) RewindEnded(n poller.RewindNotice) {
	for _, o := range t {
		if ro, ok := o.(poller.RewindObserver); ok {
			ro.RewindEnded(n)
		}
	}
}
