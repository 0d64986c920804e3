package kinesis

import (
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/source/kinesis/internal/getrecords"
)

// The lean GetRecords path. Given the SDK's own client (*kinesis.Client), a Stream reads its
// shards with GetRecords on the lean path (internal/getrecords: the SDK's request, signed by the
// SDK's signer, written and read on connections the path keeps, HTTP/2 where the endpoint takes
// it, and started without a goroutine waiting for the idle poller), every other call on the SDK
// client. WithSDKGetRecords turns it off: every GetRecords is then the SDK client's own, the path
// esm took before the lean one, for an operator who wants to rule the lean path out. A client
// that is not the SDK's (a fake, a wrapper, Lean's) is always called as it is.

// Lean returns c with GetRecords on the lean path: for several Streams to share one lean path (its
// connections) instead of one each, give each of them Lean's client.
func Lean(c *kinesis.Client) API { return getrecords.Wrap(c) }

// WithSDKGetRecords reads the stream with the SDK client's own GetRecords instead of the lean
// path (esm run and esm serve: --sdk-getrecords).
func WithSDKGetRecords() Option { return func(s *Stream) { s.sdkReads = true } }

// reader is the client the stream's shards are read with: api on the lean path when it is the
// SDK's client and WithSDKGetRecords was not given, else api.
func (s *Stream) reader() API {
	if c, ok := s.api.(*kinesis.Client); ok && !s.sdkReads {
		return Lean(c)
	}
	return s.api
}

// TakeBody is a SubscribeToShard client option that takes an HTTP/2 answer's body for the caller
// to read itself (its Stream), leaving the SDK's reader the initial response alone; see
// internal/getrecords.Take.
type TakeBody = getrecords.Take

// EventStream is a subscription's events read from the body TakeBody took.
type EventStream = getrecords.EventStream
