package kinesis

import (
	"bytes"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/eventstream"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// A SubscribeToShard response is an event stream. Kinesis starts it with an initial-response
// message (the operation's output, empty for SubscribeToShard), which the SDK insists on: without
// it the call fails with "deserialize initial response: expected initial-response, got
// SubscribeToShardEvent". kinesis-local, and LocalStack through the same engine, start directly
// with the first event. initialResponseOptional lets each subscription decide from its own stream:
// the first message is read; an initial-response goes to the SDK as the initial response, as
// before; anything else (an event, an exception) is kept and handed to the event reader as the
// stream's first message. Against Kinesis nothing changes.

// initialResponseOptional is a SubscribeToShard client option: it wraps the call's protocol (its
// own copy, see freshProtocol) so that the initial response may be missing.
func initialResponseOptional(o *kinesis.Options) {
	o.Protocol = &optionalInitial{ClientProtocol: o.Protocol}
}

// optionalInitial is one subscription's protocol. The SDK calls DeserializeInitialResponse once,
// then DeserializeEventMessage from one goroutine, in order, on the same body.
type optionalInitial struct {
	smithyhttp.ClientProtocol
	pending *bytes.Reader // the first message, when it was not the initial response
}

// HasInitialEventMessage is true, so that the SDK hands the stream's first message to
// DeserializeInitialResponse.
func (*optionalInitial) HasInitialEventMessage() bool { return true }

// DeserializeInitialResponse reads the stream's first message. An initial-response is decoded as
// the wrapped protocol decodes it; any other message is kept for DeserializeEventMessage, and the
// output stays empty (SubscribeToShardOutput has nothing but the event stream).
func (p *optionalInitial) DeserializeInitialResponse(schema *smithy.Schema, r io.Reader, out smithy.Deserializable) error {
	var raw bytes.Buffer
	msg, err := eventstream.NewDecoder().Decode(io.TeeReader(r, &raw), nil)
	if err != nil {
		return fmt.Errorf("decode first message: %w", err)
	}
	if isInitialResponse(msg) {
		return p.ClientProtocol.DeserializeInitialResponse(schema, &raw, out)
	}
	p.pending = bytes.NewReader(raw.Bytes())
	return nil
}

// DeserializeEventMessage decodes the kept first message, if any, before reading on.
func (p *optionalInitial) DeserializeEventMessage(schema *smithy.Schema, types *smithy.TypeRegistry, r io.Reader) (smithy.Deserializable, error) {
	if p.pending != nil {
		first := p.pending
		p.pending = nil
		return p.ClientProtocol.DeserializeEventMessage(schema, types, first)
	}
	return p.ClientProtocol.DeserializeEventMessage(schema, types, r)
}

func isInitialResponse(msg eventstream.Message) bool {
	mt, et := msg.Headers.Get(eventstream.MessageTypeHeader), msg.Headers.Get(eventstream.EventTypeHeader)
	return mt != nil && mt.String() == eventstream.EventMessageType && et != nil && et.String() == "initial-response"
}
