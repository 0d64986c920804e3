package poller

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/source"
)

// Giving up on records: the failure record that describes them, its delivery to the on-failure
// destination, and the checkpoint past them (DESIGN.md, "Failure rules").

// Conditions of an on-failure record, as Lambda names them.
const (
	ConditionRetryAttemptsExhausted = "RetryAttemptsExhausted"
	ConditionRecordAgeExceeded      = "RecordAgeExceeded"
)

// FailureRecord describes a contiguous run of records of one shard that the mapping gave up on.
// The dlq package renders it as Lambda's on-failure message.
type FailureRecord struct {
	// Condition is ConditionRetryAttemptsExhausted or ConditionRecordAgeExceeded.
	Condition string
	// RequestID identifies the failure record (requestContext.requestId).
	RequestID   string
	FunctionARN string
	// ApproximateInvokeCount is how often these records were invoked (at least 1).
	ApproximateInvokeCount int
	// Response is the last invocation's outcome; nil for RecordAgeExceeded, whose message has no
	// responseContext.
	Response *FailureResponse
	// Timestamp is when the records were discarded.
	Timestamp time.Time

	StreamARN                              string
	ShardID                                string
	StartSequenceNumber, EndSequenceNumber string
	FirstArrival, LastArrival              time.Time
	BatchSize                              int
	// Payload is the event the function received (or would have) for these records; only an S3
	// destination stores it.
	Payload []byte
}

// FailureResponse is the responseContext of an on-failure record.
type FailureResponse struct {
	StatusCode      int
	ExecutedVersion string
	// FunctionError is "Unhandled" when the function failed, "" (null in the message) when it
	// returned normally but the batch still failed (partial or invalid batch response).
	FunctionError string
}

// Destination receives on-failure records (DestinationConfig.OnFailure). Deliver must be
// idempotent enough to be retried: the poller retries a failed delivery, blocking the shard, until
// it succeeds, because a record that was neither handled nor delivered is never checkpointed.
type Destination interface {
	Deliver(ctx context.Context, f FailureRecord) error
}

// discard gives up on recs: their failure record goes to the on-failure destination, then the
// checkpoint moves past them. A delivery that fails is retried, blocking the shard, until it
// succeeds; with OnDestinationFailure drop, the records are dropped instead, as Lambda drops them.
func (r *reader) discard(runCtx, workCtx context.Context, recs []source.Record, condition string, invokes int, resp *FailureResponse, requestID string) error {
	if requestID == "" { // never invoked: the failure record gets its own id
		requestID = uuid.NewString()
	}
	f := FailureRecord{
		Condition: condition, RequestID: requestID, FunctionARN: r.p.functionARN,
		ApproximateInvokeCount: invokes, Response: resp, Timestamp: r.p.now().UTC(),
		StreamARN: r.p.id.ARN, ShardID: r.shardID,
		StartSequenceNumber: recs[0].SequenceNumber, EndSequenceNumber: recs[len(recs)-1].SequenceNumber,
		BatchSize: len(recs),
	}
	if at := recs[0].ArrivalTime; !at.IsZero() {
		f.FirstArrival = at.UTC()
	}
	if at := recs[len(recs)-1].ArrivalTime; !at.IsZero() {
		f.LastArrival = at.UTC()
	}
	log := r.p.log.With("shard_id", r.shardID, "condition", condition, "batch_size", len(recs),
		"seq_first", f.StartSequenceNumber, "seq_last", f.EndSequenceNumber, "invocations", invokes)
	if r.p.dest == nil {
		log.Warn("records discarded (no on-failure destination)")
		r.p.obs.RecordsDropped(r.shardID, len(recs))
	} else if err := r.deliverFailure(runCtx, workCtx, f, recs, log); err != nil {
		return err
	}
	return r.ackDiscarded(workCtx, recs)
}

// deliverFailure sends the failure record of recs to the on-failure destination, retrying a
// delivery that fails until it succeeds (the shard waits) or, with OnDestinationFailure drop,
// dropping the records instead.
func (r *reader) deliverFailure(runCtx, workCtx context.Context, f FailureRecord, recs []source.Record, log *slog.Logger) (err error) {
	f.Payload, _ = r.encode(nil, recs, len(recs), MaxPayloadBytes*2)
	bo := r.p.retryPace(r.shardID + " failure record " + firstSeq(recs))
	delivered := false
	var s stall
	defer func() { r.ended(&s, err == nil) }()
	err = retry(runCtx, &bo, func(int) (step, error) {
		err := r.p.dest.Deliver(workCtx, f)
		switch {
		case err == nil:
			delivered = true
			return stepDone, nil
		case errors.Is(err, context.Canceled) && workCtx.Err() != nil:
			return stepDone, errStopped
		}
		r.p.obs.DestinationDeliveryFailed(r.shardID)
		if r.p.cfg.OnDestinationFailure == DestinationFailureDrop {
			log.Error("on-failure destination unreachable; records dropped (on-destination-failure drop)", "destination", r.p.cfg.OnFailureDestination, "err", err)
			r.p.obs.RecordsDropped(r.shardID, len(recs))
			return stepDone, nil
		}
		log.Warn("on-failure destination unreachable; retrying, the shard waits", "err", err)
		r.stalled(&s, f.StartSequenceNumber, f.EndSequenceNumber, "on-failure destination unreachable: "+err.Error())
		return stepRetry, err
	}, nil)
	if err == nil && delivered {
		log.Info("records sent to the on-failure destination", "destination", r.p.cfg.OnFailureDestination)
		r.p.obs.RecordsDelivered(r.shardID, len(recs))
	}
	return err
}
