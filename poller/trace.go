package poller

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/kinesis-esm/esm/invoke"
)

// Outcomes of an invocation, as a Tracer is told them.
const (
	OutcomeOK                = "ok"                  // every record handled
	OutcomePartial           = "partial"             // a partial batch response; the rest is retried
	OutcomeFunctionError     = "function_error"      // the function failed; the batch is retried
	OutcomeTimeout           = "timeout"             // the function passed its timeout; retried
	OutcomeInvalidResponse   = "invalid_response"    // a ReportBatchItemFailures response that is not valid
	OutcomeBisected          = "bisected"            // the function failed and the batch was split in two
	OutcomeSentToDestination = "sent_to_destination" // retries exhausted: the records went to the on-failure destination
	OutcomeDropped           = "dropped"             // retries exhausted, no destination: the records were discarded
	OutcomeNotInvoked        = "not_invoked"         // the function was not reached (throttled, unavailable)
)

// Invocation describes one invocation to a Tracer.
type Invocation struct {
	StreamName, Region                      string // the stream's, from its ARN
	EventSource                             string // the source's events' eventSource: aws:kinesis, aws:dynamodb
	ShardID                                 string
	BatchSize                               int
	FirstSequenceNumber, LastSequenceNumber string
	// Attempt counts the invocations of these records, this one included (1: the first; the
	// halves of a bisected batch start again).
	Attempt int
	// IteratorAge is the age of the batch's last record as it is sent (Lambda's IteratorAge).
	IteratorAge time.Duration
	// NewTrace: after is a retry chain's first invocation whose trace already holds
	// MaxTraceInvocations of the chain: this one starts a new trace, linked to after, which
	// the chain's next retries follow.
	NewTrace bool
}

// MaxTraceInvocations bounds the invocations of one retry chain in one trace: a batch retried
// for ever (MaximumRetryAttempts -1) goes on in a new trace, linked to the previous one, every
// MaxTraceInvocations invocations.
const MaxTraceInvocations = 100

// Tracer traces the mapping's invocations (WithTracer); package tracing implements it with
// OpenTelemetry.
type Tracer interface {
	// StartInvocation is called before each invocation. after is the span of the invocation that
	// led to this one: the first invocation of the batch being retried, or the invocation whose
	// batch was bisected; nil for a batch's first. The context it returns is the one the
	// invocation is made with; it may carry a trace header for the function
	// (invoke.WithTraceHeader). Safe for concurrent use.
	StartInvocation(ctx context.Context, after InvocationSpan, inv Invocation) (context.Context, InvocationSpan)
}

// InvocationSpan is one traced invocation.
type InvocationSpan interface {
	// End records the invocation's outcome (one of the Outcome constants) and, for any outcome
	// but OutcomeOK, the failure's message (the function's error document, the invoke error, a
	// partial response's failed record), then ends the span.
	End(outcome, message string)
}

// WithTracer traces every invocation with t (default none).
func WithTracer(t Tracer) Option { return func(p *Poller) { p.tracer = t } }

// startSpan starts the span of an invocation of b.recs when the mapping is traced; ctx is
// returned unchanged otherwise.
func (b *batchRun) startSpan(ctx context.Context) context.Context {
	t := b.r.p.tracer
	if t == nil {
		return ctx
	}
	b.tries++
	inv := Invocation{StreamName: b.r.p.id.Name, Region: b.r.p.id.Region, EventSource: b.r.p.id.EventSource, ShardID: b.r.shardID, BatchSize: len(b.recs),
		FirstSequenceNumber: b.recs[0].SequenceNumber, LastSequenceNumber: b.recs[len(b.recs)-1].SequenceNumber,
		Attempt: b.tries, NewTrace: b.chained == MaxTraceInvocations}
	if at := b.recs[len(b.recs)-1].ArrivalTime; !at.IsZero() {
		inv.IteratorAge = max(b.r.p.now().Sub(at), 0)
	}
	after := b.first
	if after == nil {
		after = b.parent
	}
	ctx, b.span = t.StartInvocation(ctx, after, inv)
	if b.first == nil || inv.NewTrace {
		b.first, b.chained = b.span, 0
	}
	b.chained++
	return ctx
}

// endSpan ends the current invocation's span with outcome and, when it failed, message.
func (b *batchRun) endSpan(outcome, message string) {
	if b.span != nil {
		b.span.End(outcome, message)
		b.span = nil
	}
}

// failureOutcome is the outcome of an invocation that failed by o and is retried.
func failureOutcome(o outcome, resp invoke.Response) string {
	switch o {
	case outcomePartial:
		return OutcomePartial
	case outcomeInvalid:
		return OutcomeInvalidResponse
	}
	if timedOut(resp.Payload) {
		return OutcomeTimeout
	}
	return OutcomeFunctionError
}

// timedOut reports whether a function error's document is Lambda's timeout.
func timedOut(payload []byte) bool {
	if !bytes.Contains(payload, []byte("Sandbox.Timedout")) {
		return false
	}
	var doc invoke.ErrorDocument
	return json.Unmarshal(payload, &doc) == nil && doc.ErrorType == "Sandbox.Timedout"
}

// discardedOutcome is the outcome of the invocation after which recs were discarded.
func (r *reader) discardedOutcome() string {
	if r.p.dest != nil {
		return OutcomeSentToDestination
	}
	return OutcomeDropped
}
