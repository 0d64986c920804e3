// Package prom keeps a mapping's measurements as Prometheus metrics, named as Lambda's event
// source mapping names them ([New]); metrics/health serves them on /metrics, with the Go
// runtime and process collectors of [NewRegistry].
//
// Every metric carries the labels function (the function name) and stream (the stream name or
// ARN, as the mapping was given it); the per-shard ones also carry shard (the shard ID).
//
// The six event counts keep the names of Lambda's event source mapping metrics, without a prefix
// and without Prometheus's _total suffix, so that a CloudWatch dashboard, alarm or runbook
// translates to PromQL by name: PolledEventCount here is the PolledEventCount of the Lambda
// console. Lambda publishes them only for a mapping whose MetricsConfig is {Metrics:
// [EventCount]}; /metrics always has them and says so in their help text (EMF honours
// MetricsConfig). They are per shard; sum them by (function, stream) for Lambda's per-mapping
// value. Lambda's always-on function metrics Invocations, Errors, Throttles and
// DestinationDeliveryFailures keep their names too, per (function, stream). The metrics esm adds
// that Lambda does not have are prefixed esm_ and follow Prometheus's conventions (base units,
// _seconds).
//
//	PolledEventCount{function,stream,shard}                   counter
//	    Records read from the shard by GetRecords. Lambda: records the event source mapping read
//	    successfully from the source; an empty poll adds 0.
//	FilteredOutEventCount{function,stream,shard}              counter
//	    Records that FilterCriteria removed: they never reach the function.
//	InvokedEventCount{function,stream,shard}                  counter
//	    Records in invocations that reached the function. A retried batch counts again.
//	FailedInvokeEventCount{function,stream,shard}             counter
//	    Records in invocations that failed: a function error, a timeout, or a response with a
//	    non-empty batchItemFailures (the whole batch counts, as Lambda counts it).
//	DroppedEventCount{function,stream,shard}                  counter
//	    Records discarded because they passed MaximumRecordAgeInSeconds or
//	    MaximumRetryAttempts without reaching an on-failure destination (no destination, or its
//	    delivery failed). Records lost to the stream's retention are not counted.
//	OnFailureDestinationDeliveredEventCount{function,stream,shard} counter
//	    Records whose failure record reached the on-failure destination (SQS, SNS or S3).
//	Invocations{function,stream}                              counter
//	    Lambda's Invocations: invocations that reached the function, whatever their outcome.
//	Errors{function,stream}                                   counter
//	    Lambda's Errors: invocations that failed with a function error (an error returned, a
//	    panic, a timeout). Partial and invalid batch responses are not errors.
//	Throttles{function,stream}                                counter
//	    Lambda's Throttles: invoke requests refused as throttled (429, reserved concurrency);
//	    they reach no function and are retried without counting toward MaximumRetryAttempts.
//	DestinationDeliveryFailures{function,stream}              counter
//	    Lambda's DestinationDeliveryFailures: sends to the on-failure destination that failed,
//	    one per attempt (--on-destination-failure block retries them; drop drops the records).
//	IteratorAge{function,stream,shard}                        gauge, milliseconds
//	    How far the shard's reading is behind the stream's tip (poller.Observer.IteratorAge):
//	    each GetRecords answer's or subscription event's MillisBehindLatest (0 once caught up),
//	    the age of the last record of each batch sent (Lambda's IteratorAge) and, while batches
//	    are in flight or records wait for the batching window, their age, growing every second.
//	    Unlike Lambda's, it follows an idle shard to 0 and grows while an invocation hangs. The
//	    series is removed when this worker stops reading the shard (finished, released or handed
//	    over), so max(IteratorAge) never alarms on a shard nobody reads here. Milliseconds, not
//	    seconds, because that is Lambda's unit.
//	esm_invocation_duration_seconds{function,stream}          histogram
//	    How long each invocation took as esm saw it (the request to the function and its
//	    response), whatever its outcome. Its _count is Lambda's Invocations metric.
//	esm_batch_size{function,stream}                           histogram
//	    Records per invocation (the size of each batch sent, retries included).
//	esm_shard_state{function,stream,shard,state}              gauge, 1 or 0
//	    1 for the shard's current state, 0 for the others: pending (waiting for its parents to
//	    finish), reading (read by this worker), finished (read to its end and handled), released
//	    (this worker stopped reading it; another worker may take it).
//	esm_shard_owned{function,stream,shard}                    gauge, 1 or 0
//	    Whether this worker holds the shard's lease and reads it. The poller reports a shard as
//	    reading only while it holds the lease and as released once it gave the lease up or lost
//	    it, so this is 1 exactly in the reading state; it is 0 when pending, finished or
//	    released. sum(esm_shard_owned) by (function) is the number of leases a worker holds.
//	esm_mapping_iterator_age_milliseconds{function,stream}    gauge, milliseconds
//	    The mapping's IteratorAge as one number, as Lambda publishes IteratorAge per mapping: the
//	    largest IteratorAge of the shards this worker reads, computed at each scrape; absent while
//	    none has one. With several workers, max by (function, stream) is the mapping's.
//	esm_shard_blocked{function,stream,shard}                  gauge, 1 or 0
//	    1 while the shard has been retrying the same batch for longer than the blocked threshold
//	    (poller.WithBlockedAfter, --blocked-after); a warning names the shard and the cause.
//	esm_batch_item_failures_ignored_total{function,stream}    counter
//	    Responses that listed batchItemFailures while the mapping lacks FunctionResponseTypes
//	    ReportBatchItemFailures: ignored, as Lambda ignores them, the batch counted as handled.
//	esm_batches_skipped_total{function,stream}                counter
//	esm_records_skipped_total{function,stream}                counter
//	    Blocked batches an operator skipped (esm skip), and their records: sent to the on-failure
//	    destination with condition OperatorSkipped (also in the destination's counts), or dropped
//	    without one (also in the dropped counts).
//	esm_rewinds_total{function,stream,outcome}                counter
//	    Rewinds of the mapping (esm rewind, on a lease table) this worker stopped for, counted once
//	    ended, outcome applied or refused. Each worker of the fleet counts the same rewind: max by
//	    (function, stream, outcome) is the fleet's. The records replayed are not known to a worker.
//	esm_rewind_in_progress{function,stream}                   gauge, 1 or 0
//	    1 while this worker waits for a rewind of the mapping to be applied, invoking nothing.
//
// The histograms have no shard label, to keep their series count independent of the number of
// shards. Series of a shard stay while this worker has it, reading, pending or released
// (counters must not vanish under rate()), except IteratorAge as said above; those of a shard
// read to its end go DefaultFinishedGrace (5 minutes, WithFinishedGrace) after it finished, once
// scrapes have seen its last counts, so a stream resharded often does not grow the series
// without end.
//
// The Lambda names are exposed as given in the Prometheus text format. The metrics/health
// server does not negotiate OpenMetrics, whose encoder would append _total to the counters'
// names.
package prom
