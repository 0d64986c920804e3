package getrecords

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net/http"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/eventstream"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

// The events of an enhanced fan-out subscription. A SubscribeToShard call answers with an event
// stream on one response body, open for up to five minutes, and an idle shard's stream carries a
// keep-alive event every few seconds that says nothing but where the subscription stands:
// {"ContinuationSequenceNumber":"…","MillisBehindLatest":0,"Records":[]}. The SDK reads the body
// with two goroutines of its own per subscription (its event-stream reader, and the pipe to the
// operation's typed channel), and decodes every message into fresh headers and buffers; the
// caller takes each event from that channel, two hand-offs between goroutines later.
//
// Take leaves the call itself to the SDK (its request, signing, retries, and the decoding of an
// error answer) and takes the stream's body from the SDK's reader once the call has been
// answered: the SDK's reader gets the stream's initial response and then its end, and the caller
// reads the events from the body itself, on its own goroutine (EventStream.Next). A message Next
// reads whole, with both checksums right, that is an idle shard's event (the headers Kinesis
// sends, a payload decodeEvent takes) is decoded where it was read; anything else (records, the
// shard's end, an exception, an error message, an unknown event, a message the reader does not
// take whole, a failed read) goes to the SDK's own protocol, from the bytes read so far followed by
// the rest of the body or the read's error, so its events and errors are the SDK's.
//
// Kinesis starts a stream with its initial response; kinesis-local and LocalStack start directly
// with the first event. Take reads the first message when the call is answered, and gives the SDK
// that message when it is the initial response, or an empty initial response of its own when it is
// not (the message is then Next's first).

// Take takes the event stream of one SubscribeToShard call from the SDK's reader. Give its Option
// to the call, as its last option, and after a call that succeeded read the events from Stream.
// A nil Stream means that the events stayed with the SDK: on the output's event stream. A Take is
// for one call, on the calling goroutine.
type Take struct {
	stream *EventStream
}

// Option is the SubscribeToShard client option: it wraps the call's HTTP client.
func (t *Take) Option(o *kinesis.Options) {
	if o.HTTPClient != nil {
		o.HTTPClient = &taker{next: o.HTTPClient, t: t}
	}
}

// Stream is the call's event stream, or nil when the SDK kept it. After a call that failed, the
// caller closes a stream it got.
func (t *Take) Stream() *EventStream { return t.stream }

// taker is the HTTP client of one call.
type taker struct {
	next kinesis.HTTPClient
	t    *Take
}

// Do sends the request as the SDK's HTTP client does. A 2xx answer's body over HTTP/2 (as
// Kinesis serves SubscribeToShard) is taken: the SDK gets the stream's initial response (its own,
// or an empty one) and then the end of its stream. Over HTTP/1.1 (emulators on plain HTTP) the SDK
// keeps the stream.
func (h *taker) Do(req *http.Request) (*http.Response, error) {
	resp, err := h.next.Do(req)
	if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 || resp.ProtoMajor != 2 {
		return resp, err
	}
	if old := h.t.stream; old != nil { // the answer of an attempt the SDK did not take
		_ = old.Close()
		h.t.stream = nil
	}
	first, whole, err := readMessage(resp.Body, nil)
	initial, known := false, false
	if whole {
		var hs eventHeaders
		if known = hs.parse(first); known {
			initial = string(hs.messageType) == eventstream.EventMessageType && string(hs.eventType) == "initial-response"
		}
	}
	if !known { // the SDK reads the stream, from what was read
		resp.Body = &sdkBody{Reader: resume(first, whole, err, resp.Body), body: resp.Body}
		return resp, nil
	}
	st := &EventStream{body: resp.Body}
	if initial {
		resp.Body = io.NopCloser(bytes.NewReader(first))
	} else {
		st.pending = first
		resp.Body = io.NopCloser(bytes.NewReader(emptyInitialResponse))
	}
	h.t.stream = st
	return resp, nil
}

// sdkBody is a body left to the SDK: what was read of it, then the rest.
type sdkBody struct {
	io.Reader
	body io.Closer
}

func (b *sdkBody) Close() error { return b.body.Close() }

// emptyInitialResponse is the initial response Kinesis sends a SubscribeToShard subscription.
var emptyInitialResponse = func() []byte {
	msg := eventstream.Message{Payload: []byte("{}")}
	msg.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue(eventstream.EventMessageType))
	msg.Headers.Set(eventstream.EventTypeHeader, eventstream.StringValue("initial-response"))
	msg.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue("application/json"))
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, msg); err != nil {
		panic(err)
	}
	return b.Bytes()
}()

// EventStream is a subscription's event stream, read by its caller. Next is for one goroutine;
// Close may be called from any, and ends a Next that waits.
type EventStream struct {
	body    io.ReadCloser
	pending []byte // the first message, when it was not the initial response
	buf     []byte // the last message read whole, reused
	sdk     *awsjson.Protocol
	// cont is the continuation of the last idle event, whose string the next one reuses when it
	// is the same (an idle shard's stays the same).
	cont      string
	closeOnce sync.Once
}

// Next returns the stream's next event as the SDK's event stream hands it over: a
// *types.SubscribeToShardEventStreamMemberSubscribeToShardEvent or a *types.UnknownUnionMember.
// It returns io.EOF at the stream's clean end, and the SDK's error for anything else (an
// exception, an error message, a failed read, a message that does not decode).
func (s *EventStream) Next() (types.SubscribeToShardEventStream, error) {
	for {
		var msg []byte
		var whole bool
		var err error
		if s.pending != nil {
			msg, whole, s.pending = s.pending, true, nil
		} else {
			msg, whole, err = readMessage(s.body, s.buf[:0])
			if cap(msg) <= keptBuffer {
				s.buf = msg[:0]
			} else {
				s.buf = nil
			}
		}
		if whole {
			if ev, ok := s.decode(msg); ok {
				return ev, nil
			}
		}
		if s.sdk == nil {
			s.sdk = awsjson.New11(schemas.Kinesis_20131202)
		}
		v, err := s.sdk.DeserializeEventMessage(schemas.SubscribeToShardEventStream, kinesis.TypeRegistry, resume(msg, whole, err, s.body))
		if err != nil {
			return nil, err
		}
		switch v := v.(type) { // as the SDK's event stream does
		case *types.SubscribeToShardEvent:
			return &types.SubscribeToShardEventStreamMemberSubscribeToShardEvent{Value: *v}, nil
		case *eventstream.UnknownUnionMember:
			return &types.UnknownUnionMember{Tag: v.Tag, Value: v.Value}, nil
		}
	}
}

// Close closes the stream's body.
func (s *EventStream) Close() error {
	var err error
	s.closeOnce.Do(func() { err = s.body.Close() })
	return err
}

// resume is what the SDK's protocol reads after readMessage returned msg: the message itself, or
// what was read of it followed by the read's error, or by the rest of the body.
func resume(msg []byte, whole bool, err error, body io.Reader) io.Reader {
	switch {
	case whole:
		return bytes.NewReader(msg)
	case err != nil:
		return io.MultiReader(bytes.NewReader(msg), failing{err})
	default:
		return io.MultiReader(bytes.NewReader(msg), body)
	}
}

// failing is a reader that fails with err.
type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

// Message sizes. An event stream message starts with a prelude of its total length and its
// headers' length (4 bytes each) and the prelude's CRC-32, and ends with the message's CRC-32.
const (
	preludeLen = 12
	minMessage = preludeLen + 4
	// maxLeanMessage is the largest message readMessage reads whole; a longer one (records) the
	// SDK reads from the stream as it comes.
	maxLeanMessage = 1 << 20
	// keptBuffer is the largest buffer an EventStream keeps between messages.
	keptBuffer = 64 << 10
)

// readMessage reads one message from r, into buf. whole reports a message read to its end with
// both checksums right; otherwise msg is what was read of it and err the read's error (the rest
// is left in r when err is nil: a prelude readMessage does not take, a checksum that is wrong, a
// message longer than maxLeanMessage).
func readMessage(r io.Reader, buf []byte) (msg []byte, whole bool, err error) {
	msg = buf[:0]
	if msg, err = readN(r, msg, preludeLen); err != nil {
		return msg, false, err
	}
	total, headers := binary.BigEndian.Uint32(msg), binary.BigEndian.Uint32(msg[4:])
	if total < minMessage || total > maxLeanMessage || headers > total-minMessage ||
		crc32.ChecksumIEEE(msg[:8]) != binary.BigEndian.Uint32(msg[8:]) {
		return msg, false, nil
	}
	if msg, err = readN(r, msg, int(total)); err != nil {
		return msg, false, err
	}
	if crc32.ChecksumIEEE(msg[:total-4]) != binary.BigEndian.Uint32(msg[total-4:]) {
		return msg, false, nil
	}
	return msg, true, nil
}

// readN reads from r until b holds n bytes, and returns the reader's own error if it fails first.
func readN(r io.Reader, b []byte, n int) ([]byte, error) {
	b = slices.Grow(b, n-len(b))
	for len(b) < n {
		k, err := r.Read(b[len(b):n])
		b = b[:len(b)+k]
		if err != nil && len(b) < n {
			return b, err
		}
	}
	return b, nil
}

// eventHeaders are the headers of a message that readMessage read whole: the values of the
// string headers :message-type, :event-type and :content-type (in the message), and whether it
// has others.
type eventHeaders struct {
	messageType, eventType, contentType []byte
	others                              bool // other headers, or these with other types or more than once
}

// parse reads the headers of msg, a message read whole. It reports false for headers that do not
// decode.
func (h *eventHeaders) parse(msg []byte) bool {
	n := binary.BigEndian.Uint32(msg[4:])
	b := msg[preludeLen : preludeLen+n]
	var seen [3]bool
	for len(b) > 0 {
		nameLen := int(b[0])
		if len(b) < 2+nameLen {
			return false
		}
		name, kind := b[1:1+nameLen], b[1+nameLen]
		b = b[2+nameLen:]
		size, ok := headerValueSize(kind, b)
		if !ok {
			return false
		}
		value := b[:size]
		b = b[size:]
		var i int
		var into *[]byte
		switch string(name) {
		case eventstream.MessageTypeHeader:
			i, into = 0, &h.messageType
		case eventstream.EventTypeHeader:
			i, into = 1, &h.eventType
		case eventstream.ContentTypeHeader:
			i, into = 2, &h.contentType
		default:
			h.others = true
			continue
		}
		if seen[i] || kind != stringHeader {
			h.others = true
			continue
		}
		seen[i] = true
		*into = value[2:]
	}
	return true
}

// headerValueSize is the size in b of a header value of type kind (with its length, for bytes and
// strings).
func headerValueSize(kind byte, b []byte) (int, bool) {
	var size int
	switch kind {
	case 0, 1: // true, false
	case 2: // byte
		size = 1
	case 3: // int16
		size = 2
	case 4: // int32
		size = 4
	case 5, 8: // int64, timestamp
		size = 8
	case 6, stringHeader: // bytes, string
		if len(b) < 2 {
			return 0, false
		}
		size = 2 + int(binary.BigEndian.Uint16(b))
	case 9: // UUID
		size = 16
	default:
		return 0, false
	}
	return size, len(b) >= size
}

// stringHeader is the event stream's type byte of a string header value.
const stringHeader = 7

// decode decodes msg, a message read whole, if it is an idle shard's event: a SubscribeToShardEvent
// of JSON content whose payload decodeEvent takes.
func (s *EventStream) decode(msg []byte) (types.SubscribeToShardEventStream, bool) {
	var h eventHeaders
	if !h.parse(msg) || h.others || string(h.messageType) != eventstream.EventMessageType ||
		string(h.eventType) != "SubscribeToShardEvent" || string(h.contentType) != "application/json" {
		return nil, false
	}
	headers := binary.BigEndian.Uint32(msg[4:])
	payload := msg[preludeLen+headers : len(msg)-4]
	ev := &types.SubscribeToShardEventStreamMemberSubscribeToShardEvent{}
	if !s.decodeEvent(payload, &ev.Value) {
		return nil, false
	}
	return ev, true
}

// decodeEvent decodes payload into ev if it is an event without records:
// {"ContinuationSequenceNumber":"…","MillisBehindLatest":N,"Records":[]} as scanIdle takes it
// (Records may be missing too). It reports false for anything else (records, child shards, a
// missing continuation or MillisBehindLatest, escapes in strings, numbers other than integers),
// which the SDK's protocol decodes.
func (s *EventStream) decodeEvent(payload []byte, ev *types.SubscribeToShardEvent) bool {
	a, ok := scanIdle(payload, "ContinuationSequenceNumber")
	if !ok {
		return false
	}
	if string(a.position) != s.cont {
		s.cont = string(a.position)
	}
	c, behind := s.cont, a.behind
	ev.ContinuationSequenceNumber = &c
	ev.MillisBehindLatest = &behind
	if a.records {
		ev.Records = []types.Record{}
	}
	return true
}
