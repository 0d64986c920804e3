package getrecords

import (
	"bufio"
	"bytes"
	"context"
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
