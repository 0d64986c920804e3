package poller

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/kinesis-esm/esm/filter"
	"github.com/kinesis-esm/esm/internal/epoch"
	"github.com/kinesis-esm/esm/kpl"
	"github.com/kinesis-esm/esm/source"
)

// eventEncoder renders batches as the JSON event Lambda sends for Kinesis (events.KinesisEvent),
// appending straight into a reusable buffer. The fields of one record are in the order AWS's
// documentation shows them; the values are byte-for-byte what aws-lambda-go's types marshal to,
// which the golden tests check.
type eventEncoder struct {
	// tail is everything after eventID that is the same for every record of the mapping.
	tail []byte
	// deaggregate expands KPL aggregates into their user records (enhanced fan-out, as Lambda
	// does), leaving out those whose partition key differs from the aggregate's. An encoder is
	// shared by the mapping's readers: it holds no other state.
	deaggregate bool
	// filters are the mapping's FilterCriteria (nil: none): with deaggregate, they apply to each
	// user record of an aggregate.
	filters *filter.Filters
}

// newEventEncoder returns the encoder of a mapping's events; deaggregate is true for a mapping that
// reads through an enhanced fan-out consumer.
func newEventEncoder(streamARN, region, invokeIdentityARN string, deaggregate bool, filters *filter.Filters) *eventEncoder {
	var t []byte
	t = append(t, `,"eventName":"aws:kinesis:record","invokeIdentityArn":`...)
	t = appendJSONString(t, invokeIdentityARN)
	t = append(t, `,"awsRegion":`...)
	t = appendJSONString(t, region)
	t = append(t, `,"eventSourceARN":`...)
	t = appendJSONString(t, streamARN)
	t = append(t, '}')
	return &eventEncoder{tail: t, deaggregate: deaggregate, filters: filters}
}

const (
	eventHead = `{"Records":[`
	eventEnd  = `]}`
)

// appendRecord appends one record object.
func (e *eventEncoder) appendRecord(b []byte, shardID string, r *source.Record) []byte {
	return e.appendRecordData(b, shardID, r, true)
}

// appendRecordData appends one record object, and with data false leaves out the base64 of its
// data (base64.StdEncoding.EncodedLen(len(r.Data)) bytes) from it.
func (e *eventEncoder) appendRecordData(b []byte, shardID string, r *source.Record, data bool) []byte {
	b = append(b, `{"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":`...)
	b = appendJSONString(b, r.PartitionKey)
	b = append(b, `,"sequenceNumber":`...)
	b = appendJSONString(b, r.SequenceNumber)
	b = append(b, `,"data":"`...)
	if data {
		b = base64.StdEncoding.AppendEncode(b, r.Data)
	}
	b = append(b, `","approximateArrivalTimestamp":`...)
	b = appendEpochSeconds(b, r.ArrivalTime)
	b = append(b, `},"eventSource":"aws:kinesis","eventVersion":"1.0","eventID":`...)
	b = append(b, '"')
	b = appendJSONChars(b, shardID)
	b = append(b, ':')
	b = appendJSONChars(b, r.SequenceNumber)
	b = append(b, '"')
	return append(b, e.tail...)
}

// encodeBatch renders the longest prefix of recs, at most maxRecords records, whose event fits in
// maxBytes, into buf (reused). It always takes at least one record: a single record whose event is
// larger than maxBytes comes back alone, and the caller must check len(payload).
func (e *eventEncoder) encodeBatch(buf []byte, shardID string, recs []source.Record, maxRecords, maxBytes int) (payload []byte, n int) {
	payload, _, n = e.batch(buf, shardID, recs, maxRecords, maxBytes, true)
	return payload, n
}

// sizeBatch is encodeBatch without the event: the len(payload) and n it gives, computed without
// the base64 of the records' data (scratch, reused, holds the rest of one record at a time).
func (e *eventEncoder) sizeBatch(scratch []byte, shardID string, recs []source.Record, maxRecords, maxBytes int) (scratchOut []byte, size, n int) {
	return e.batch(scratch, shardID, recs, maxRecords, maxBytes, false)
}

// batch is encodeBatch, and with data false sizeBatch: size is the event's length either way.
// n counts Kinesis records: an aggregate that deaggregate expands is taken whole or not at all.
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
			b = e.appendRecordData(b, shardID, r, data)
			if !data {
				grown += len(b) - from + base64.StdEncoding.EncodedLen(len(r.Data))
				b = b[:from]
			}
			written++
		}
		if users, ok := e.userRecords(&recs[n]); ok {
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

// expand is recs as the event holds them: with every aggregate replaced by its user records (see
// userRecords). It returns recs itself when nothing changes.
func (e *eventEncoder) expand(recs []source.Record) []source.Record {
	if !e.deaggregate {
		return recs
	}
	var out []source.Record
	for i := range recs {
		users, ok := e.userRecords(&recs[i])
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

// userRecords is what one Kinesis record becomes in the event when the encoder de-aggregates
// and it is a KPL aggregate (ok): its user records whose partition key is the aggregate's, each
// with the aggregate's sequence number and arrival time (Lambda documents no sub-sequence number
// in its event). A record that is not an aggregate, or a malformed one, stays as it is (!ok).
func (e *eventEncoder) userRecords(r *source.Record) (users []source.Record, ok bool) {
	if !e.deaggregate || !kpl.IsAggregated(r.Data) {
		return nil, false
	}
	decoded, err := kpl.Decode(r.Data)
	if err != nil {
		return nil, false
	}
	users = make([]source.Record, 0, len(decoded))
	for _, u := range decoded {
		if u.PartitionKey != r.PartitionKey {
			continue
		}
		user := source.Record{PartitionKey: r.PartitionKey, SequenceNumber: r.SequenceNumber,
			ArrivalTime: r.ArrivalTime, Data: u.Data}
		if e.filters == nil || e.filters.Match(filterRecord(&user)) {
			users = append(users, user)
		}
	}
	return users, true
}

// match applies the mapping's FilterCriteria to one Kinesis record: to the record itself, or,
// for an aggregate the encoder de-aggregates, to its user records (it matches when one does, and
// the event holds only those).
func (e *eventEncoder) match(rec *source.Record) bool {
	if users, ok := e.userRecords(rec); ok {
		return len(users) > 0
	}
	return e.filters == nil || e.filters.Match(filterRecord(rec))
}

// filterRecord is what FilterCriteria see of a record.
func filterRecord(rec *source.Record) filter.Record {
	return filter.Record{Data: rec.Data, PartitionKey: rec.PartitionKey, SequenceNumber: rec.SequenceNumber,
		ApproximateArrivalTimestamp: rec.ArrivalTime}
}

// appendEpochSeconds writes the arrival time as Lambda's event does: a JSON number of seconds
// with Kinesis' milliseconds (internal/epoch), 0 without a time (zero).
func appendEpochSeconds(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, '0')
	}
	return epoch.AppendSeconds(b, t)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped as encoding/json escapes it (including its
// HTML-safe escapes of <, > and &), so the bytes match what a Go Lambda runtime produces.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendJSONChars(b, s)
	return append(b, '"')
}

// appendJSONChars appends s escaped for use inside a JSON string, without the quotes.
func appendJSONChars(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}
