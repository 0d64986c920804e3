package prom

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/poller"
)

// Names of the metrics esm adds to Lambda's (metrics.Name* are Lambda's).
const (
	NameInvocationDuration = "esm_invocation_duration_seconds"
	NameBatchSize          = "esm_batch_size"
	NameShardState         = "esm_shard_state"
	NameShardOwned         = "esm_shard_owned"
	NameShardBlocked       = "esm_shard_blocked"
	// NameMappingIteratorAge is the mapping's IteratorAge as Lambda publishes it: one number, the
	// largest over the shards read here.
	NameMappingIteratorAge       = "esm_mapping_iterator_age_milliseconds"
	NameBatchItemFailuresIgnored = "esm_batch_item_failures_ignored_total"
	// Operator tools (esm skip).
	NameBatchesSkipped = "esm_batches_skipped_total"
	NameRecordsSkipped = "esm_records_skipped_total"
	// Operator tools (esm rewind, on a lease table).
	NameRewinds          = "esm_rewinds_total"
	NameRewindInProgress = "esm_rewind_in_progress"
	// Enhanced fan-out, per shard.
	NameShardReadBy           = "esm_shard_read_by"
	NameSubscriptionStarted   = "esm_subscription_started_timestamp_seconds"
	NameSubscriptionRenewals  = "esm_subscription_renewals_total"
	NameSubscriptionInUse     = "esm_subscription_in_use_total"
	NameSubscriptionLastEvent = "esm_subscription_last_event_timestamp_seconds"
)

// Label names.
const (
	LabelUUID     = "uuid" // esm serve's mappings only
	LabelFunction = "function"
	LabelStream   = "stream"
	LabelShard    = "shard"
	LabelState    = "state"
	LabelMode     = "mode"
	LabelOutcome  = "outcome" // esm_rewinds_total: applied or refused
)

// shardStates are the states esm_shard_state exposes for every shard from its first state on.
var shardStates = []string{poller.StatePending, poller.StateReading, poller.StateFinished, poller.StateReleased}

var (
	// durationBuckets span a few milliseconds to Lambda's longest timeout (900 s).
	durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900}
	// batchSizeBuckets span one record to the largest BatchSize (10000).
	batchSizeBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}
)

// Observer is a poller.Observer that keeps the mapping's measurements as Prometheus metrics.
// Its methods are safe for concurrent use and cost a few atomic operations each once a shard
// has been seen (the first call for a shard creates its series).
type Observer struct {
	polled, filtered, invoked, failed, dropped, delivered *prometheus.CounterVec // by shard
	iteratorAge                                           *prometheus.GaugeVec   // by shard
	state                                                 *prometheus.GaugeVec   // by shard, state
	owned                                                 *prometheus.GaugeVec   // by shard
	blocked                                               *prometheus.GaugeVec   // by shard
	readBy                                                *prometheus.GaugeVec   // by shard, mode
	subStarted, subLastEvent                              *prometheus.GaugeVec   // by shard
	subRenewals, subInUse                                 *prometheus.CounterVec // by shard
	duration, batchSize                                   prometheus.Observer
	invocations, errors, throttles, destinationFailures   prometheus.Counter     // by function and stream, as Lambda's
	ignoredItemFailures                                   prometheus.Counter     // by function and stream
	batchesSkipped, recordsSkipped                        prometheus.Counter     // by function and stream
	rewinds                                               *prometheus.CounterVec // by outcome
	rewindInProgress                                      prometheus.Gauge       // by function and stream

	labels []string      // the mapping's label values, in the registry's order (mappingAges)
	grace  time.Duration // how long a finished shard's series stay (finished.go)

	shards sync.Map // shard ID → *shardMetrics
}

var (
	_ poller.Observer             = (*Observer)(nil)
	_ poller.SubscriptionObserver = (*Observer)(nil)
)

// shardMetrics are one shard's series, resolved once.
type shardMetrics struct {
	polled, filtered, invoked, failed, dropped, delivered prometheus.Counter

	age atomic.Pointer[gaugeRef] // nil while the shard has no IteratorAge series

	mu      sync.Mutex // guards state, owned, blocked and forget, and the creation of age
	state   string     // "" before the first ShardState
	owned   prometheus.Gauge
	blocked prometheus.Gauge
	forget  *time.Timer // while finished: the removal of its series (finished.go)
}

// gaugeRef is a shard's IteratorAge series and its value (float64 bits), which the mapping's
// IteratorAge reads at each scrape.
type gaugeRef struct {
	g  prometheus.Gauge
	ms atomic.Uint64
}

// New returns an observer whose metrics carry the labels function and stream, and
// registers them with reg (none when reg is nil). Several observers (one per mapping) may share
// a registry: the second and later ones reuse the metrics the first registered, with their own
// function and stream labels. Like prometheus.MustRegister, it panics when reg holds a
// different metric of the same name (a programming error, not a run-time condition).
func New(reg prometheus.Registerer, function, stream string, opts ...Option) *Observer {
	return newObserver(reg, []string{LabelFunction, LabelStream}, prometheus.Labels{LabelFunction: function, LabelStream: stream}, opts)
}

// NewMapping is New for one of the mappings of an esm serve: its series also carry the label
// uuid, the mapping's UUID. Every observer of a registry must come from New, or every one from
// NewMapping. Calling it again for a mapping (a restarted poller) continues its series.
func NewMapping(reg prometheus.Registerer, uuid, function, stream string, opts ...Option) *Observer {
	return newObserver(reg, []string{LabelUUID, LabelFunction, LabelStream},
		prometheus.Labels{LabelUUID: uuid, LabelFunction: function, LabelStream: stream}, opts)
}

// The help texts' prefixes. The six event counts are Lambda's opt-in event source mapping metrics
// (MetricsConfig EventCount); esm always exposes them here, and honours MetricsConfig in EMF.
const (
	optIn  = "Lambda ESM metric, opt-in in Lambda (MetricsConfig: {Metrics: [EventCount]}); always exposed here: "
	always = "Lambda function metric, always on in Lambda: "
)

// newObserver registers the metrics with the mapping's labels (names, in order) and curries them
// with their values.
func newObserver(reg prometheus.Registerer, names []string, curry prometheus.Labels, opts []Option) *Observer {
	perShard := append(slices.Clip(names), LabelShard)
	counter := func(name, help string) *prometheus.CounterVec {
		return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, perShard))
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
	}
	histogram := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets},
			names))
	}
	perFunction := func(name, help string) *prometheus.CounterVec {
		return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, names))
	}
	o := &Observer{
		labels: labelValues(names, curry),
		grace:  DefaultFinishedGrace,
		polled: counter(metrics.NamePolledEventCount,
			optIn+"records read successfully from the shard (an empty poll adds 0).").MustCurryWith(curry),
		filtered: counter(metrics.NameFilteredOutEventCount,
			optIn+"records removed by FilterCriteria; they never reach the function.").MustCurryWith(curry),
		invoked: counter(metrics.NameInvokedEventCount,
			optIn+"records in invocations that reached the function; a retried batch counts again.").MustCurryWith(curry),
		failed: counter(metrics.NameFailedInvokeEventCount,
			optIn+"records in invocations that failed, including those that returned a non-empty batchItemFailures.").MustCurryWith(curry),
		dropped: counter(metrics.NameDroppedEventCount,
			optIn+"records discarded after MaximumRecordAgeInSeconds or MaximumRetryAttempts without reaching an on-failure destination.").MustCurryWith(curry),
		delivered: counter(metrics.NameOnFailureDestinationDeliveredEventCount,
			optIn+"records whose failure record reached the on-failure destination.").MustCurryWith(curry),
		iteratorAge: gauge(metrics.NameIteratorAge,
			"Lambda IteratorAge in milliseconds: how far the shard's reading is behind the stream's tip (each GetRecords answer's or subscription event's MillisBehindLatest, 0 once caught up; the age of the last record of each batch sent, growing while a batch is in flight). Absent for shards this worker does not read.",
			perShard...).MustCurryWith(curry),
		state: gauge(NameShardState,
			"1 for the shard's current state (pending, reading, finished, released), 0 for the others.",
			append(slices.Clip(perShard), LabelState)...).MustCurryWith(curry),
		owned: gauge(NameShardOwned,
			"1 while this worker holds the shard's lease and reads it (state reading), else 0.",
			perShard...).MustCurryWith(curry),
		readBy: gauge(NameShardReadBy,
			"1 for how the shard is read (mode polling: GetRecords; subscription: SubscribeToShard through an enhanced fan-out consumer), 0 for the other.",
			append(slices.Clip(perShard), LabelMode)...).MustCurryWith(curry),
		subStarted: gauge(NameSubscriptionStarted,
			"Unix time the shard's current SubscribeToShard subscription started (its age is now minus this).", perShard...).MustCurryWith(curry),
		subLastEvent: gauge(NameSubscriptionLastEvent,
			"Unix time the last event of the shard's subscription arrived.", perShard...).MustCurryWith(curry),
		subRenewals: counter(NameSubscriptionRenewals,
			"Subscriptions of the shard renewed: before Kinesis' 5-minute lifetime, or after one ended or dropped.").MustCurryWith(curry),
		subInUse: counter(NameSubscriptionInUse,
			"SubscribeToShard calls for the shard refused with ResourceInUseException (another subscription within 5 s).").MustCurryWith(curry),
		duration: histogram(NameInvocationDuration,
			"Duration of each invocation that reached the function, as esm saw it, in seconds (Lambda's Duration, which is in milliseconds); its count is Lambda's Invocations.",
			durationBuckets).With(curry),
		invocations: perFunction(metrics.NameInvocations,
			always+"invocations that reached the function, whatever their outcome.").With(curry),
		errors: perFunction(metrics.NameErrors,
			always+"invocations that failed with a function error (an error returned, a panic, a timeout); partial and invalid batch responses are not errors.").With(curry),
		throttles: perFunction(metrics.NameThrottles,
			always+"invoke requests refused as throttled; they reach no function and are retried without counting.").With(curry),
		destinationFailures: perFunction(metrics.NameDestinationDeliveryFailures,
			always+"sends to the on-failure destination that failed (each attempt; --on-destination-failure block retries, drop drops the records).").With(curry),
		batchSize: histogram(NameBatchSize,
			"Records per invocation.", batchSizeBuckets).With(curry),
		blocked: gauge(NameShardBlocked,
			"1 while the shard has been on the same batch (retrying it, or waiting for one invocation) for longer than --blocked-after (the log says why), else 0.",
			perShard...).MustCurryWith(curry),
		ignoredItemFailures: perFunction(NameBatchItemFailuresIgnored,
			"Responses that listed batchItemFailures while the mapping lacks FunctionResponseTypes ReportBatchItemFailures: ignored, as Lambda ignores them, and the batch counted as handled.").With(curry),
	}
	o.operatorMetrics(reg, names, curry, perFunction, gauge)
	for _, opt := range opts {
		opt(o)
	}
	register(reg, newMappingAges(names)).add(o)
	return o
}

// operatorMetrics adds the operator tools' metrics (esm skip, esm rewind) to o.
func (o *Observer) operatorMetrics(reg prometheus.Registerer, names []string, curry prometheus.Labels,
	perFunction func(name, help string) *prometheus.CounterVec, gauge func(name, help string, labels ...string) *prometheus.GaugeVec) {
	o.batchesSkipped = perFunction(NameBatchesSkipped,
		"Blocked batches an operator skipped (esm skip): sent to the on-failure destination with condition OperatorSkipped, or dropped without one.").With(curry)
	o.recordsSkipped = perFunction(NameRecordsSkipped, "The records of the batches an operator skipped (esm skip).").With(curry)
	o.rewinds = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameRewinds,
		Help: "Rewinds of the mapping (esm rewind) this worker stopped for, once ended, by outcome: applied or refused."},
		append(slices.Clip(names), LabelOutcome))).MustCurryWith(curry)
	o.rewindInProgress = gauge(NameRewindInProgress,
		"1 while this worker waits for a rewind of the mapping (esm rewind) to be applied, invoking nothing, else 0.", names...).With(curry)
}

// register registers c with reg and returns it, or the collector reg already holds under the
// same description.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("metrics: register: %v", err))
}

// shard returns the shard's series, creating them on its first use.
func (p *Observer) shard(id string) *shardMetrics {
	if v, ok := p.shards.Load(id); ok {
		return v.(*shardMetrics)
	}
	sm := &shardMetrics{
		polled:    p.polled.WithLabelValues(id),
		filtered:  p.filtered.WithLabelValues(id),
		invoked:   p.invoked.WithLabelValues(id),
		failed:    p.failed.WithLabelValues(id),
		dropped:   p.dropped.WithLabelValues(id),
		delivered: p.delivered.WithLabelValues(id),
	}
	v, _ := p.shards.LoadOrStore(id, sm) // a lost race resolved the same series: either will do
	return v.(*shardMetrics)
}

// add adds n to c; a negative n (never sent by the poller) is ignored, as a counter cannot go down.
func add(c prometheus.Counter, n int) {
	if n > 0 {
		c.Add(float64(n))
	}
}

// RecordsPolled adds n to PolledEventCount.
func (p *Observer) RecordsPolled(shardID string, n int) { add(p.shard(shardID).polled, n) }

// RecordsFilteredOut adds n to FilteredOutEventCount.
func (p *Observer) RecordsFilteredOut(shardID string, n int) { add(p.shard(shardID).filtered, n) }

// RecordsDropped adds n to DroppedEventCount.
func (p *Observer) RecordsDropped(shardID string, n int) { add(p.shard(shardID).dropped, n) }

// RecordsDelivered adds n to OnFailureDestinationDeliveredEventCount.
func (p *Observer) RecordsDelivered(shardID string, n int) { add(p.shard(shardID).delivered, n) }

// BatchInvoked adds records to InvokedEventCount (and to FailedInvokeEventCount when failed),
// and observes the invocation's duration and batch size.
func (p *Observer) BatchInvoked(shardID string, records int, d time.Duration, failed bool) {
	sm := p.shard(shardID)
	add(sm.invoked, records)
	if failed {
		add(sm.failed, records)
	}
	p.duration.Observe(d.Seconds())
	p.batchSize.Observe(float64(records))
	p.invocations.Inc()
}

// FunctionError adds one to Errors.
func (p *Observer) FunctionError(string) { p.errors.Inc() }

// Throttled adds one to Throttles.
func (p *Observer) Throttled(string) { p.throttles.Inc() }

// DestinationDeliveryFailed adds one to DestinationDeliveryFailures.
func (p *Observer) DestinationDeliveryFailed(string) { p.destinationFailures.Inc() }

// IteratorAge sets the shard's IteratorAge, in milliseconds.
func (p *Observer) IteratorAge(shardID string, age time.Duration) {
	sm := p.shard(shardID)
	ref := sm.age.Load()
	if ref == nil {
		ref = p.ageGauge(shardID, sm)
	}
	ms := float64(max(age, 0)) / float64(time.Millisecond)
	ref.ms.Store(math.Float64bits(ms))
	ref.g.Set(ms)
}

// ageGauge creates the shard's IteratorAge series.
func (p *Observer) ageGauge(shardID string, sm *shardMetrics) *gaugeRef {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if ref := sm.age.Load(); ref != nil {
		return ref
	}
	ref := &gaugeRef{g: p.iteratorAge.WithLabelValues(shardID)}
	sm.age.Store(ref)
	return ref
}

// ShardState sets esm_shard_state and esm_shard_owned. A shard that stops being read here loses
// its IteratorAge series.
func (p *Observer) ShardState(shardID, state string) {
	sm := p.shard(shardID)
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if state == sm.state {
		return
	}
	if sm.state == "" {
		for _, s := range shardStates {
			p.state.WithLabelValues(shardID, s).Set(0)
		}
		sm.owned = p.owned.WithLabelValues(shardID)
		sm.blockedGauge(p, shardID)
	} else {
		p.state.WithLabelValues(shardID, sm.state).Set(0)
	}
	p.state.WithLabelValues(shardID, state).Set(1)
	sm.state = state
	p.finishedLocked(shardID, sm)
	if state == poller.StateReading {
		sm.owned.Set(1)
		return
	}
	sm.owned.Set(0)
	if sm.age.Swap(nil) != nil {
		p.iteratorAge.DeleteLabelValues(shardID)
	}
}

// ShardBlocked sets esm_shard_blocked.
func (p *Observer) ShardBlocked(shardID string, blocked bool) {
	sm := p.shard(shardID)
	sm.mu.Lock()
	defer sm.mu.Unlock()
	v := 0.0
	if blocked {
		v = 1
	}
	sm.blockedGauge(p, shardID).Set(v)
}

// blockedGauge is the shard's esm_shard_blocked series, created at 0 on first use; sm.mu is held.
func (sm *shardMetrics) blockedGauge(p *Observer, shardID string) prometheus.Gauge {
	if sm.blocked == nil {
		sm.blocked = p.blocked.WithLabelValues(shardID)
		sm.blocked.Set(0)
	}
	return sm.blocked
}

// BatchItemFailuresIgnored adds one to esm_batch_item_failures_ignored_total.
func (p *Observer) BatchItemFailuresIgnored(string) { p.ignoredItemFailures.Inc() }

// SkipPending is not measured (the live page shows it).
func (p *Observer) SkipPending(string, string, string, bool) {}

// BatchSkipped adds one to esm_batches_skipped_total and the batch's records to
// esm_records_skipped_total.
func (p *Observer) BatchSkipped(_ string, k poller.Skipped) {
	p.batchesSkipped.Inc()
	p.recordsSkipped.Add(float64(k.Records))
}

// RewindSeen sets esm_rewind_in_progress: 1 while the rewind seen is requested or applying.
func (p *Observer) RewindSeen(n poller.RewindNotice) {
	v := 0.0
	if n.InProgress {
		v = 1
	}
	p.rewindInProgress.Set(v)
}

// RewindEnded adds one to esm_rewinds_total with the rewind's outcome.
func (p *Observer) RewindEnded(n poller.RewindNotice) { p.rewinds.WithLabelValues(n.State).Inc() }

// maxAge is the largest IteratorAge of the shards read here, in milliseconds; false when none has one.
func (p *Observer) maxAge() (ms float64, ok bool) {
	p.shards.Range(func(_, v any) bool {
		if ref := v.(*shardMetrics).age.Load(); ref != nil {
			ms, ok = max(ms, math.Float64frombits(ref.ms.Load())), true
		}
		return true
	})
	return ms, ok
}

// mappingAges is the collector of esm_mapping_iterator_age_milliseconds: at each scrape, for each
// mapping (function and stream) of the registry's observers, the largest IteratorAge of its
// shards. One per registry; every observer registered with it adds itself.
type mappingAges struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	obs  []*Observer
}

func newMappingAges(names []string) *mappingAges {
	return &mappingAges{desc: prometheus.NewDesc(NameMappingIteratorAge,
		"Lambda's IteratorAge of the mapping, in milliseconds, as Lambda publishes it: the largest IteratorAge over the shards this worker reads (absent while none has one). With several workers, take max by (function, stream).",
		names, nil)}
}

// labelValues are the values of curry's labels in the order of names.
func labelValues(names []string, curry prometheus.Labels) []string {
	vs := make([]string, len(names))
	for i, n := range names {
		vs[i] = curry[n]
	}
	return vs
}

func (m *mappingAges) add(o *Observer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.obs = append(m.obs, o)
}

func (m *mappingAges) Describe(ch chan<- *prometheus.Desc) { ch <- m.desc }

func (m *mappingAges) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	obs := slices.Clone(m.obs)
	m.mu.Unlock()
	ages := map[string]float64{} // by the mapping's label values, joined
	values := map[string][]string{}
	for _, o := range obs {
		ms, ok := o.maxAge()
		if !ok {
			continue
		}
		k := strings.Join(o.labels, "\x00")
		if cur, seen := ages[k]; !seen || ms > cur {
			ages[k], values[k] = ms, o.labels
		}
	}
	for k, ms := range ages {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, ms, values[k]...)
	}
}

// ShardReadBy sets esm_shard_read_by: 1 for mode, 0 for the other.
func (p *Observer) ShardReadBy(shardID, mode string) {
	for _, m := range []string{poller.ReadByPolling, poller.ReadBySubscription} {
		v := 0.0
		if m == mode {
			v = 1
		}
		p.readBy.WithLabelValues(shardID, m).Set(v)
	}
}

// Subscribed sets the subscription's start, and counts a renewal.
func (p *Observer) Subscribed(shardID string, at time.Time, renewal bool) {
	p.subStarted.WithLabelValues(shardID).Set(unixSeconds(at))
	c := p.subRenewals.WithLabelValues(shardID) // present from the first subscription on, at 0
	if renewal {
		c.Inc()
	}
	p.subInUse.WithLabelValues(shardID)
}

// SubscriptionInUse counts a ResourceInUseException.
func (p *Observer) SubscriptionInUse(shardID string) { p.subInUse.WithLabelValues(shardID).Inc() }

// SubscriptionEvent sets the time of the subscription's last event.
func (p *Observer) SubscriptionEvent(shardID string, at time.Time) {
	p.subLastEvent.WithLabelValues(shardID).Set(unixSeconds(at))
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1e3 }

// NewRegistry returns a registry holding the Go runtime and process collectors, to which a
// program adds its observers' metrics with New.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
