package getrecords

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"golang.org/x/net/http/httpguts"
)

// wire sends the lean path's requests over HTTP/1.1 on kept-alive connections of its own: the
// calling goroutine writes the request and reads the answer itself. net/http's transport runs a
// reader and a writer goroutine per connection and hands each request and answer between them
// and the caller through channels, which cost an idle poll more than signing it
// (BenchmarkManyIdleShardsFakeKinesis's profile); here a call is a write and a read on the
// connection. It is built from the SDK client's own transport settings (dialer, TLS
// configuration, idle pool size and timeout, MaxConnsPerHost as a bound on requests at once, the
// SDK's read timeout), and only where it sends what
// net/http would: a BuildableClient with no proxy for the endpoint and no timeouts or hooks it
// does not reproduce (newWire). It speaks HTTP/1.1, and over TLS HTTP/2 where the handshake picks
// it (h2.go).
type wire struct {
	addr        string      // host:port to dial
	tls         *tls.Config // nil: plain HTTP
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	handshake   time.Duration // TLS handshake timeout; 0: none
	readTimeout time.Duration // the SDK's rolling read timeout; 0: none
	idleTimeout time.Duration // an idle connection unused this long is closed; 0: never
	maxIdle     int
	gzip        bool          // ask for gzip and decode it, as net/http's transport does
	inFlight    chan struct{} // the transport's MaxConnsPerHost: requests at once; nil: no bound

	h2    bool              // offer HTTP/2 in the TLS handshake, as net/http's transport would (newWire)
	lower map[string]string // the requests' header names in lower case (lowerNames), for HTTP/2
	fixed http.Header       // the template's header, valid (validHeader): read-only

	mu      sync.Mutex
	idle    []*wireConn // the most recently used last
	proto   wireProto   // what the endpoint speaks, once a TLS handshake told
	h2conns []*h2conn
	dialing chan struct{} // closed when the dial under way ends; nil: none (HTTP/2 dials one at a time)

	batchMu sync.Mutex
	batches int       // open batches (batch): HTTP/2 requests wait in their connection's buffer
	held    []*h2conn // the connections written while a batch was open, each once

	sent       atomic.Int64 // requests written, for the tests
	heldWrites atomic.Int64 // HTTP/2 requests that waited for a batch to be sent, for the tests
	quick      atomic.Int64 // answers decoded by peekEmpty, for the tests
	waited     atomic.Int64 // HTTP/2 calls that waited for the server's send window, for the tests
}

// wireProto is what a wire's endpoint speaks.
type wireProto int

const (
	protoUnknown wireProto = iota // no TLS handshake yet (or plain HTTP: HTTP/1.1)
	protoH1
	protoH2
)

// wireConn is one HTTP/1.1 connection of a wire.
type wireConn struct {
	conn net.Conn
	raw  syscall.RawConn // the socket under conn, to see that the server has not closed it; nil: not reused
	br   *bufio.Reader
	out  []byte // the request being written
	used time.Time
}

// newWire returns the wire for the SDK HTTP client hc and the endpoint u, or nil where it would
// not send the requests as hc does; the lean path then sends through hc.
func newWire(hc kinesis.HTTPClient, u *url.URL) *wire {
	b, ok := hc.(*awshttp.BuildableClient)
	if !wireSupported || !ok || b.GetTimeout() != 0 || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
		return nil
	}
	tr := b.GetTransport()
	if tr.Proxy != nil {
		if p, err := tr.Proxy(&http.Request{Method: http.MethodPost, URL: u}); err != nil || p != nil {
			return nil
		}
	}
	//lint:ignore SA1019 a Dial set by the user is a hook wire does not call
	if tr.DialTLSContext != nil || tr.DialTLS != nil || tr.Dial != nil || tr.DisableKeepAlives || tr.ResponseHeaderTimeout != 0 ||
		tr.MaxResponseHeaderBytes != 0 || tr.GetProxyConnectHeader != nil || len(tr.ProxyConnectHeader) > 0 {
		return nil
	}
	w := &wire{addr: canonicalAddr(u), dial: tr.DialContext, handshake: tr.TLSHandshakeTimeout,
		idleTimeout: tr.IdleConnTimeout, maxIdle: tr.MaxIdleConnsPerHost, gzip: !tr.DisableCompression}
	if w.dial == nil {
		w.dial = (&net.Dialer{}).DialContext
	}
	if tr.MaxConnsPerHost > 0 {
		w.inFlight = make(chan struct{}, tr.MaxConnsPerHost)
	}
	if w.maxIdle == 0 {
		w.maxIdle = http.DefaultMaxIdleConnsPerHost
	}
	if d, ok := b.GetReadTimeout(); ok && d > 0 {
		w.readTimeout = d
	}
	if u.Scheme == "https" {
		w.tls = &tls.Config{}
		if tr.TLSClientConfig != nil {
			w.tls = tr.TLSClientConfig.Clone()
		}
		if w.tls.ServerName == "" {
			w.tls.ServerName = u.Hostname()
		}
		w.h2 = offersH2(tr)
		w.tls.NextProtos = []string{"http/1.1"}
		if w.h2 {
			w.tls.NextProtos = []string{"h2", "http/1.1"}
		}
	}
	return w
}

// offersH2 reports whether net/http's transport tr offers HTTP/2 over TLS: unless its TLSNextProto
// is set (an empty map turns HTTP/2 off), its Protocols leave HTTP/2 out, GODEBUG has
// http2client=0, or it has a TLS configuration or dialer of its own without ForceAttemptHTTP2
// (the SDK's client sets it).
func offersH2(tr *http.Transport) bool {
	if tr.TLSNextProto != nil || (tr.Protocols != nil && !tr.Protocols.HTTP2()) || strings.Contains(os.Getenv("GODEBUG"), "http2client=0") {
		return false
	}
	return tr.ForceAttemptHTTP2 || (tr.TLSClientConfig == nil && tr.DialContext == nil)
}

// canonicalAddr is u's host:port, with the scheme's port when u names none.
func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// errForHTTPClient: the request or its answer is not one the wire handles (a header net/http
// refuses to send; a 3xx status, which net/http's client follows, or a 101); the request is sent
// through the SDK's HTTP client.
var errForHTTPClient = errors.New("get records: a request for net/http's client")

// do sends req (signed, with body as its body) and reads the answer: an idle shard's answer is
// decoded into out (quick.ok, no response), any other's body read into into. Errors are
// *url.Error, as net/http's client returns.
func (w *wire) do(ctx context.Context, req *http.Request, body []byte, into *bytes.Buffer, out *kinesis.GetRecordsOutput) (*http.Response, quick, error) {
	if w.inFlight != nil {
		select {
		case w.inFlight <- struct{}{}:
			defer func() { <-w.inFlight }()
		case <-ctx.Done():
			return nil, quick{}, w.urlError(req, ctx.Err())
		}
	}
	if !validHeader(req.Header, w.fixed) {
		return nil, quick{}, errForHTTPClient
	}
	cn, hc, err := w.get(ctx)
	if errors.Is(err, errForHTTPClient) {
		return nil, quick{}, err
	}
	if err != nil {
		return nil, quick{}, w.urlError(req, err)
	}
	if hc != nil {
		resp, q, err := hc.roundTrip(ctx, req, body, into, out)
		if err != nil {
			return nil, quick{}, w.callError(ctx, req, err)
		}
		return resp, q, nil
	}
	resp, q, err := w.roundTrip(ctx, cn, req, body, into, out)
	if err != nil {
		_ = cn.conn.Close()
		return nil, quick{}, w.callError(ctx, req, err)
	}
	return resp, q, nil
}

// callError is what a call on the wire that failed with err returns: errForHTTPClient as it is
// (the request goes to the SDK's HTTP client), else a *url.Error of the context's error if it
// ended, or of err.
func (w *wire) callError(ctx context.Context, req *http.Request, err error) error {
	if errors.Is(err, errForHTTPClient) {
		return err
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return w.urlError(req, err)
}

// asksGzip reports whether req goes with Accept-Encoding: gzip, which the wire adds (and decodes)
// as net/http's transport does.
func (w *wire) asksGzip(req *http.Request) bool {
	return w.gzip && req.Header["Accept-Encoding"] == nil && req.Header["Range"] == nil
}

func (w *wire) urlError(req *http.Request, err error) error {
	return &url.Error{Op: "Post", URL: req.URL.String(), Err: err}
}

// roundTrip writes req on cn and reads its answer (do). On success cn is back in the pool, or
// closed if the answer said so.
func (w *wire) roundTrip(ctx context.Context, cn *wireConn, req *http.Request, body []byte, into *bytes.Buffer, out *kinesis.GetRecordsOutput) (*http.Response, quick, error) {
	cancelled := context.AfterFunc(ctx, func() { _ = cn.conn.Close() })
	defer cancelled()
	gzip := w.asksGzip(req)
	cn.out = writeRequest(cn.out[:0], req, body, gzip)
	w.sent.Add(1)
	if _, err := cn.conn.Write(cn.out); err != nil {
		return nil, quick{}, err
	}
	if _, err := cn.br.Peek(1); err != nil {
		return nil, quick{}, err
	}
	var resp *http.Response
	q, closing := peekEmpty(cn.br, out)
	if q.ok {
		w.quick.Add(1)
	} else {
		var err error
		if resp, err = readResponse(cn.br, req); err != nil {
			return nil, quick{}, err
		}
		if resp.StatusCode < 200 || (resp.StatusCode >= 300 && resp.StatusCode < 400) {
			return nil, quick{}, errForHTTPClient
		}
		if err := readBody(resp, into, gzip); err != nil {
			return nil, quick{}, err
		}
		closing = resp.Close
	}
	if !cancelled() { // the context ended: cn is closed
		return nil, quick{}, ctx.Err()
	}
	if closing || cn.raw == nil {
		_ = cn.conn.Close()
	} else {
		w.put(cn)
	}
	return resp, q, nil
}

// readResponse reads the answer to req, past informational (1xx) answers as net/http's transport
// does (at most 5; a 101 ends it).
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for range 5 {
		resp, err := http.ReadResponse(br, req)
		if err != nil || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, err
		}
	}
	return nil, errors.New("too many 1xx informational responses")
}

// readBody reads resp's body into into, decoding gzip as net/http's transport does when it asked
// for it (asked), and leaves resp.Body empty.
func readBody(resp *http.Response, into *bytes.Buffer, asked bool) error {
	var r io.Reader = resp.Body
	if asked && strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return err
		}
		r = zr
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength, resp.Uncompressed = -1, true
	}
	into.Reset()
	_, err := into.ReadFrom(r)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body) // to the end of a gzip body's framing
	}
	resp.Body = http.NoBody
	return err
}

// validHeader reports whether every name and value of h is one net/http writes (a name of token
// characters; a value without control characters but tab), so that the wire writes no other. The
// values h shares with shared (a request's with the template's, which newTemplate checked; nil:
// none) are not checked again.
func validHeader(h, shared http.Header) bool {
	for k, vs := range h {
		if sv, ok := shared[k]; ok && len(sv) == len(vs) && len(vs) > 0 && &sv[0] == &vs[0] {
			continue
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return false
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return false
			}
		}
	}
	return true
}

// writeRequest appends req's HTTP/1.1 request to b: what net/http writes for it (the request
// line, Host, the headers, Content-Length and, with gzip, Accept-Encoding), then body.
func writeRequest(b []byte, req *http.Request, body []byte, gzip bool) []byte {
	b = append(b, "POST "...)
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, req.Host...)
	b = append(b, "\r\n"...)
	for k, vs := range req.Header {
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n"...)
	if gzip {
		b = append(b, "Accept-Encoding: gzip\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

// get returns what a call is sent on: a stream slot on an HTTP/2 connection (hc), once the
// endpoint is known to speak it, or an idle HTTP/1.1 connection the server has not closed, or a
// new connection of either. Until a TLS handshake has told which the endpoint speaks, and while
// it speaks HTTP/2, connections are dialled one at a time (the calls of a start-up burst share
// the first).
func (w *wire) get(ctx context.Context) (cn *wireConn, hc *h2conn, err error) {
	for {
		w.mu.Lock()
		if w.h2 && w.proto != protoH1 {
			if hc := w.h2SlotLocked(); hc != nil {
				w.mu.Unlock()
				return nil, hc, nil
			}
			if ch := w.dialing; ch != nil {
				w.mu.Unlock()
				select {
				case <-ch:
					continue
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			w.dialing = make(chan struct{})
			w.mu.Unlock()
			cn, hc, err := w.open(ctx)
			w.mu.Lock()
			close(w.dialing)
			w.dialing = nil
			w.mu.Unlock()
			return cn, hc, err
		}
		if n := len(w.idle); n > 0 {
			cn = w.idle[n-1]
			w.idle[n-1] = nil
			w.idle = w.idle[:n-1]
		}
		w.mu.Unlock()
		if cn == nil {
			return w.open(ctx)
		}
		if idle(cn.raw) {
			return cn, nil, nil
		}
		_ = cn.conn.Close()
		cn = nil
	}
}

// h2SlotLocked returns an HTTP/2 connection with a stream slot it reserved, dropping those that
// failed, were told to go away or were idle too long; w.mu is held.
func (w *wire) h2SlotLocked() *h2conn {
	kept := w.h2conns[:0]
	var found *h2conn
	for _, c := range w.h2conns {
		c.mu.Lock()
		live, expired := c.err == nil && !c.goaway, c.expiredLocked()
		c.mu.Unlock()
		switch {
		case expired:
			c.fail(net.ErrClosed)
		case live:
			kept = append(kept, c)
			if found == nil && c.reserve() {
				found = c
			}
		}
	}
	clear(w.h2conns[len(kept):])
	w.h2conns = kept
	return found
}

// open opens a new connection: HTTP/2 if its TLS handshake picked it (registered, with a stream
// slot reserved for the caller), else HTTP/1.1.
func (w *wire) open(ctx context.Context) (*wireConn, *h2conn, error) {
	conn, err := w.dial(ctx, "tcp", w.addr)
	if err != nil {
		return nil, nil, err
	}
	cn := &wireConn{}
	if sc, ok := conn.(syscall.Conn); ok {
		if cn.raw, err = sc.SyscallConn(); err != nil {
			cn.raw = nil
		}
	}
	if w.tls != nil {
		tc, err := w.handshakeTLS(ctx, conn)
		if err != nil {
			return nil, nil, err
		}
		conn = tc
		if w.h2 {
			if tc.ConnectionState().NegotiatedProtocol == "h2" {
				hc, err := newH2Conn(ctx, w, conn)
				if err != nil {
					_ = conn.Close()
					return nil, nil, err
				}
				w.mu.Lock()
				w.proto = protoH2
				w.h2conns = append(w.h2conns, hc)
				w.mu.Unlock()
				if !hc.reserve() { // its SETTINGS allow no stream
					return nil, nil, errForHTTPClient
				}
				return nil, hc, nil
			}
			w.mu.Lock()
			w.proto = protoH1
			w.mu.Unlock()
		}
	}
	if w.readTimeout > 0 {
		conn = &readTimeoutConn{Conn: conn, timeout: w.readTimeout}
	}
	cn.conn, cn.br = conn, bufio.NewReaderSize(conn, 4096)
	return cn, nil, nil
}

// close closes the wire's connections (their goroutines end).
func (w *wire) close() {
	w.mu.Lock()
	conns, idle := w.h2conns, w.idle
	w.h2conns, w.idle = nil, nil
	w.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	for _, cn := range idle {
		_ = cn.conn.Close()
	}
}

// handshakeTLS runs the TLS handshake on conn within the transport's handshake timeout.
func (w *wire) handshakeTLS(ctx context.Context, conn net.Conn) (*tls.Conn, error) {
	if w.handshake > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.handshake)
		defer cancel()
	}
	tc := tls.Client(conn, w.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return tc, nil
}

// put returns cn to the idle pool, closing what is over the pool's size or idle too long.
func (w *wire) put(cn *wireConn) {
	now := time.Now()
	cn.used = now
	var closing []*wireConn
	w.mu.Lock()
	w.idle = append(w.idle, cn)
	for len(w.idle) > 0 && (len(w.idle) > w.maxIdle || (w.idleTimeout > 0 && now.Sub(w.idle[0].used) > w.idleTimeout)) {
		closing = append(closing, w.idle[0])
		w.idle[0] = nil
		w.idle = w.idle[1:]
	}
	w.mu.Unlock()
	for _, c := range closing {
		_ = c.conn.Close()
	}
}

// readTimeoutConn is the SDK's read timeout (awshttp.BuildableClient.WithReadTimeout): each read
// must return within timeout.
type readTimeoutConn struct {
	net.Conn
	timeout time.Duration
}

func (c *readTimeoutConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return n, &awshttp.ResponseTimeoutError{TimeoutDur: c.timeout}
	}
	return n, err
}
