package kinesis

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/source"
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

// starter is a client that starts GetRecords without a goroutine waiting (the lean path's).
type starter interface {
	StartGetRecords(ctx context.Context, in *kinesis.GetRecordsInput, done func(out *kinesis.GetRecordsOutput, finish func() (*kinesis.GetRecordsOutput, error))) bool
}

// batcher is a starter whose calls can leave together (the lean path's).
type batcher interface {
	Batch() (send func())
}

// StartRead starts a read of the shard at iterator (poller.ReadStarter) without a goroutine
// waiting for its answer, where the lean path can: done gets the page, or finish to run on a
// goroutine of the caller's for the page or the error (classified as Read's). Reporting false, it
// did nothing (another client, WithSDKGetRecords, a call the lean path cannot start): the read is
// to be made with Read.
func (s *Stream) StartRead(ctx context.Context, shardID, iterator string, limit int, done func(page source.Page, finish func() (source.Page, error))) bool {
	st, ok := s.reads.(starter)
	if !ok {
		return false
	}
	in := &kinesis.GetRecordsInput{ShardIterator: &iterator, Limit: aws.Int32(int32(limit))}
	return st.StartGetRecords(ctx, in, func(out *kinesis.GetRecordsOutput, finish func() (*kinesis.GetRecordsOutput, error)) {
		if finish == nil {
			done(PageOf(out), nil)
			return
		}
		done(source.Page{}, func() (source.Page, error) {
			out, err := finish()
			if err != nil {
				return source.Page{}, Classify(err)
			}
			return PageOf(out), nil
		})
	})
}

// Batch starts a batch of the reads StartRead starts: their requests leave together when send is
// called (the lean path's); without the lean path send does nothing.
func (s *Stream) Batch() (send func()) {
	if b, ok := s.reads.(batcher); ok {
		return b.Batch()
	}
	return sendNothing
}

func sendNothing() {}
