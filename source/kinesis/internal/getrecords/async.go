package getrecords

import (
	"bytes"
	"context"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Batch opens a batch of calls: the HTTP/2 requests of the calls started (StartGetRecords) or
// made (GetRecords) until send is called wait in their connection's buffer, and send writes each
// connection's at once, so that the calls of a batch cost one write (one TLS record) per
// connection instead of one each. A connection's buffer that fills is written without waiting.
// Batches that overlap are sent when the last ends, so a batch should be short: the calls a loop
// starts one after another, not a wait. Over HTTP/1.1, or before the first call, a batch does
// nothing.
func (c *Client) Batch() (send func()) {
	c.mu.Lock()
	t := c.tmpl
	c.mu.Unlock()
	if t == nil || t.wire == nil {
		return func() {}
	}
	return t.wire.batch()
}

// StartGetRecords starts GetRecords(ctx, in) as a stream of an HTTP/2 connection and returns
// without waiting for it, where it can: the endpoint's TLS handshake picked h2, a stream slot is
// free and the send window has room. Then no goroutine waits for the answer: done gets the call's
// result once, on some goroutine (the connection's read loop, or the caller's own when the
// connection fails while the request is written): either the output (finish nil: the call
// succeeded; an idle shard's answer, decoded on the read loop), or finish, which the caller runs
// on a goroutine of its own to get the output or the error. finish does whatever is left of
// GetRecords: the SDK's decoding of a non-empty or unexpected answer, and its retries of an
// error, so done itself never blocks. Otherwise it reports false, having sent nothing: the caller
// makes the call with GetRecords, on a goroutine of its own.
//
// The request, the answers and the errors are GetRecords', but for one difference: a call whose
// context ends while its stream is open is not cut short (no goroutine watches the context); its
// answer is handed to done when it comes, or its connection's failure.
func (c *Client) StartGetRecords(ctx context.Context, in *kinesis.GetRecordsInput, done func(out *kinesis.GetRecordsOutput, finish func() (*kinesis.GetRecordsOutput, error))) bool {
	if !c.lean || in == nil || in.StreamARN != nil || in.StreamId != nil {
		return false
	}
	c.mu.Lock()
	t := c.tmpl
	c.mu.Unlock()
	if t == nil || t.wire == nil {
		return false
	}
	w := t.wire
	if !w.takeInFlight() {
		return false
	}
	hc := w.h2Slot()
	if hc == nil {
		w.putInFlight()
		return false
	}
	req, body, err := c.request(ctx, t, in)
	if err != nil || !validHeader(req.Header, w.fixed) {
		hc.release(0, nil)
		w.putInFlight()
		return false // GetRecords fails, or sends it through the SDK's HTTP client
	}
	buf := bodies.Get().(*bytes.Buffer)
	out := &kinesis.GetRecordsOutput{}
	sent := c.now()
	ended := func(st *h2stream, gzip bool) {
		w.putInFlight()
		received := c.now()
		var (
			resp *http.Response
			q    quick
			err  = st.err
		)
		if err == nil {
			resp, q, err = hc.answer(st, gzip, out)
		}
		if err != nil {
			err = w.callError(ctx, req, err)
		}
		if err == nil && q.ok {
			bodies.Put(buf)
			reuseHeader(req)
			c.recordSkew(q.date[:q.dateLen], q.age, sent, received)
			c.paid(ctx)
			done(out, nil)
			return
		}
		done(nil, func() (*kinesis.GetRecordsOutput, error) {
			defer bodies.Put(buf)
			return c.settle(ctx, in, req, body, buf, out, sent, received, resp, q, err)
		})
	}
	if !hc.start(req, body, buf, ended) {
		bodies.Put(buf)
		w.putInFlight()
		return false
	}
	c.onStream.Add(1)
	return true
}

// h2Slot returns an HTTP/2 connection with a stream slot it reserved, once a TLS handshake has
// shown that the endpoint speaks HTTP/2; else nil.
func (w *wire) h2Slot() *h2conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.h2 || w.proto != protoH2 {
		return nil
	}
	return w.h2SlotLocked()
}

// takeInFlight takes a place among the requests the transport's MaxConnsPerHost lets be in flight,
// if there is one now (or no bound).
func (w *wire) takeInFlight() bool {
	if w.inFlight == nil {
		return true
	}
	select {
	case w.inFlight <- struct{}{}:
		return true
	default:
		return false
	}
}

// putInFlight gives back the place takeInFlight took.
func (w *wire) putInFlight() {
	if w.inFlight != nil {
		<-w.inFlight
	}
}
