package inprocess

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// The fast path for Kinesis handlers. aws-lambda-go decodes an event with encoding/json, by
// reflection, which costs more than everything else esm does per record. For a handler of a
// Kinesis signature, Invoke decodes the event itself when the payload is in the subset of JSON
// that esm's poller writes (no whitespace, no escapes in strings, only the keys of
// events.KinesisEvent, spelled as its tags spell them), and calls the handler directly. Within
// that subset every step is the one encoding/json takes: a string is its bytes, data is
// base64.StdEncoding-decoded into a fresh slice, the arrival time is parsed as a float64 and
// turned into a time as events.SecondsEpochTime does, and an empty array is an empty, non-nil
// slice. Anything outside the subset (escapes, whitespace, null, other keys, invalid UTF-8,
// trailing bytes) falls back to aws-lambda-go. TestFastDecodeMatchesAWSLambdaGo and
// FuzzFastDecode check the struct is deep-equal to aws-lambda-go's.

// kinesisHandler is a Kinesis handler called directly: the event in, its encoded response out.
type kinesisHandler func(ctx context.Context, e events.KinesisEvent) ([]byte, error)

// kinesisHandlerOf returns the direct call of handler when it has a Kinesis signature, else nil.
func kinesisHandlerOf(handler any) kinesisHandler {
	switch f := handler.(type) {
	case func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error):
		return func(ctx context.Context, e events.KinesisEvent) ([]byte, error) {
			resp, err := f(ctx, e)
			if err != nil {
				return nil, err
			}
			return encodeResponse(resp)
		}
	case func(context.Context, events.KinesisEvent) error:
		return func(ctx context.Context, e events.KinesisEvent) ([]byte, error) {
			if err := f(ctx, e); err != nil {
				return nil, err
			}
			return []byte("null"), nil // what aws-lambda-go encodes for a handler without a result
		}
	}
	return nil
}

// encodeResponse encodes a response as aws-lambda-go does: encoding/json without HTML escaping,
// without the encoder's trailing newline.
func encodeResponse(resp events.KinesisEventResponse) ([]byte, error) {
	if resp.BatchItemFailures == nil {
		return []byte(`{"batchItemFailures":null}`), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		return nil, err
	}
	return buf.Bytes()[:buf.Len()-1], nil
}

// decodeKinesisEvent decodes payload when it is in the fast path's subset of JSON; ok is false
// otherwise, and the payload must then go through aws-lambda-go.
func decodeKinesisEvent(payload []byte) (e events.KinesisEvent, ok bool) {
	const head, end = `{"Records":[`, `]}`
	if !bytes.HasPrefix(payload, []byte(head)) || !bytes.HasSuffix(payload, []byte(end)) {
		return e, false
	}
	d := decoder{b: payload[:len(payload)-len(end)], i: len(head)}
	e.Records = make([]events.KinesisEventRecord, 0, bytes.Count(payload, []byte(`{"kinesis":`)))
	if d.i == len(d.b) {
		return e, true // "Records":[] is an empty, non-nil slice, as encoding/json makes it
	}
	for {
		e.Records = append(e.Records, events.KinesisEventRecord{})
		r := &e.Records[len(e.Records)-1]
		if !d.record(r) {
			return e, false
		}
		d.prev = r
		if d.i == len(d.b) {
			return e, true
		}
		if !d.byte(',') {
			return e, false
		}
	}
}

// decoder reads the fast path's subset of JSON from b, at i.
type decoder struct {
	b []byte
	i int
	// prev is the record decoded last: strings equal to its own are shared rather than copied
	// (the same value either way).
	prev *events.KinesisEventRecord
}

func (d *decoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// raw reads a string without escapes or control characters, in valid UTF-8, and returns its
// bytes (which are then its value).
func (d *decoder) raw() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.i
	ascii := true
	for ; d.i < len(d.b); d.i++ {
		switch c := d.b[d.i]; {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(s) {
				return nil, false // encoding/json would replace the invalid bytes
			}
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// str reads a string; same is the previous record's value of the same field.
func (d *decoder) str(dst *string, same func(*events.KinesisEventRecord) string) bool {
	s, ok := d.raw()
	if !ok {
		return false
	}
	if d.prev != nil {
		if p := same(d.prev); string(s) == p {
			*dst = p
			return true
		}
	}
	*dst = string(s)
	return true
}

// key reads an object key and its colon.
func (d *decoder) key() ([]byte, bool) {
	k, ok := d.raw()
	return k, ok && d.byte(':')
}

// object reads an object whose every member field reads; it is called with each key.
func (d *decoder) object(field func(key []byte) bool) bool {
	if !d.byte('{') {
		return false
	}
	if d.byte('}') {
		return true
	}
	for {
		k, ok := d.key()
		if !ok || !field(k) {
			return false
		}
		if d.byte('}') {
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

func (d *decoder) record(r *events.KinesisEventRecord) bool {
	return d.object(func(k []byte) bool {
		switch string(k) {
		case "kinesis":
			return d.kinesis(&r.Kinesis)
		case "eventSource":
			return d.str(&r.EventSource, func(p *events.KinesisEventRecord) string { return p.EventSource })
		case "eventVersion":
			return d.str(&r.EventVersion, func(p *events.KinesisEventRecord) string { return p.EventVersion })
		case "eventID":
			return d.str(&r.EventID, func(p *events.KinesisEventRecord) string { return p.EventID })
		case "eventName":
			return d.str(&r.EventName, func(p *events.KinesisEventRecord) string { return p.EventName })
		case "invokeIdentityArn":
			return d.str(&r.InvokeIdentityArn, func(p *events.KinesisEventRecord) string { return p.InvokeIdentityArn })
		case "awsRegion":
			return d.str(&r.AwsRegion, func(p *events.KinesisEventRecord) string { return p.AwsRegion })
		case "eventSourceARN":
			return d.str(&r.EventSourceArn, func(p *events.KinesisEventRecord) string { return p.EventSourceArn })
		}
		return false
	})
}

func (d *decoder) kinesis(k *events.KinesisRecord) bool {
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "kinesisSchemaVersion":
			return d.str(&k.KinesisSchemaVersion, func(p *events.KinesisEventRecord) string { return p.Kinesis.KinesisSchemaVersion })
		case "partitionKey":
			return d.str(&k.PartitionKey, func(p *events.KinesisEventRecord) string { return p.Kinesis.PartitionKey })
		case "sequenceNumber":
			return d.str(&k.SequenceNumber, func(p *events.KinesisEventRecord) string { return p.Kinesis.SequenceNumber })
		case "encryptionType":
			return d.str(&k.EncryptionType, func(p *events.KinesisEventRecord) string { return p.Kinesis.EncryptionType })
		case "data":
			// base64.StdEncoding.Decode refuses every byte an escaped, control or non-ASCII
			// string holds ('\\', < 0x20, >= 0x80) but for the CR and LF it skips, which JSON
			// does not allow raw in a string: the closing quote and those two are all there is
			// to look for.
			if !d.byte('"') {
				return false
			}
			n := bytes.IndexByte(d.b[d.i:], '"')
			if n < 0 {
				return false
			}
			s := d.b[d.i : d.i+n]
			d.i += n + 1
			if bytes.IndexByte(s, '\n') >= 0 || bytes.IndexByte(s, '\r') >= 0 {
				return false
			}
			// As encoding/json decodes a []byte: into a fresh slice of DecodedLen.
			b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
			n, err := base64.StdEncoding.Decode(b, s)
			if err != nil {
				return false
			}
			k.Data = b[:n]
			return true
		case "approximateArrivalTimestamp":
			return d.epochSeconds(&k.ApproximateArrivalTimestamp)
		}
		return false
	})
}

// epochSeconds reads a JSON number as events.SecondsEpochTime's UnmarshalJSON does: as a
// float64 (strconv.ParseFloat, as encoding/json), split into seconds and nanoseconds.
func (d *decoder) epochSeconds(t *events.SecondsEpochTime) bool {
	start := d.i
	if !d.number() {
		return false
	}
	epoch, err := strconv.ParseFloat(string(d.b[start:d.i]), 64)
	if err != nil {
		return false
	}
	sec := int64(epoch)
	nsec := int64((epoch - float64(sec)) * float64(time.Second))
	*t = events.SecondsEpochTime{Time: time.Unix(sec, nsec)}
	return true
}

// number reads a number of JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *decoder) number() bool {
	d.byte('-')
	switch {
	case d.byte('0'):
	case d.i < len(d.b) && d.b[d.i] >= '1' && d.b[d.i] <= '9':
		d.digits()
	default:
		return false
	}
	if d.byte('.') && !d.digits() {
		return false
	}
	if d.byte('e') || d.byte('E') {
		if !d.byte('+') {
			d.byte('-')
		}
		if !d.digits() {
			return false
		}
	}
	return true
}

// digits reads one or more decimal digits.
func (d *decoder) digits() bool {
	start := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}
