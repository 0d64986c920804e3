package prom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kinesis-esm/esm/poller"
)

// DefaultFinishedGrace is how long a finished shard's series stay (see WithFinishedGrace).
const DefaultFinishedGrace = 5 * time.Minute

// Option configures New and NewMapping.
type Option func(*Observer)

// WithFinishedGrace sets how long the series of a shard read to its end (state finished) stay
// before they are removed: long enough for scrapes to see its last counts and its finished state,
// so that a stream resharded often does not grow the series without end. Default
// DefaultFinishedGrace; zero or negative keeps it.
func WithFinishedGrace(d time.Duration) Option {
	return func(p *Observer) {
		if d > 0 {
			p.grace = d
		}
	}
}

// finishedLocked schedules the removal of a shard that just finished, or cancels it when the
// shard left that state; sm.mu is held.
func (p *Observer) finishedLocked(shardID string, sm *shardMetrics) {
	if sm.forget != nil {
		sm.forget.Stop()
		sm.forget = nil
	}
	if sm.state == poller.StateFinished {
		sm.forget = time.AfterFunc(p.grace, func() { p.forget(shardID, sm) })
	}
}

// forget removes the shard's series, if it is still finished: every series with its shard label.
func (p *Observer) forget(shardID string, sm *shardMetrics) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.state != poller.StateFinished || !p.shards.CompareAndDelete(shardID, sm) {
		return
	}
	shard := prometheus.Labels{LabelShard: shardID}
	for _, v := range []*prometheus.MetricVec{p.polled.MetricVec, p.filtered.MetricVec, p.invoked.MetricVec, p.failed.MetricVec,
		p.dropped.MetricVec, p.delivered.MetricVec, p.subRenewals.MetricVec, p.subInUse.MetricVec} {
		v.DeletePartialMatch(shard)
	}
	for _, v := range []*prometheus.MetricVec{p.iteratorAge.MetricVec, p.state.MetricVec, p.owned.MetricVec, p.blocked.MetricVec,
		p.readBy.MetricVec, p.subStarted.MetricVec, p.subLastEvent.MetricVec} {
		v.DeletePartialMatch(shard)
	}
}
