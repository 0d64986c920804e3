// Package tracing traces a mapping's invocations with OpenTelemetry: one span per invocation,
// following the semantic conventions for FaaS and messaging, exported over OTLP/HTTP as the
// standard OTEL_* variables configure it, and off unless they ask for it ([FromEnvironment]).
//
// Each span ([NewTracer]) is named "process <stream>", of kind consumer, and carries:
//
//	aws.lambda.resource_mapping.id      the mapping's UUID
//	faas.trigger                        pubsub
//	faas.invoked_name                   the function's name
//	faas.invoked_provider               aws
//	faas.invoked_region                 the stream's region, when known
//	messaging.system                    aws_kinesis, or aws_dynamodb_streams for a DynamoDB stream
//	messaging.operation.type            process
//	messaging.destination.name          the stream's name
//	messaging.destination.partition.id  the shard ID
//	messaging.batch.message_count       the records in the invocation
//	esm.batch.first_sequence_number     the first record's sequence number
//	esm.batch.last_sequence_number      the last record's
//	esm.outcome                         ok, partial, function_error, timeout, invalid_response,
//	                                    bisected, sent_to_destination, dropped or not_invoked
//	esm.invocation.attempt              1 for the batch's first invocation, then 2, 3…
//	esm.batch.iterator_age_ms           the age of the batch's last record when it was sent
//	error.type                          the outcome, for any but ok
//
// Any outcome but ok sets the span's status to error, described by the failure's message (the
// function's error document, the invoke error). The retries of a batch are children of its first
// invocation's span, and the halves of a bisected batch children of the bisected invocation's
// span, so that one trace holds a batch's whole story; a batch retried without end goes on in a
// new trace every poller.MaxTraceInvocations invocations, whose first span links to the previous
// trace's first, so that no trace grows without limit. Export errors are logged with the logger
// given to FromEnvironment.
//
// The function receives the span as Lambda passes a trace to it, an X-Ray trace header
// (Root=1-<trace id>;Parent=<span id>;Sampled=<0|1>): as X-Amzn-Trace-Id over HTTP, as
// Lambda-Runtime-Trace-Id from an execution environment's Runtime API, and under aws-lambda-go's
// context key in process.
package tracing
