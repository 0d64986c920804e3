// Package emf writes a mapping's measurements as CloudWatch embedded-metric-format (EMF) JSON
// lines, with Lambda's metric names and dimensions, on a writer such as stdout.
//
// An [Observer] writes one JSON line per interval in which anything Lambda would publish
// happened, in the namespace it is given, stamped with the time it is written, with the values
// aggregated over the interval and all shards. Each line has up to two metric directives, with Lambda's
// dimensions:
//
//	dimension FunctionName, always (Lambda's function metrics):
//	  Invocations, Errors, Throttles, DestinationDeliveryFailures   Count, as in metrics/prom
//	  Duration      Milliseconds: one value per invocation (esm_invocation_duration_seconds)
//	  IteratorAge   Milliseconds: each value the poller reported (poller.Observer.IteratorAge:
//	                every change, batches sent and answers showing the shard caught up); an
//	                interval with none carries the mapping's current one, the largest of
//	                its shards read here
//	dimension EventSourceMappingUUID, only with [WithEventCounts] (the mapping's MetricsConfig
//	lists EventCount, as Lambda requires for these):
//	  PolledEventCount, FilteredOutEventCount, InvokedEventCount, FailedInvokeEventCount,
//	  DroppedEventCount, OnFailureDestinationDeliveredEventCount   Count, as in metrics/prom
//
// The root also carries StreamName, as a property (not a dimension). EventSourceMappingUUID is
// the mapping's UUID: a random version 4 UUID created with the mapping's progress and kept with
// it ([WithMappingUUID], [Observer.SetMappingUUID]). With event counts on, an interval of empty polls
// writes zero counts, as Lambda does; without them, an interval with no invocation, throttle,
// delivery failure or batch writes the mapping's IteratorAge alone (Lambda writes nothing then,
// so an alarm on its IteratorAge sees no data where esm's sees the shards caught up); a worker
// that reads nothing writes nothing.
//
// IteratorAge and Duration are lists of the observed values, so CloudWatch computes Maximum,
// Average and percentiles from them. One line holds at most 100 values of a metric (the
// format's limit); more spread over more lines. Past 1000 values in an interval a uniform sample
// of 1000 is kept, with the exact minimum and maximum, so memory stays bounded at any rate
// (CloudWatch's SampleCount of these two is then the sample's size; Invocations stays exact).
// No dimension names a shard, as Lambda's metrics have none.
package emf
