package kinesis

import (
	"encoding/base64"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/internal/epoch"
	"github.com/kinesis-esm/esm/internal/jsontext"
	"github.com/kinesis-esm/esm/kpl"
	"github.com/kinesis-esm/esm/source"
)

// The event Lambda sends for a Kinesis stream (events.KinesisEvent): the Stream says how each of
// its records appears in the event's Records array (poller.Events), and builds the struct a Go
// handler in the same process takes (poller.KinesisEvents). The fields of one record are in the
// order AWS's documentation shows them; the values are byte for byte what aws-lambda-go's types
// marshal to, which the engine's golden tests check. Through a consumer a KPL aggregate stands for
// its user records, as Lambda de-aggregates them for enhanced fan-out.

// eventTail is everything after eventID that is the same for every record of the stream's events.
func eventTail(id source.Identity) []byte {
	var t []byte
	t = append(t, `,"eventName":"aws:kinesis:record","invokeIdentityArn":`...)
	t = jsontext.AppendString(t, id.InvokeIdentityARN)
	t = append(t, `,"awsRegion":`...)
	t = jsontext.AppendString(t, id.Region)
	t = append(t, `,"eventSourceARN":`...)
	t = jsontext.AppendString(t, id.ARN)
	return append(t, '}')
}

// AppendEventRecord appends rec's object in the event's Records array for the shard shardID. With
// data false it leaves out the base64 of rec's data and returns its length, so that an event is
// sized without being written.
func (s *Stream) AppendEventRecord(b []byte, shardID string, rec *source.Record, data bool) ([]byte, int) {
	b = append(b, `{"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":`...)
	b = jsontext.AppendString(b, rec.PartitionKey)
	b = append(b, `,"sequenceNumber":`...)
	b = jsontext.AppendString(b, rec.SequenceNumber)
	b = append(b, `,"data":"`...)
	omitted := 0
	if data {
		b = base64.StdEncoding.AppendEncode(b, rec.Data)
	} else {
		omitted = base64.StdEncoding.EncodedLen(len(rec.Data))
	}
	b = append(b, `","approximateArrivalTimestamp":`...)
	b = appendEpochSeconds(b, rec.ArrivalTime)
	b = append(b, `},"eventSource":"aws:kinesis","eventVersion":"1.0","eventID":`...)
	b = append(b, '"')
	b = jsontext.AppendChars(b, shardID)
	b = append(b, ':')
	b = jsontext.AppendChars(b, rec.SequenceNumber)
	b = append(b, '"')
	return append(b, s.tail...), omitted
}

// appendEpochSeconds writes the arrival time as Lambda's event does: a JSON number of seconds
// with Kinesis' milliseconds (internal/epoch), 0 without a time (zero).
func appendEpochSeconds(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, '0')
	}
	return epoch.AppendSeconds(b, t)
}

// EventRecords are the records rec stands for in the event when that is not rec itself (ok): read
// through a consumer, a KPL aggregate is its user records whose partition key is the aggregate's,
// each with the aggregate's sequence number and arrival time (Lambda documents no sub-sequence
// number in its event). A record that is not an aggregate, a malformed one, or any record of a
// polled stream stands for itself (!ok).
func (s *Stream) EventRecords(rec *source.Record) (users []source.Record, ok bool) {
	if s.consumer == "" || !kpl.IsAggregated(rec.Data) {
		return nil, false
	}
	decoded, err := kpl.Decode(rec.Data)
	if err != nil {
		return nil, false
	}
	users = make([]source.Record, 0, len(decoded))
	for _, u := range decoded {
		if u.PartitionKey == rec.PartitionKey {
			users = append(users, source.Record{PartitionKey: rec.PartitionKey, SequenceNumber: rec.SequenceNumber,
				ArrivalTime: rec.ArrivalTime, Data: u.Data})
		}
	}
	return users, true
}

// KinesisEvent is the events.KinesisEvent that aws-lambda-go decodes from the JSON of recs's
// objects (AppendEventRecord) for the shard shardID, built fresh (the handler may change it):
// every string as it comes out of JSON (jsontext.Decoded), data copied into slices of its own, the
// arrival time through the float64 of seconds that SecondsEpochTime marshals and unmarshals,
// encryptionType empty as the event leaves it out. recs are the event's records (EventRecords'
// where an aggregate stands for its user records). The engine's TestDirectEventMatchesJSON and
// FuzzDirectEvent check it is deep-equal.
func (s *Stream) KinesisEvent(shardID string, recs []source.Record) *events.KinesisEvent {
	region, arn, identity := jsontext.Decoded(s.id.Region), jsontext.Decoded(s.id.ARN), jsontext.Decoded(s.id.InvokeIdentityARN)
	shard := jsontext.Decoded(shardID)
	dataLen, idLen := 0, 0
	for i := range recs {
		dataLen += len(recs[i].Data)
		idLen += len(shard) + 1 + len(jsontext.Decoded(recs[i].SequenceNumber))
	}
	// One allocation for every record's data and one for every eventID: each record's Data has
	// its own capacity, so an append to one never writes into the next.
	data := make([]byte, dataLen)
	var ids strings.Builder
	ids.Grow(idLen)
	for i := range recs {
		ids.WriteString(shard)
		ids.WriteByte(':')
		ids.WriteString(jsontext.Decoded(recs[i].SequenceNumber))
	}
	idText := ids.String()
	out := make([]events.KinesisEventRecord, len(recs))
	for i := range recs {
		rec := &recs[i]
		seq := jsontext.Decoded(rec.SequenceNumber)
		idEnd := len(shard) + 1 + len(seq)
		d := data[:len(rec.Data):len(rec.Data)]
		data = data[len(rec.Data):]
		copy(d, rec.Data)
		out[i] = events.KinesisEventRecord{
			AwsRegion: region, EventID: idText[:idEnd], EventName: "aws:kinesis:record", EventSource: EventSource,
			EventSourceArn: arn, EventVersion: "1.0", InvokeIdentityArn: identity,
			Kinesis: events.KinesisRecord{
				ApproximateArrivalTimestamp: arrivalTime(rec.ArrivalTime),
				Data:                        d,
				PartitionKey:                jsontext.Decoded(rec.PartitionKey),
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
