package poller

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/source"
)

// RecordsInvoker is an Invoker that can also take a batch as the events.KinesisEvent a Go
// handler receives, without JSON: the in-process invoker of a Kinesis handler
// (invoke/inprocess). When the mapping's Invoker implements it and TakesRecords, a batch without
// a tumbling window skips the event's JSON and its data's base64 both ways: the poller builds the
// struct that aws-lambda-go's decoding of the event's JSON would give, field for field, and
// still cuts the batch at the same 6 MB of JSON (eventEncoder.sizeBatch).
type RecordsInvoker interface {
	// TakesRecords reports whether InvokeRecords may be used instead of Invoke.
	TakesRecords() bool
	// InvokeRecords is Invoke with the event as the struct; the handler may keep or change it.
	InvokeRecords(ctx context.Context, e *events.KinesisEvent) (invoke.Response, error)
}

// CheckInvoker refuses an invoker that is a Go handler of Kinesis events (a RecordsInvoker that
// TakesRecords: the in-process invoker of a handler with a Kinesis signature) for a source whose
// events are not Kinesis' (no KinesisEvents: a DynamoDB stream's events.DynamoDBEvent), which it
// would decode into empty Kinesis records. New checks it; a runner can check it before it opens
// anything. The error is a *ValidationError of the field Invoker.
func CheckInvoker(src Source, inv Invoker) error {
	d, ok := inv.(RecordsInvoker)
	if _, kinesis := src.(KinesisEvents); kinesis || !ok || !d.TakesRecords() {
		return nil
	}
	return &ValidationError{Field: "Invoker", Message: fmt.Sprintf("the function is a Go handler of Kinesis events (events.KinesisEvent) in esm's process, "+
		"and %s sends %s events: give a handler of them as an exec:, HTTP or lambda: function", src.Identity().ARN, src.Identity().EventSource)}
}

// direct is the mapping's RecordsInvoker, or nil when batches go to the function as JSON: always
// for a source that does not build the struct (KinesisEvents).
func (r *reader) direct() RecordsInvoker {
	if r.windowed() || r.p.structs == nil { // a time window event: always JSON
		return nil
	}
	if d, ok := r.p.inv.(RecordsInvoker); ok && d.TakesRecords() {
		return d
	}
	return nil
}

// batch is encode for the first invocation of a batch, from deliver and the slots. Without a
// RecordsInvoker it is encode. With one the event is never materialized: it returns a stand-in
// whose length is the event's (process checks it against MaxPayloadBytes) and whose content is
// meaningless, since invokeBatch does not read it; an event too large for one invocation comes
// back nil, so that process encodes it and finds it too large.
func (r *reader) batch(buf []byte, recs []source.Record, maxRecords, maxBytes int) ([]byte, int) {
	if r.direct() == nil {
		return r.encode(buf, recs, maxRecords, maxBytes)
	}
	buf, size, n := r.p.enc.sizeBatch(buf, r.shardID, recs, maxRecords, maxBytes)
	if size > MaxPayloadBytes {
		return nil, n
	}
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	return buf[:size], n
}

// invokeBatch invokes the function with the batch recs, whose event is payload (from encode, or
// batch's stand-in): as the struct with a RecordsInvoker, else as payload.
func (r *reader) invokeBatch(ctx context.Context, recs []source.Record, payload []byte) (invoke.Response, error) {
	if d := r.direct(); d != nil {
		return d.InvokeRecords(ctx, r.kinesisEvent(recs))
	}
	return r.p.inv.Invoke(ctx, payload)
}

// kinesisEvent is the events.KinesisEvent of recs that a RecordsInvoker takes: the source builds
// it (KinesisEvents) for the records the event holds.
func (r *reader) kinesisEvent(recs []source.Record) *events.KinesisEvent {
	return r.p.structs.KinesisEvent(r.shardID, r.p.enc.expand(recs))
}
