package getrecords

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The wire speaks HTTP/2 where the endpoint's TLS handshake picks it (ALPN offers h2 first, as
// net/http's transport does for the SDK's client, and AWS's endpoints take it): the calls of all
// the shards share a few connections, one stream per call, where HTTP/1.1 needs a connection per
// call in flight. A call writes its request's frames into the connection's buffer and leaves the
// write to the connection's flusher, which runs once the goroutines that were ready with it have
// written theirs too: the polls of idle shards start together (the poller's PollGrid), so one
// write carries many requests, and one read many answers. Each connection has a goroutine that
// reads its frames and hands each answer to its call, and one that flushes; both end with the
// connection (an error, the server's GOAWAY once its streams are done, a call that finds it idle
// past IdleConnTimeout, or wire.close).
//
// What a request carries is what net/http's HTTP/2 client sends for it: the pseudo-headers, then
// the request's headers in lower case, content-length and, as over HTTP/1.1, accept-encoding: gzip
// (TestSameAsSDK compares them as the server reads them). Per-request values (the signature, its
// date, the invocation id) are never indexed by HPACK, so that the dynamic table keeps the
// headers every request repeats.

// h2 receive windows: a stream may receive this much before its WINDOW_UPDATE (a GetRecords
// answer is at most 10 MiB), the connection this much in all.
const (
	h2StreamWindow = 4 << 20
	h2ConnWindow   = 1 << 30
	h2Credit       = 1 << 20 // received bytes returned to the server's window at once
	h2MaxStreamID  = 1<<31 - 1
)

// errH2Unprocessed: the server did not process the stream (a GOAWAY below it, REFUSED_STREAM): the
// request is sent again, through the SDK's HTTP client.
var errH2Unprocessed = fmt.Errorf("get records: stream not processed by the server: %w", errForHTTPClient)

// h2conn is one HTTP/2 connection of a wire.
type h2conn struct {
	w    *wire
	conn net.Conn
	fr   *http2.Framer
	bw   *bufio.Writer

	wmu   sync.Mutex // writes to fr and bw, enc and hbuf
	enc   *hpack.Encoder
	hbuf  bytes.Buffer
	flush chan struct{} // 1-buffered: frames wait in bw for the flusher

	mu         sync.Mutex
	streams    map[uint32]*h2stream
	reserved   int           // calls that hold a stream slot: in streams, or about to be
	nextID     uint32        // the next stream's id
	maxStreams int           // the server's SETTINGS_MAX_CONCURRENT_STREAMS
	initWindow int64         // the server's SETTINGS_INITIAL_WINDOW_SIZE: each new stream's send window
	maxFrame   int           // the server's SETTINGS_MAX_FRAME_SIZE
	sendWindow int64         // the connection's send window
	windowed   chan struct{} // closed when a send window grew
	unacked    int           // DATA bytes received and not yet returned to the connection's window
	goaway     bool          // no new streams: the server sent GOAWAY
	err        error         // the connection failed: no new streams, every stream failed
	idleSince  time.Time     // when the last stream ended (streams empty)
	done       chan struct{} // closed when the read loop has ended
}

// h2stream is one call on an h2conn.
type h2stream struct {
	status  int
	fields  []hpack.HeaderField // the answer's header fields (pseudo-headers dropped)
	body    *bytes.Buffer       // the caller's buffer, written by the read loop under h2conn.mu
	window  int64               // the stream's send window
	unacked int
	ended   chan struct{} // closed when the answer is whole or the stream failed (err)
	err     error
	id      uint32
	// onEnd, for a call started without waiting (start), is run once the stream has ended, by
	// whoever ended it, after c.mu is released.
	onEnd func()
}

// newH2Conn starts HTTP/2 on conn, whose TLS handshake picked h2, within ctx.
func newH2Conn(ctx context.Context, w *wire, conn net.Conn) (*h2conn, error) {
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
		defer conn.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c := &h2conn{w: w, conn: conn, flush: make(chan struct{}, 1), streams: map[uint32]*h2stream{},
		nextID: 1, maxStreams: 100, initWindow: 65535, maxFrame: 16384, sendWindow: 65535,
		windowed: make(chan struct{}), idleSince: time.Now(), done: make(chan struct{})}
	c.bw = bufio.NewWriterSize(conn, 64<<10)
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(conn, 64<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 10 << 20
	c.fr.SetMaxReadFrameSize(1 << 20)
	c.enc = hpack.NewEncoder(&c.hbuf)
	// The preface, then our settings (no push, a large stream window) and the connection's window.
	if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
		return nil, err
	}
	err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2StreamWindow},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20})
	if err == nil {
		err = c.fr.WriteWindowUpdate(0, h2ConnWindow-65535)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		return nil, err
	}
	// The server's preface is its SETTINGS: wait for it, so that the calls of a burst know how
	// many streams the connection takes before they open more connections.
	f, err := c.fr.ReadFrame()
	if err != nil {
		return nil, err
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return nil, fmt.Errorf("get records: the server's HTTP/2 preface is a %v frame, not SETTINGS", f.Header().Type)
	}
	if err := c.settings(sf); err != nil {
		return nil, err
	}
	if err := c.fr.WriteSettingsAck(); err != nil {
		return nil, err
	}
	go c.readLoop()
	go c.flushLoop()
	c.wake()
	return c, nil
}

// usable reports whether c takes a new stream; c.mu is held.
func (c *h2conn) usable() bool {
	return c.err == nil && !c.goaway && c.nextID+2*uint32(c.reserved) < h2MaxStreamID-2 && !c.expiredLocked()
}

// expiredLocked reports whether c has had no stream for the transport's IdleConnTimeout; c.mu is
// held.
func (c *h2conn) expiredLocked() bool {
	return c.reserved == 0 && c.w.idleTimeout > 0 && time.Since(c.idleSince) >= c.w.idleTimeout
}

// reserve takes a stream slot on c if it has one.
func (c *h2conn) reserve() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.usable() || c.reserved >= c.maxStreams {
		return false
	}
	c.reserved++
	return true
}

// roundTrip sends req (signed, with body) as a new stream on c, which reserve gave a slot, and
// waits for its answer, whose body goes into into: an idle shard's answer is decoded into out
// (quick.ok), any other returned with its body in into.
func (c *h2conn) roundTrip(ctx context.Context, req *http.Request, body []byte, into *bytes.Buffer, out *kinesis.GetRecordsOutput) (*http.Response, quick, error) {
	into.Reset()
	st := &h2stream{body: into, ended: make(chan struct{})}
	if err := c.takeWindow(ctx, st, len(body)); err != nil {
		c.release(0, nil)
		return nil, quick{}, err
	}
	gzip := c.w.asksGzip(req)
	id, err := c.write(req, body, gzip, st)
	if err != nil {
		c.release(id, st)
		return nil, quick{}, err
	}
	c.w.sent.Add(1)
	select {
	case <-st.ended:
	case <-ctx.Done():
		if c.release(id, st) { // still open: the server is told to stop
			c.control(func() error { return c.fr.WriteRSTStream(id, http2.ErrCodeCancel) })
		}
		return nil, quick{}, ctx.Err()
	case <-c.done: // the read loop ended before it ended the stream
		c.release(id, st)
		return nil, quick{}, c.failure()
	}
	c.release(id, st)
	if st.err != nil {
		return nil, quick{}, st.err
	}
	return c.answer(st, gzip, out)
}

// start sends req (signed, with body) as a new stream on c, which reserve gave a slot, without
// waiting for its answer: once the stream has ended, onEnd gets it (with answer's arguments) on
// the goroutine that ended it, the connection's read loop for an answer, and the slot is free
// again. A false return means nothing was sent and the slot is given back: the connection failed,
// or its send window has no room for body now. A stream of start is not reset when its call's
// context ends (no goroutine watches it): its answer is dropped when it comes.
func (c *h2conn) start(req *http.Request, body []byte, into *bytes.Buffer, onEnd func(st *h2stream, gzip bool)) bool {
	into.Reset()
	n := int64(len(body))
	c.mu.Lock()
	if c.err != nil || c.sendWindow < n || c.initWindow < n {
		c.mu.Unlock()
		c.release(0, nil)
		return false
	}
	c.sendWindow -= n
	st := &h2stream{body: into, ended: make(chan struct{}), window: c.initWindow - n}
	c.mu.Unlock()
	gzip := c.w.asksGzip(req)
	st.onEnd = func() {
		c.release(st.id, st)
		onEnd(st, gzip)
	}
	id, err := c.write(req, body, gzip, st)
	if err != nil && id == 0 { // not a stream: the connection had failed
		c.release(0, nil)
		return false
	}
	if err == nil { // else the write failed the connection, and with it the stream: its onEnd ran
		c.w.sent.Add(1)
	}
	return true
}

// takeWindow waits until the connection's send window has n bytes for st's body and takes them
// (the server's stream window is known once st has an id: write checks it).
func (c *h2conn) takeWindow(ctx context.Context, st *h2stream, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for waited := false; c.sendWindow < int64(n); {
		if c.err != nil {
			return c.err
		}
		if !waited {
			waited = true
			c.w.waited.Add(1)
		}
		ch := c.windowed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			c.mu.Lock()
			return ctx.Err()
		case <-c.done:
		}
		c.mu.Lock()
	}
	c.sendWindow -= int64(n)
	st.window = c.initWindow - int64(n)
	if st.window < 0 { // a server that takes less than a request body per stream: net/http's business
		c.sendWindow += int64(n)
		return errForHTTPClient
	}
	return nil
}

// write writes req's HEADERS and DATA frames as a new stream, st, and asks the flusher to send them.
// The id is given under wmu, so that streams open in the order of their ids, as HTTP/2 requires.
func (c *h2conn) write(req *http.Request, body []byte, gzip bool, st *h2stream) (uint32, error) {
	c.wmu.Lock()
	c.mu.Lock()
	if err := c.err; err != nil {
		c.mu.Unlock()
		c.wmu.Unlock()
		return 0, err
	}
	id := c.nextID
	c.nextID += 2
	st.id = id
	c.streams[id] = st
	maxFrame := c.maxFrame
	c.mu.Unlock()

	c.hbuf.Reset()
	c.field(":authority", req.Host, false)
	c.field(":method", req.Method, false)
	c.field(":path", req.URL.RequestURI(), false)
	c.field(":scheme", "https", false)
	for k, vs := range req.Header {
		name := c.lowerName(k)
		if connectionSpecific(name) {
			continue
		}
		_, perCall := perRequestH2[name]
		for _, v := range vs {
			c.field(name, v, perCall)
		}
	}
	if len(body) > 0 {
		c.field("content-length", strconv.Itoa(len(body)), false)
	}
	if gzip {
		c.field("accept-encoding", "gzip", false)
	}
	block := c.hbuf.Bytes()
	first := min(len(block), maxFrame)
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:first], EndStream: len(body) == 0, EndHeaders: first == len(block)})
	for block = block[first:]; err == nil && len(block) > 0; {
		n := min(len(block), maxFrame)
		err = c.fr.WriteContinuation(id, n == len(block), block[:n])
		block = block[n:]
	}
	for rest := body; err == nil && len(rest) > 0; {
		n := min(len(rest), maxFrame)
		err = c.fr.WriteData(id, n == len(rest), rest[:n])
		rest = rest[n:]
	}
	c.wmu.Unlock()
	if err != nil { // failed outside wmu: the ended streams' onEnd may write
		c.fail(err)
		return id, c.failure()
	}
	if !c.w.hold(c) {
		c.wake()
	}
	return id, nil
}

// field encodes one header field into hbuf; never indexed: a value of its own per request.
func (c *h2conn) field(name, value string, perCall bool) {
	_ = c.enc.WriteField(hpack.HeaderField{Name: name, Value: value, Sensitive: perCall})
}

// perRequestH2 are the headers whose value is the request's own (perRequest, in lower case).
var perRequestH2 = map[string]struct{}{"authorization": {}, "x-amz-date": {}, "amz-sdk-invocation-id": {}, "amz-sdk-request": {}}

// connectionSpecific: headers HTTP/2 does not carry (net/http's client drops them).
func connectionSpecific(name string) bool {
	switch name {
	case "connection", "proxy-connection", "transfer-encoding", "upgrade", "keep-alive", "host":
		return true
	}
	return false
}

// lowerNames maps the header names of the template's requests (the SDK's, canonical) to lower
// case, as HTTP/2 writes them: made once (newTemplate), read-only after.
func lowerNames(h http.Header) map[string]string {
	m := make(map[string]string, len(h)+len(perRequest))
	for k := range h {
		m[k] = strings.ToLower(k)
	}
	for _, k := range perRequest {
		m[k] = strings.ToLower(k)
	}
	return m
}

// lowerName is name in lower case.
func (c *h2conn) lowerName(name string) string {
	if l, ok := c.w.lower[name]; ok {
		return l
	}
	return strings.ToLower(name)
}

// batch opens a batch of requests: until the function it returns is called, the requests written
// to HTTP/2 connections wait in their connection's buffer (a buffer that fills is written at
// once), and then each connection written is flushed once, so that the requests of a batch leave
// in one write (and one TLS record) per connection. Batches that overlap are sent when the last
// of them ends.
func (w *wire) batch() (send func()) {
	w.batchMu.Lock()
	w.batches++
	w.batchMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.batchMu.Lock()
			w.batches--
			var held []*h2conn
			if w.batches == 0 {
				held, w.held = w.held, nil
			}
			w.batchMu.Unlock()
			for _, c := range held {
				c.wake()
			}
		})
	}
}

// hold reports whether a batch is open, keeping c, just written, to be flushed when it is sent.
func (w *wire) hold(c *h2conn) bool {
	w.batchMu.Lock()
	defer w.batchMu.Unlock()
	if w.batches == 0 {
		return false
	}
	if !slices.Contains(w.held, c) { // a connection or two
		w.held = append(w.held, c)
	}
	w.heldWrites.Add(1)
	return true
}

// wake asks the flusher to write what is in bw.
func (c *h2conn) wake() {
	select {
	case c.flush <- struct{}{}:
	default:
	}
}

// control writes a frame of the connection's own (WINDOW_UPDATE, SETTINGS ACK, PING ACK,
// RST_STREAM) and asks the flusher to send it.
func (c *h2conn) control(write func() error) {
	c.wmu.Lock()
	err := write()
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
		return
	}
	c.wake()
}

// flushLoop writes what the calls left in bw. It yields first, so that the goroutines that were
// made ready with the call that woke it (the polls of one grid instant) write their frames too,
// and one write sends them all.
func (c *h2conn) flushLoop() {
	for {
		select {
		case <-c.flush:
		case <-c.done:
			return
		}
		runtime.Gosched()
		c.wmu.Lock()
		err := c.bw.Flush()
		c.wmu.Unlock()
		if err != nil {
			c.fail(err)
		}
	}
}

// release frees st's slot and forgets it (id 0: it never had one), returning whether the stream
// was still open.
func (c *h2conn) release(id uint32, st *h2stream) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reserved--
	open := false
	if st != nil && c.streams[id] == st {
		delete(c.streams, id)
		select {
		case <-st.ended:
		default:
			open = true
		}
	}
	if c.reserved == 0 {
		c.idleSince = time.Now()
		if c.goaway { // the server is done with the connection and so are we
			_ = c.conn.Close()
		}
	}
	return open
}

// fail ends the connection with err: every stream fails, no new one starts.
func (c *h2conn) fail(err error) {
	var ended []*h2stream
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		for id, st := range c.streams {
			st.err = err
			if c.endLocked(id, st) {
				ended = append(ended, st)
			}
		}
		c.grewLocked() // the calls waiting for a window see c.err
	}
	c.mu.Unlock()
	_ = c.conn.Close()
	runEnded(ended)
}

// failure is the error the connection failed with.
func (c *h2conn) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return io.ErrUnexpectedEOF
	}
	return c.err
}

// answer makes the call's result of its ended stream st.
func (c *h2conn) answer(st *h2stream, gzipped bool, out *kinesis.GetRecordsOutput) (*http.Response, quick, error) {
	var q quick
	var encoding string
	for _, f := range st.fields {
		switch f.Name {
		case "content-encoding":
			encoding = f.Value
		case "date":
			if q.dateLen == 0 && len(f.Value) <= len(q.date) {
				q.dateLen = copy(q.date[:], f.Value)
			}
		case "age":
			q.age = true
		}
	}
	if st.status == http.StatusOK && encoding == "" && decodeEmpty(st.body.Bytes(), out) {
		q.ok = true
		c.w.quick.Add(1)
		return nil, q, nil
	}
	if st.status < 200 || (st.status >= 300 && st.status < 400) {
		return nil, quick{}, errForHTTPClient
	}
	h := make(http.Header, len(st.fields))
	for _, f := range st.fields {
		k := http.CanonicalHeaderKey(f.Name)
		h[k] = append(h[k], f.Value)
	}
	resp := &http.Response{Status: strconv.Itoa(st.status) + " " + http.StatusText(st.status), StatusCode: st.status,
		Proto: "HTTP/2.0", ProtoMajor: 2, Header: h, Body: http.NoBody, ContentLength: int64(st.body.Len())}
	if gzipped && strings.EqualFold(encoding, "gzip") {
		plain, err := gunzip(st.body.Bytes())
		if err != nil {
			return nil, quick{}, err
		}
		st.body.Reset()
		st.body.Write(plain)
		h.Del("Content-Encoding")
		h.Del("Content-Length")
		resp.ContentLength, resp.Uncompressed = -1, true
	}
	return resp, quick{}, nil
}

// gunzip decodes a gzipped body.
func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// readLoop reads the connection's frames until it fails or closes.
func (c *h2conn) readLoop() {
	defer close(c.done)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.fail(err)
			return
		}
		if err := c.handle(f); err != nil {
			c.fail(err)
			return
		}
	}
}

// handle acts on one frame the server sent.
func (c *h2conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		c.headers(f)
	case *http2.DataFrame:
		c.data(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		if err := c.settings(f); err != nil {
			return err
		}
		c.control(c.fr.WriteSettingsAck)
	case *http2.WindowUpdateFrame:
		c.windowUpdate(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			data := f.Data
			c.control(func() error { return c.fr.WritePing(true, data) })
		}
	case *http2.RSTStreamFrame:
		err := error(http2.StreamError{StreamID: f.StreamID, Code: f.ErrCode})
		if f.ErrCode == http2.ErrCodeRefusedStream {
			err = errH2Unprocessed
		}
		c.end(f.StreamID, err)
	case *http2.GoAwayFrame:
		c.goAway(f)
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol) // push is off (our SETTINGS)
	}
	return nil
}

// headers takes an answer's HEADERS: its status and fields (a 1xx is passed over, trailers are
// dropped), and the end of the stream.
func (c *h2conn) headers(f *http2.MetaHeadersFrame) {
	var ended []*h2stream
	c.mu.Lock()
	st := c.streams[f.StreamID]
	if st != nil && st.status == 0 {
		status, err := strconv.Atoi(f.PseudoValue("status"))
		switch {
		case err != nil || status < 100 || status > 999:
			st.err = fmt.Errorf("get records: malformed :status %q", f.PseudoValue("status"))
			if c.endLocked(f.StreamID, st) {
				ended = append(ended, st)
			}
		case status >= 200 || status == http.StatusSwitchingProtocols:
			st.status, st.fields = status, f.RegularFields()
		}
	}
	c.mu.Unlock()
	runEnded(ended)
	if f.StreamEnded() {
		c.end(f.StreamID, nil)
	}
}

// data takes a DATA frame: its bytes into the stream's body, the window given back in steps.
func (c *h2conn) data(f *http2.DataFrame) {
	n := int(f.Length) // padding included: it counts against the window
	var connCredit, streamCredit int
	c.mu.Lock()
	st := c.streams[f.StreamID]
	if st != nil && st.status != 0 {
		st.body.Write(f.Data())
		if st.unacked += n; st.unacked >= h2Credit && !f.StreamEnded() {
			streamCredit, st.unacked = st.unacked, 0
		}
	}
	if c.unacked += n; c.unacked >= h2Credit {
		connCredit, c.unacked = c.unacked, 0
	}
	c.mu.Unlock()
	if connCredit > 0 || streamCredit > 0 {
		id := f.StreamID
		c.control(func() error {
			var err error
			if connCredit > 0 {
				err = c.fr.WriteWindowUpdate(0, uint32(connCredit))
			}
			if err == nil && streamCredit > 0 {
				err = c.fr.WriteWindowUpdate(id, uint32(streamCredit))
			}
			return err
		})
	}
	if f.StreamEnded() {
		c.end(f.StreamID, nil)
	}
}

// end ends stream id: its answer is whole (err nil) or it failed.
func (c *h2conn) end(id uint32, err error) {
	c.mu.Lock()
	st := c.streams[id]
	run := false
	if st != nil {
		if st.err == nil {
			st.err = err
		}
		if st.err == nil && st.status == 0 {
			st.err = errors.New("get records: a stream ended without an answer")
		}
		run = c.endLocked(id, st)
	}
	c.mu.Unlock()
	if run {
		st.onEnd()
	}
}

// endLocked closes st's ended and forgets it; c.mu is held. It reports whether st has an onEnd,
// which the caller runs once c.mu is released (runEnded).
func (c *h2conn) endLocked(id uint32, st *h2stream) bool {
	delete(c.streams, id)
	close(st.ended)
	return st.onEnd != nil
}

// runEnded runs the onEnd of the streams endLocked ended.
func runEnded(ended []*h2stream) {
	for _, st := range ended {
		st.onEnd()
	}
}

// settings applies the server's SETTINGS.
func (c *h2conn) settings(f *http2.SettingsFrame) error {
	var tableSize uint32
	var hasTable bool
	c.mu.Lock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = int(min(s.Val, 1<<20))
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.initWindow
			c.initWindow = int64(s.Val)
			for _, st := range c.streams {
				st.window += delta
			}
		case http2.SettingMaxFrameSize:
			c.maxFrame = int(s.Val)
		case http2.SettingHeaderTableSize:
			tableSize, hasTable = s.Val, true
		}
		return nil
	})
	c.grewLocked()
	c.mu.Unlock()
	if err == nil && hasTable {
		c.wmu.Lock()
		c.enc.SetMaxDynamicTableSizeLimit(tableSize)
		c.wmu.Unlock()
	}
	return err
}

// windowUpdate grows a send window.
func (c *h2conn) windowUpdate(f *http2.WindowUpdateFrame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		c.sendWindow += int64(f.Increment)
	} else if st := c.streams[f.StreamID]; st != nil {
		st.window += int64(f.Increment)
	}
	c.grewLocked()
}

// grewLocked wakes the calls waiting for a send window; c.mu is held.
func (c *h2conn) grewLocked() {
	close(c.windowed)
	c.windowed = make(chan struct{})
}

// goAway takes the server's GOAWAY: no new streams; the streams above the last it processes are
// sent again elsewhere; the connection closes once the others have ended.
func (c *h2conn) goAway(f *http2.GoAwayFrame) {
	var ended []*h2stream
	c.mu.Lock()
	c.goaway = true
	for id, st := range c.streams {
		if id > f.LastStreamID {
			st.err = errH2Unprocessed
			if c.endLocked(id, st) {
				ended = append(ended, st)
			}
		}
	}
	if c.reserved == 0 {
		_ = c.conn.Close()
	}
	c.mu.Unlock()
	runEnded(ended)
}

// close closes the connection; its goroutines end.
func (c *h2conn) close() {
	c.fail(net.ErrClosed)
	<-c.done
}
