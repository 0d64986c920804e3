package poller

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/internal/epoch"
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

// direct is the mapping's RecordsInvoker, or nil when batches go to the function as JSON.
func (r *reader) direct() RecordsInvoker {
	if r.windowed() { // a KinesisTimeWindowEvent: always JSON
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

// kinesisEvent is the events.KinesisEvent that aws-lambda-go decodes from the JSON eventEncoder
// writes for recs, built fresh (the handler may change it): every string as it comes out of
// JSON (jsonText), data copied into slices of its own, the arrival time through the float64 of
// seconds that SecondsEpochTime marshals and unmarshals, encryptionType empty as the encoder
// leaves it out. TestDirectEventMatchesJSON and FuzzDirectEvent check it is deep-equal.
func (r *reader) kinesisEvent(recs []source.Record) *events.KinesisEvent {
	recs = r.p.enc.expand(recs)
	region, source, identity := jsonText(r.p.id.Region), jsonText(r.p.id.ARN), jsonText(r.p.id.InvokeIdentityARN)
	shard := jsonText(r.shardID)
	dataLen, idLen := 0, 0
	for i := range recs {
		dataLen += len(recs[i].Data)
		idLen += len(shard) + 1 + len(jsonText(recs[i].SequenceNumber))
	}
	// One allocation for every record's data and one for every eventID: each record's Data has
	// its own capacity, so an append to one never writes into the next.
	data := make([]byte, dataLen)
	var ids strings.Builder
	ids.Grow(idLen)
	for i := range recs {
		ids.WriteString(shard)
		ids.WriteByte(':')
		ids.WriteString(jsonText(recs[i].SequenceNumber))
	}
	idText := ids.String()
	out := make([]events.KinesisEventRecord, len(recs))
	for i := range recs {
		rec := &recs[i]
		seq := jsonText(rec.SequenceNumber)
		idEnd := len(shard) + 1 + len(seq)
		d := data[:len(rec.Data):len(rec.Data)]
		data = data[len(rec.Data):]
		copy(d, rec.Data)
		out[i] = events.KinesisEventRecord{
			AwsRegion:         region,
			EventID:           idText[:idEnd],
			EventName:         "aws:kinesis:record",
			EventSource:       "aws:kinesis",
			EventSourceArn:    source,
			EventVersion:      "1.0",
			InvokeIdentityArn: identity,
			Kinesis: events.KinesisRecord{
				ApproximateArrivalTimestamp: arrivalTime(rec.ArrivalTime),
				Data:                        d,
				PartitionKey:                jsonText(rec.PartitionKey),
				SequenceNumber:              seq,
				KinesisSchemaVersion:        "1.0",
			},
		}
		idText = idText[idEnd:]
	}
	return &events.KinesisEvent{Records: out}
}

// arrivalTime is the arrival time as events.SecondsEpochTime unmarshals the seconds
// appendEpochSeconds writes (0 without a time): strconv's shortest form parses back to the same
// float64, which is then split into seconds and nanoseconds as UnmarshalJSON splits it.
func arrivalTime(t time.Time) events.SecondsEpochTime {
	var seconds float64
	if !t.IsZero() {
		seconds = epoch.Seconds(t)
	}
	sec := int64(seconds)
	nsec := int64((seconds - float64(sec)) * float64(time.Second))
	return events.SecondsEpochTime{Time: time.Unix(sec, nsec)}
}

// jsonText is s as encoding/json decodes it from what appendJSONChars writes for it: itself,
// but for each byte that is not valid UTF-8, which is written (and so decoded) as U+FFFD.
func jsonText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
