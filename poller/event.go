package poller

import (
	"github.com/kinesis-esm/esm/filter"
	"github.com/kinesis-esm/esm/internal/jsontext"
	"github.com/kinesis-esm/esm/source"
)

// eventEncoder renders batches as the JSON event the function is invoked with,
// {"Records":[…]}, appending straight into a reusable buffer. Each record's object in the array
// is the source's: what its Events capability writes (the Kinesis source: events.KinesisEvent's
// records), or, for a source without it, the record's Data as it is (DynamoDB Streams:
// events.DynamoDBEvent's records). An encoder is shared by the mapping's readers: it holds no
// state but the mapping's.
type eventEncoder struct {
	shape Events // nil: a record's Data is its object
	// filters are the mapping's FilterCriteria (nil: none): they apply to each record an
	// aggregate stands for (Events.EventRecords).
	filters *filter.Filters
}

// newEventEncoder returns the encoder of the events of a mapping that reads src with filters.
func newEventEncoder(src Source, filters *filter.Filters) *eventEncoder {
	shape, _ := src.(Events)
	return &eventEncoder{shape: shape, filters: filters}
}

const (
	eventHead = `{"Records":[`
	eventEnd  = `]}`
)

// appendRecord appends one record object.
func (e *eventEncoder) appendRecord(b []byte, shardID string, r *source.Record) []byte {
	b, _ = e.appendRecordData(b, shardID, r, true)
	return b
}

// appendRecordData appends one record object, and with data false leaves the record's payload
// out of it, returning the length it would have taken (omitted).
func (e *eventEncoder) appendRecordData(b []byte, shardID string, r *source.Record, data bool) (out []byte, omitted int) {
	switch {
	case e.shape != nil:
		return e.shape.AppendEventRecord(b, shardID, r, data)
	case data:
		return append(b, r.Data...), 0
	}
	return b, len(r.Data)
}

// encodeBatch renders the longest prefix of recs, at most maxRecords records, whose event fits in
// maxBytes, into buf (reused). It always takes at least one record: a single record whose event is
// larger than maxBytes comes back alone, and the caller must check len(payload).
func (e *eventEncoder) encodeBatch(buf []byte, shardID string, recs []source.Record, maxRecords, maxBytes int) (payload []byte, n int) {
	payload, _, n = e.batch(buf, shardID, recs, maxRecords, maxBytes, true)
	return payload, n
}

// sizeBatch is encodeBatch without the event: the len(payload) and n it gives, computed without
// the records' payloads (scratch, reused, holds the rest of one record at a time).
func (e *eventEncoder) sizeBatch(scratch []byte, shardID string, recs []source.Record, maxRecords, maxBytes int) (scratchOut []byte, size, n int) {
	return e.batch(scratch, shardID, recs, maxRecords, maxBytes, false)
}

// batch is encodeBatch, and with data false sizeBatch: size is the event's length either way.
// n counts the source's records: an aggregate that stands for several is taken whole or not at
// all.
func (e *eventEncoder) batch(buf []byte, shardID string, recs []source.Record, maxRecords, maxBytes int, data bool) (payload []byte, size, n int) {
	b := append(buf[:0], eventHead...)
	size = len(b)
	objects := 0 // record objects written
	for n < len(recs) && n < maxRecords {
		mark, grown, written := len(b), 0, 0
		add := func(r *source.Record) {
			if objects+written > 0 {
				b = append(b, ',')
			}
			from := len(b)
			var omitted int
			b, omitted = e.appendRecordData(b, shardID, r, data)
			if !data {
				grown += len(b) - from + omitted
				b = b[:from]
			}
			written++
		}
		if users, ok := e.eventRecords(&recs[n]); ok {
			for i := range users {
				add(&users[i])
			}
		} else {
			add(&recs[n])
		}
		if data {
			grown = len(b) - mark
		} else {
			grown += len(b) - mark // the separators
			b = b[:mark]
		}
		if n > 0 && size+grown+len(eventEnd) > maxBytes {
			b = b[:mark]
			break
		}
		size += grown
		objects += written
		n++
	}
	return append(b, eventEnd...), size + len(eventEnd), n
}

// expand is recs as the event holds them: with every record that stands for others replaced by
// them (see eventRecords). It returns recs itself when nothing changes.
func (e *eventEncoder) expand(recs []source.Record) []source.Record {
	if e.shape == nil {
		return recs
	}
	var out []source.Record
	for i := range recs {
		users, ok := e.eventRecords(&recs[i])
		if ok && out == nil {
			out = append(make([]source.Record, 0, len(recs)+len(users)), recs[:i]...)
		}
		switch {
		case ok:
			out = append(out, users...)
		case out != nil:
			out = append(out, recs[i])
		}
	}
	if out == nil {
		return recs
	}
	return out
}

// eventRecords is what one record becomes in the event when it stands for other records (ok: a
// KPL aggregate the Kinesis source de-aggregates): those of them the filters pass. A record that
// stands for itself gives !ok.
func (e *eventEncoder) eventRecords(r *source.Record) (users []source.Record, ok bool) {
	if e.shape == nil {
		return nil, false
	}
	users, ok = e.shape.EventRecords(r)
	if !ok || e.filters == nil {
		return users, ok
	}
	kept := users[:0]
	for i := range users {
		if e.filters.Match(filterRecord(&users[i])) {
			kept = append(kept, users[i])
		}
	}
	return kept, true
}

// match applies the mapping's FilterCriteria to one record: to the record itself, or, for a
// record that stands for others, to each of them (it matches when one does, and the event holds
// only those). A source's records are matched as the filter package's Record (data decoded as
// JSON under "data": Kinesis), or, for a source without Events, their Data as the event's record
// object (MatchDocument: DynamoDB Streams).
func (e *eventEncoder) match(rec *source.Record) bool {
	switch users, ok := e.eventRecords(rec); {
	case ok:
		return len(users) > 0
	case e.filters == nil:
		return true
	case e.shape == nil:
		return e.filters.MatchDocument(rec.Data)
	}
	return e.filters.Match(filterRecord(rec))
}

// filterRecord is what FilterCriteria see of a record of a source with Events.
func filterRecord(rec *source.Record) filter.Record {
	return filter.Record{Data: rec.Data, PartitionKey: rec.PartitionKey, SequenceNumber: rec.SequenceNumber,
		ApproximateArrivalTimestamp: rec.ArrivalTime}
}

// appendJSONString appends s as a JSON string, as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte { return jsontext.AppendString(b, s) }
