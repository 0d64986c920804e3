// Package getrecords is a lean path for Kinesis GetRecords, the call an idle shard makes once a
// second: the SDK's request, signed by the SDK's signer with the SDK client's credentials, sent on
// connections the path keeps itself, and an idle shard's answer decoded without allocating beyond
// the output; without the SDK's per-call middleware stack (endpoint resolution, user agent,
// tracing, metrics timers and the retry loop are set up once, or skipped when the call succeeds).
//
// What the path sends is the SDK's own request: the first call runs the SDK client once through
// an HTTP client that answers it locally, and keeps that request as the template (URL, Host, User-
// Agent, X-Amz-Target, Content-Type, Amz-Sdk-Request and whatever else the client's configuration
// adds), so endpoint resolution, FIPS or dual-stack endpoints and custom endpoints are the SDK's.
// Each call then serializes its input as the client's protocol does, gives it a fresh
// Amz-Sdk-Invocation-Id and signs it with the SDK's SigV4 signer (over the SHA-256 of the body, at
// the local time corrected by the clock skew the last answer's Date header showed).
//
// The request goes over connections the path keeps itself, built from the SDK HTTP client's
// transport settings: over TLS as a stream of a shared HTTP/2 connection where the handshake picks
// h2 (h2.go), otherwise over HTTP/1.1, written and read by the calling goroutine (wire.go, where net/http's transport hands both between two
// goroutines per connection); and through the SDK's HTTP client itself where the settings have
// something the wire does not reproduce (a proxy, a client timeout, a custom TLS dialer, an HTTP
// client of the caller's own) or the answer is a 3xx, which net/http's client follows. An idle
// shard's answer is decoded where it was read (answer.go: {"Records":[],"NextShardIterator":…,
// "MillisBehindLatest":…}, its members in any order); any other 2xx answer is read by the SDK's
// own JSON protocol.
//
// Only a 2xx answer that decodes is handled here. Anything else (an error status, a failure to
// send, a body that does not decode) is handed, as it was received, to the SDK client's own
// GetRecords as its first attempt: the SDK decodes and wraps the error, classifies it and retries
// with its retryer, its back-off and its retry quota exactly as when it sent the request itself.
// A successful call pays the retryer back as the SDK does (its attempt token, released with no
// error). One difference remains: a call whose context ends while it is on the wire fails with the
// context's error inside the SDK's operation error, as an SDK call whose context ended before an
// attempt does, where the SDK's own call would wrap it in a send error too; the poller tells
// either by its context.
//
// StartGetRecords (async.go) makes the same call without a goroutine waiting for it where it can go
// as an HTTP/2 stream at once: the read loop hands an idle shard's answer to the caller's done, and
// anything else as a finish the caller runs on its own goroutine (the poller's idle poller); a
// call that cannot go so it declines, and the caller makes it with GetRecords. Batch holds the
// HTTP/2 requests of the calls a caller starts one after another (the idle poller's polls of one
// grid instant) in their connection's buffer until the batch is sent: one write and one TLS
// record per connection for the batch, where each call would otherwise wake the connection's
// flusher and cost a write of its own.
//
// The events of an enhanced fan-out subscription, the other thing an idle shard costs, have a lean
// path of their own (events.go, Take): the SDK makes the SubscribeToShard call, and the caller
// reads the stream's body itself, decoding an idle shard's keep-alive events where they are read.
package getrecords

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/uuid"
)

// Client makes GetRecords calls for one SDK Kinesis client. It is safe for concurrent use.
type Client struct {
	kin     *kinesis.Client
	opts    kinesis.Options
	retryer aws.RetryerV2
	op      *smithy.OperationSchema
	lean    bool // false: every call goes through the SDK client (see New)

	mu   sync.Mutex
	tmpl *template // nil until the first call made one

	skew     atomic.Int64 // the clock skew (a time.Duration) the last answer's Date header showed
	lastDate atomic.Pointer[dateHeader]

	onStream atomic.Int64 // calls StartGetRecords sent as a stream no goroutine waits on, for the tests

	// Seams for the equivalence test; time.Now and a random UUID otherwise.
	now   func() time.Time
	newID func() string
}

// template is what every request of the lean path shares, taken from the SDK's own request.
type template struct {
	url           *url.URL
	host          string
	header        http.Header // without the per-request headers (perRequest)
	signingName   string
	signingRegion string
	wire          *wire // nil: requests go through the SDK's HTTP client
}

// perRequest are the headers a request gets of its own, not from the template.
var perRequest = []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "Amz-Sdk-Invocation-Id", "Content-Length"}

// New returns the lean GetRecords path of kin. With a retry mode other than the SDK's standard one
// (adaptive mode's client-side rate limiting takes a token before every attempt), with anonymous
// credentials or with a signer other than SigV4, every call goes through kin unchanged.
func New(kin *kinesis.Client) *Client {
	o := kin.Options()
	c := &Client{kin: kin, opts: o, now: time.Now, newID: uuid.NewString,
		op: smithy.NewOperationSchema(schemas.GetRecords, schemas.GetRecordsInput, schemas.GetRecordsOutput)}
	r, isV2 := o.Retryer.(aws.RetryerV2)
	_, anonymous := o.Credentials.(aws.AnonymousCredentials)
	c.retryer = r
	c.lean = isV2 && (o.RetryMode == "" || o.RetryMode == aws.RetryModeStandard) && o.Credentials != nil && !anonymous &&
		o.HTTPSignerV4 != nil && o.Protocol != nil && o.HTTPClient != nil
	return c
}

// GetRecords is kinesis.Client's GetRecords, with the same request, answers, errors and retries.
// Calls with optFns, and calls that name the stream (whose endpoint the SDK resolves from the
// stream's ARN), go through the SDK client.
func (c *Client) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if !c.lean || len(optFns) > 0 || in == nil || in.StreamARN != nil || in.StreamId != nil {
		return c.kin.GetRecords(ctx, in, optFns...)
	}
	t, err := c.template(ctx)
	if err != nil {
		return c.kin.GetRecords(ctx, in)
	}
	req, body, err := c.request(ctx, t, in)
	if err != nil { // the SDK fails the same way (serializing, credentials, signing)
		return c.kin.GetRecords(ctx, in)
	}
	buf := bodies.Get().(*bytes.Buffer)
	defer bodies.Put(buf)
	out := &kinesis.GetRecordsOutput{}
	sent := c.now()
	resp, q, err := (*http.Response)(nil), quick{}, errForHTTPClient
	if t.wire != nil {
		resp, q, err = t.wire.do(ctx, req, body, buf, out)
	}
	return c.settle(ctx, in, req, body, buf, out, sent, c.now(), resp, q, err)
}

// settle makes the call's result of what the wire did with req (resp, q and err, at received; the
// answer's body in buf, an idle shard's decoded into out): a request for the SDK's HTTP client is
// sent through it; an answer that is not a 2xx the wire or this decodes goes, as received, to the
// SDK client's GetRecords as its first attempt.
func (c *Client) settle(ctx context.Context, in *kinesis.GetRecordsInput, req *http.Request, body []byte, buf *bytes.Buffer,
	out *kinesis.GetRecordsOutput, sent, received time.Time, resp *http.Response, q quick, err error) (*kinesis.GetRecordsOutput, error) {
	switch {
	case errors.Is(err, errForHTTPClient):
		resp, q, err = c.viaHTTPClient(ctx, req, body, buf)
		received = c.now()
	case err == nil && !q.ok && (resp.StatusCode < 200 || resp.StatusCode >= 300):
		resp.Body = io.NopCloser(bytes.NewReader(bytes.Clone(buf.Bytes())))
	}
	if err == nil && q.ok {
		c.recordSkew(q.date[:q.dateLen], q.age, sent, received)
		c.paid(ctx)
		reuseHeader(req)
		return out, nil
	}
	if err != nil || resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return c.kin.GetRecords(ctx, in, replayFirst(resp, err))
	}
	resp.Body = io.NopCloser(bytes.NewReader(buf.Bytes()))
	if err := c.opts.Protocol.DeserializeResponse(ctx, c.op, kinesis.TypeRegistry, &smithyhttp.Response{Response: resp}, out); err != nil {
		resp.Body = io.NopCloser(bytes.NewReader(bytes.Clone(buf.Bytes())))
		return c.kin.GetRecords(ctx, in, replayFirst(resp, nil))
	}
	if resp.Header.Get("Age") == "" {
		c.recordSkew([]byte(resp.Header.Get("Date")), false, sent, received)
	}
	c.paid(ctx)
	return out, nil
}

// paid pays the retryer back for a call that succeeded at its first attempt, as the SDK does (its
// attempt token, released with no error).
func (c *Client) paid(ctx context.Context) {
	if release, err := c.retryer.GetAttemptToken(ctx); err == nil {
		_ = release(nil)
	}
}

// viaHTTPClient sends req, whose body is body, through the SDK's HTTP client: a 2xx answer's body
// is read into buf; any other answer is returned with its body, for the SDK.
func (c *Client) viaHTTPClient(ctx context.Context, req *http.Request, body []byte, buf *bytes.Buffer) (*http.Response, quick, error) {
	resp, err := c.opts.HTTPClient.Do(forHTTPClient(ctx, req, body))
	if err != nil || resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return resp, quick{}, err
	}
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, quick{}, err
	}
	return resp, quick{}, nil
}

// forHTTPClient is req, sent through an http.Client: with body as its (replayable) body, and ctx.
func forHTTPClient(ctx context.Context, req *http.Request, body []byte) *http.Request {
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return req.WithContext(ctx)
}

// headerMaps are the requests' header maps, used again after a call whose idle answer the wire
// decoded (reuseHeader): nothing refers to its request then. Its headers were read whole before
// any byte of it was sent (HTTP/1.1: writeRequest; HTTP/2: the HEADERS block is encoded before it
// is written), so no answer, and no reuse, can come while they are read.
var headerMaps = sync.Pool{New: func() any { return make(http.Header, 16) }}

// reuseHeader gives req's header map back to headerMaps.
func reuseHeader(req *http.Request) {
	h := req.Header
	req.Header = nil
	clear(h)
	headerMaps.Put(h)
}

// bodies are the buffers answers are read into (the protocol copies what it keeps).
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// replayFirst is a client option whose HTTP client answers the first request with resp and err
// (what the lean path received) and sends the others (the SDK's retries) through the client's own.
func replayFirst(resp *http.Response, err error) func(*kinesis.Options) {
	return func(o *kinesis.Options) {
		o.HTTPClient = &replay{resp: resp, err: err, next: o.HTTPClient}
	}
}

type replay struct {
	once sync.Once
	resp *http.Response
	err  error
	next kinesis.HTTPClient
}

func (r *replay) Do(req *http.Request) (*http.Response, error) {
	first := false
	r.once.Do(func() { first = true })
	if !first {
		return r.next.Do(req)
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if r.resp != nil {
		r.resp.Request = req
	}
	return r.resp, r.err
}

// request builds and signs the request for in.
func (c *Client) request(ctx context.Context, t *template, in *kinesis.GetRecordsInput) (*http.Request, []byte, error) {
	body, err := c.body(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	h := headerMaps.Get().(http.Header)
	for k, v := range t.header {
		h[k] = v
	}
	h["Amz-Sdk-Invocation-Id"] = []string{c.newID()}
	skew := time.Duration(c.skew.Load())
	if deadline, ok := ctx.Deadline(); ok && skew > 0 {
		// The SDK's retry header names the call's deadline, in the server's time, once a skew is known.
		h["Amz-Sdk-Request"] = []string{h.Get("Amz-Sdk-Request") + "; ttl=" + deadline.Add(skew).Format("20060102T150405Z")}
	}
	u := *t.url // the signer writes the request's URL (its query): each request has its own
	// The wire sends body itself; forHTTPClient gives the request its body and context for the
	// SDK's HTTP client.
	req := &http.Request{Method: http.MethodPost, URL: &u, Host: t.host, Header: h, ContentLength: int64(len(body))}
	creds, err := c.opts.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(body)
	var hash [2 * sha256.Size]byte
	hex.Encode(hash[:], sum[:])
	if err := c.opts.HTTPSignerV4.SignHTTP(ctx, creds, req, string(hash[:]), t.signingName, t.signingRegion, c.now().Add(skew)); err != nil {
		return nil, nil, err
	}
	return req, body, nil
}

// body is in's JSON. The poller's input (a shard iterator of base64 characters and a limit) is
// written here as the SDK's serializer writes it, members in its order; any other input is
// serialized by the client's protocol.
func (c *Client) body(ctx context.Context, in *kinesis.GetRecordsInput) ([]byte, error) {
	if in.ShardIterator != nil && in.DryRun == nil && plain(*in.ShardIterator) {
		b := make([]byte, 0, len(*in.ShardIterator)+40)
		b = append(b, '{')
		if in.Limit != nil {
			b = append(b, `"Limit":`...)
			b = strconv.AppendInt(b, int64(*in.Limit), 10)
			b = append(b, ',')
		}
		b = append(b, `"ShardIterator":"`...)
		b = append(b, *in.ShardIterator...)
		return append(b, `"}`...), nil
	}
	sr := smithyhttp.NewStackRequest().(*smithyhttp.Request)
	if err := c.opts.Protocol.SerializeRequest(ctx, c.op, in, sr); err != nil {
		return nil, err
	}
	return io.ReadAll(sr.GetStream())
}

// plain reports whether s has only characters JSON writes as they are, those of (URL-safe)
// base64.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case 'A' <= b && b <= 'Z', 'a' <= b && b <= 'z', '0' <= b && b <= '9', b == '+', b == '/', b == '=', b == '-', b == '_':
		default:
			return false
		}
	}
	return true
}

// recordSkew keeps the clock skew an answer's Date header (date; empty: none) shows, as the SDK
// does: the server's time less the time the answer arrived (received), unless the answer came
// from a cache (it has an Age header) or took over 15 minutes.
func (c *Client) recordSkew(date []byte, age bool, sent, received time.Time) {
	if len(date) == 0 || age || received.Sub(sent) > 15*time.Minute {
		return
	}
	server, ok := c.serverTime(date)
	if !ok {
		return
	}
	c.skew.Store(int64(server.Sub(received)))
}

// serverTime parses a Date header, once for each value (it changes once a second).
func (c *Client) serverTime(date []byte) (time.Time, bool) {
	if last := c.lastDate.Load(); last != nil && last.header == string(date) {
		return last.at, true
	}
	at, err := smithyhttp.ParseTime(string(date))
	if err != nil {
		return time.Time{}, false
	}
	c.lastDate.Store(&dateHeader{header: string(date), at: at})
	return at, true
}

// dateHeader is a Date header and the time it names.
type dateHeader struct {
	header string
	at     time.Time
}

// errNoTemplate: the SDK client made no request to capture.
var errNoTemplate = errors.New("get records: the SDK client sent no request")

// template returns the request template, making it on the first call: the SDK client's request
// for a GetRecords call, answered locally.
func (c *Client) template(ctx context.Context) (*template, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tmpl != nil {
		return c.tmpl, nil
	}
	var captured *http.Request
	capture := func(o *kinesis.Options) {
		o.HTTPClient = httpClientFunc(func(req *http.Request) (*http.Response, error) {
			captured = req
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
		})
	}
	if _, err := c.kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String("template"), Limit: aws.Int32(1)}, capture); err != nil {
		return nil, err
	}
	if captured == nil {
		return nil, errNoTemplate
	}
	t, err := newTemplate(captured, c.opts.HTTPClient)
	if err != nil {
		return nil, err
	}
	c.tmpl = t
	return t, nil
}

// newTemplate makes the template of the SDK's request req, to be sent through hc.
func newTemplate(req *http.Request, hc kinesis.HTTPClient) (*template, error) {
	name, region, ok := credentialScope(req.Header.Get("Authorization"))
	if !ok {
		return nil, fmt.Errorf("get records: the SDK's request is not signed with SigV4: %q", req.Header.Get("Authorization"))
	}
	h := req.Header.Clone()
	for _, k := range perRequest {
		delete(h, k)
	}
	if v, _, cut := strings.Cut(h.Get("Amz-Sdk-Request"), "; ttl="); cut { // per call (request adds it)
		h.Set("Amz-Sdk-Request", v)
	}
	u := *req.URL
	var w *wire
	if validHeader(h, nil) { // else net/http's client writes or refuses it, as for the SDK
		w = newWire(hc, &u)
	}
	if w != nil {
		w.lower, w.fixed = lowerNames(h), h
	}
	return &template{url: &u, host: req.Host, header: h, signingName: name, signingRegion: region, wire: w}, nil
}

// credentialScope returns the service name and region of a SigV4 Authorization header
// ("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/kinesis/aws4_request, ...").
func credentialScope(auth string) (name, region string, ok bool) {
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 Credential=")
	if !ok {
		return "", "", false
	}
	scope, _, _ := strings.Cut(rest, ",")
	parts := strings.Split(scope, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" {
		return "", "", false
	}
	return parts[3], parts[2], true
}

type httpClientFunc func(*http.Request) (*http.Response, error)

func (f httpClientFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }
