package emf

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/poller"
)

// DefaultInterval is the interval New uses when given none: CloudWatch's standard
// one-minute resolution.
const DefaultInterval = time.Minute

// EMF names and units.
const (
	emfFunctionName = "FunctionName"
	emfMappingUUID  = "EventSourceMappingUUID"
	emfStreamName   = "StreamName"
	emfDuration     = "Duration"
	unitCount       = "Count"
	unitMillis      = "Milliseconds"

	// emfMaxValues is the most values one metric may carry in one document (the format's limit).
	emfMaxValues = 100
	// emfMaxSamples bounds the values of one metric kept per interval; past it a uniform sample
	// of them is kept (with the smallest and the largest), so memory stays bounded at any rate.
	emfMaxSamples = 10 * emfMaxValues
)

// Observer is a poller.Observer that aggregates the mapping's measurements and writes them as
// CloudWatch embedded-metric-format JSON lines, one document per line, every interval: the
// format Lambda users find in CloudWatch Logs, which CloudWatch turns into metrics when the lines
// reach a log group (from a container's stdout through a log agent, for example).
//
// Its observer methods are safe for concurrent use and take one short lock. Nothing is written
// before Run or Flush.
type Observer struct {
	w           io.Writer
	namespace   string
	function    string
	stream      string
	interval    time.Duration
	eventCounts bool             // MetricsConfig EventCount: write the six event counts
	now         func() time.Time // the clock; tests replace it

	mu          sync.Mutex // guards agg, mappingUUID and ages
	agg         emfAggregate
	mappingUUID string
	// ages is the latest IteratorAge of each shard read here, in milliseconds: an interval that
	// observed none writes the mapping's, the largest.
	ages map[string]float64

	wmu sync.Mutex // serialises writes to w
}

var _ poller.Observer = (*Observer)(nil)

// emfAggregate is what one interval observed.
type emfAggregate struct {
	active                                                bool // a function metric was observed
	counted                                               bool // an event count was observed
	polled, filtered, invoked, failed, dropped, delivered int64
	invocations, errors, throttles, destinationFailures   int64
	age, duration                                         sampler // milliseconds
}

// Option configures New. A nil Option is ignored.
type Option func(*Observer)

// WithInterval sets the interval over which the measurements are aggregated and written
// (default DefaultInterval; zero or negative keeps it).
func WithInterval(d time.Duration) Option {
	return func(e *Observer) {
		if d > 0 {
			e.interval = d
		}
	}
}

// WithEventCounts writes the six event counts, as Lambda publishes them only for a mapping whose
// MetricsConfig lists EventCount. Without it, only the function metrics are written.
func WithEventCounts(on bool) Option { return func(e *Observer) { e.eventCounts = on } }

// WithMappingUUID sets the mapping's UUID, the EventSourceMappingUUID dimension (see
// SetMappingUUID when it is known only later).
func WithMappingUUID(id string) Option { return func(e *Observer) { e.mappingUUID = id } }

// New returns an Observer that writes to w the measurements of the mapping of function on
// stream, in the CloudWatch namespace, aggregated over an interval (see WithInterval). Start it
// with Run.
func New(w io.Writer, namespace, function, stream string, opts ...Option) *Observer {
	e := &Observer{w: w, namespace: namespace, function: function, stream: stream, interval: DefaultInterval, now: time.Now,
		ages: map[string]float64{}}
	for _, o := range opts {
		if o != nil {
			o(e)
		}
	}
	return e
}

// SetMappingUUID sets the EventSourceMappingUUID dimension once the mapping's UUID is known (the
// service reads it from the mapping's store). Safe for concurrent use.
func (e *Observer) SetMappingUUID(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mappingUUID = id
}

// Run writes the aggregated measurements every interval until ctx ends, then writes what the
// last, partial interval observed and returns. An interval in which nothing was observed writes
// nothing (a worker that reads no shard, like a disabled mapping, emits no metrics), whereas an
// interval of empty polls writes zero counts, as Lambda does. A failed write does not stop Run:
// it returns the first write error once ctx ends, and nil if every write succeeded. Run blocks;
// call it once.
func (e *Observer) Run(ctx context.Context) error {
	t := time.NewTicker(e.interval)
	defer t.Stop()
	var first error
	for {
		select {
		case <-ctx.Done():
			if err := e.Flush(); err != nil && first == nil {
				first = err
			}
			return first
		case <-t.C:
			if err := e.Flush(); err != nil && first == nil {
				first = err
			}
		}
	}
}

// Flush writes what was observed since the previous flush, as one or more lines (several only
// when a metric has more than 100 values), and starts a new interval. It writes nothing when
// nothing was observed and no shard is read here (with shards read, an idle interval writes their
// IteratorAge). Safe for concurrent use with the observer methods and with Run.
func (e *Observer) Flush() error {
	e.mu.Lock()
	if e.agg.age.seen == 0 && len(e.ages) > 0 { // nothing changed: the mapping's age is still what it was
		e.agg.active = true
		e.agg.age.add(slices.Max(slices.Collect(maps.Values(e.ages))))
	}
	agg, id := e.agg, e.mappingUUID
	e.agg = emfAggregate{}
	e.mu.Unlock()
	if !agg.active && !(e.eventCounts && agg.counted) {
		return nil
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	var errs []error
	for _, line := range e.encode(agg, id, e.now()) {
		if _, err := e.w.Write(line); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &WriteError{Err: err}
	}
	return nil
}

// WriteError is returned by Flush and Run when the writer failed.
type WriteError struct{ Err error }

func (e *WriteError) Error() string {
	return "metrics: write embedded metric format: " + e.Err.Error()
}
func (e *WriteError) Unwrap() error { return e.Err }

// RecordsPolled adds n to PolledEventCount.
func (e *Observer) RecordsPolled(_ string, n int) { e.count(&e.agg.polled, n) }

// RecordsFilteredOut adds n to FilteredOutEventCount.
func (e *Observer) RecordsFilteredOut(_ string, n int) { e.count(&e.agg.filtered, n) }

// RecordsDropped adds n to DroppedEventCount.
func (e *Observer) RecordsDropped(_ string, n int) { e.count(&e.agg.dropped, n) }

// RecordsDelivered adds n to OnFailureDestinationDeliveredEventCount.
func (e *Observer) RecordsDelivered(_ string, n int) { e.count(&e.agg.delivered, n) }

// FunctionError adds one to Errors.
func (e *Observer) FunctionError(string) { e.function1(&e.agg.errors) }

// Throttled adds one to Throttles.
func (e *Observer) Throttled(string) { e.function1(&e.agg.throttles) }

// DestinationDeliveryFailed adds one to DestinationDeliveryFailures.
func (e *Observer) DestinationDeliveryFailed(string) { e.function1(&e.agg.destinationFailures) }

func (e *Observer) function1(c *int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.agg.active = true
	*c++
}

// BatchInvoked counts the invocation and its records and keeps its duration.
func (e *Observer) BatchInvoked(_ string, records int, d time.Duration, failed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.agg.active, e.agg.counted = true, true
	e.agg.invocations++
	e.agg.invoked += int64(max(records, 0))
	if failed {
		e.agg.failed += int64(max(records, 0))
	}
	e.agg.duration.add(millis(d))
}

// IteratorAge keeps the age, in milliseconds, and the shard's latest.
func (e *Observer) IteratorAge(shardID string, age time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.agg.active = true
	ms := millis(max(age, 0))
	e.agg.age.add(ms)
	e.ages[shardID] = ms
}

// ShardState forgets the latest IteratorAge of a shard no longer read here; it writes nothing:
// Lambda has no such metric.
func (e *Observer) ShardState(shardID, state string) {
	if state == poller.StateReading {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.ages, shardID)
}

// ShardBlocked is not written: Lambda publishes no such metric.
func (e *Observer) ShardBlocked(string, bool) {}

// BatchItemFailuresIgnored is not written: Lambda publishes no such metric.
func (e *Observer) BatchItemFailuresIgnored(string) {}

// count adds to an event count: the interval is written only when event counts are on (or a
// function metric was observed).
func (e *Observer) count(c *int64, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.agg.counted = true
	*c += int64(max(n, 0))
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// emfMetadata is the document's _aws member.
type emfMetadata struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// emfValue is one metric of a document: a count, or a list of values.
type emfValue struct {
	name, unit string
	count      int64
	values     []float64 // nil for a count
}

// encode renders agg as documents stamped at now, each a line ending in a newline. The first
// line holds the counts: Lambda's function metrics under the FunctionName dimension and, with
// event counts on, the event source mapping metrics under EventSourceMappingUUID. IteratorAge and
// Duration values beyond the first 100 of each go on further lines.
func (e *Observer) encode(agg emfAggregate, mappingUUID string, now time.Time) [][]byte {
	function := []emfValue{
		{name: metrics.NameInvocations, unit: unitCount, count: agg.invocations},
		{name: metrics.NameErrors, unit: unitCount, count: agg.errors},
		{name: metrics.NameThrottles, unit: unitCount, count: agg.throttles},
		{name: metrics.NameDestinationDeliveryFailures, unit: unitCount, count: agg.destinationFailures},
	}
	var mapping []emfValue
	if e.eventCounts {
		mapping = []emfValue{
			{name: metrics.NamePolledEventCount, unit: unitCount, count: agg.polled},
			{name: metrics.NameFilteredOutEventCount, unit: unitCount, count: agg.filtered},
			{name: metrics.NameInvokedEventCount, unit: unitCount, count: agg.invoked},
			{name: metrics.NameFailedInvokeEventCount, unit: unitCount, count: agg.failed},
			{name: metrics.NameDroppedEventCount, unit: unitCount, count: agg.dropped},
			{name: metrics.NameOnFailureDestinationDeliveredEventCount, unit: unitCount, count: agg.delivered},
		}
	}
	ages, durations := agg.age.values(), agg.duration.values()
	var lines [][]byte
	for i := 0; i == 0 || i < len(ages) || i < len(durations); i += emfMaxValues {
		var fn, esm []emfValue
		if i == 0 {
			fn, esm = function, mapping
		}
		if part := chunk(durations, i); len(part) > 0 {
			fn = append(fn, emfValue{name: emfDuration, unit: unitMillis, values: part})
		}
		if part := chunk(ages, i); len(part) > 0 {
			fn = append(fn, emfValue{name: metrics.NameIteratorAge, unit: unitMillis, values: part})
		}
		lines = append(lines, e.document(fn, esm, mappingUUID, now))
	}
	return lines
}

// chunk returns the at most emfMaxValues values of vs from i on.
func chunk(vs []float64, i int) []float64 {
	if i >= len(vs) {
		return nil
	}
	return vs[i:min(i+emfMaxValues, len(vs))]
}

// document renders one EMF document: the _aws metadata with one directive for the function
// metrics (dimension FunctionName) and, when there are any, one for the mapping's (dimension
// EventSourceMappingUUID; FunctionName while the UUID is unknown), then the dimension values,
// the stream's name as a property, and the metrics.
func (e *Observer) document(fn, esm []emfValue, mappingUUID string, now time.Time) []byte {
	directive := func(dim string, vals []emfValue) emfDirective {
		d := emfDirective{Namespace: e.namespace, Dimensions: [][]string{{dim}}, Metrics: make([]emfMetric, 0, len(vals))}
		for _, v := range vals {
			d.Metrics = append(d.Metrics, emfMetric{Name: v.name, Unit: v.unit})
		}
		return d
	}
	meta := emfMetadata{Timestamp: now.UnixMilli(), CloudWatchMetrics: []emfDirective{directive(emfFunctionName, fn)}}
	if len(esm) > 0 {
		dim := emfMappingUUID
		if mappingUUID == "" {
			dim = emfFunctionName
		}
		meta.CloudWatchMetrics = append(meta.CloudWatchMetrics, directive(dim, esm))
	}
	b := []byte(`{"_aws":`)
	b = appendJSON(b, meta)
	b = append(b, `,"`+emfFunctionName+`":`...)
	b = appendJSON(b, e.function)
	if mappingUUID != "" {
		b = append(b, `,"`+emfMappingUUID+`":`...)
		b = appendJSON(b, mappingUUID)
	}
	b = append(b, `,"`+emfStreamName+`":`...)
	b = appendJSON(b, e.stream)
	for _, v := range append(fn, esm...) {
		b = append(b, ',')
		b = appendJSON(b, v.name)
		b = append(b, ':')
		if v.values == nil {
			b = strconv.AppendInt(b, v.count, 10)
			continue
		}
		b = append(b, '[')
		for j, f := range v.values {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, f, 'f', -1, 64)
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

// appendJSON appends v's JSON encoding; v is one of this file's types or a string, which
// always encode.
func appendJSON(b []byte, v any) []byte {
	enc, err := json.Marshal(v)
	if err != nil {
		panic("metrics: encode embedded metric format: " + err.Error()) // unreachable: see above
	}
	return append(b, enc...)
}

// sampler keeps the values of one interval: all of them up to emfMaxSamples, then a uniform
// sample of that many (reservoir sampling) that always holds the smallest and the largest.
type sampler struct {
	vals     []float64
	seen     int
	min, max float64
}

func (s *sampler) add(v float64) {
	if s.seen == 0 || v < s.min {
		s.min = v
	}
	if s.seen == 0 || v > s.max {
		s.max = v
	}
	s.seen++
	if len(s.vals) < emfMaxSamples {
		s.vals = append(s.vals, v)
		return
	}
	if j := rand.IntN(s.seen); j < emfMaxSamples {
		s.vals[j] = v
	}
}

// values returns the kept values; once values were dropped, the first two are the smallest and
// the largest seen, so that CloudWatch's Minimum and Maximum stay exact.
func (s *sampler) values() []float64 {
	if s.seen > len(s.vals) {
		s.vals[0], s.vals[1] = s.min, s.max
	}
	return s.vals
}
