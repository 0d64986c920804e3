package httpinvoke

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/kinesis-esm/esm/invoke"
)

// responseMargin is how much longer than the function timeout an HTTP invocation may take before
// the endpoint counts as unavailable: room for a cold start (Lambda allows 10 s of init) and for
// the endpoint's own timeout report.
const responseMargin = 10 * time.Second

// Defaults for the retries of an HTTP invocation that did not reach the function.
const (
	defaultRetryMax     = 2
	defaultRetryWaitMin = 50 * time.Millisecond
	defaultRetryWaitMax = time.Second
)

// Pool invokes a function through Lambda-Invoke-compatible HTTP endpoints: POST
// {endpoint}/2015-03-31/functions/{name}/invocations, the API of Lambda itself and of the Runtime
// Interface Emulator (aws-lambda-rie) that runs an unmodified bootstrap.
//
// The endpoints form a pool with one invocation in flight per endpoint (aws-lambda-rie crashes on
// a second concurrent invoke): an invocation takes a free endpoint, waiting for one as long as
// its ctx allows, and gives it back when it has an answer. Attempts that did not reach the
// function (transport errors before the request was written, 5xx without a function error) are
// retried on the same endpoint a bounded number of times; function errors are never retried
// here, and neither is an attempt whose request was written and got no answer (a reset, an EOF,
// a timeout): the endpoint may still run it, so Invoke returns invoke.ErrAmbiguous and holds the
// endpoint back. Invoke is safe for concurrent
// use. Requests are unsigned, so real Lambda is reached through invoke/lambdaapi instead.
type Pool struct {
	free     chan *endpoint // the endpoints not in use; capacity: all of them
	client   *http.Client
	timeout  time.Duration // the function timeout
	margin   time.Duration // how much longer than timeout an answer may take
	retryMax int
	waitMin  time.Duration
	waitMax  time.Duration
	log      *slog.Logger
	newID    func() string
	now      func() time.Time
}

// endpoint is one member of the pool. Only the goroutine that took it from HTTP.free reads or
// writes it, so it needs no lock.
type endpoint struct {
	base string // as configured, for messages
	url  string // the invocations URL
	// notBefore holds the endpoint back after an invocation was abandoned while the endpoint may
	// still be running it: a second invoke would overlap it.
	notBefore time.Time
}

func (e *endpoint) String() string { return e.base }

// Option configures New. A nil Option is ignored.
type Option func(*httpConfig)

type httpConfig struct {
	function string
	timeout  time.Duration
	client   *http.Client
	log      *slog.Logger
	retryMax int
	waitMin  time.Duration
	waitMax  time.Duration
}

// WithFunctionName sets the function name in the invoke path (default invoke.DefaultFunctionName).
// aws-lambda-rie accepts only "function".
func WithFunctionName(name string) Option {
	return func(c *httpConfig) { c.function = name }
}

// WithFunctionTimeout sets the function timeout (default invoke.DefaultTimeout; zero or negative keeps
// it), which must not be shorter than the endpoint's own (AWS_LAMBDA_FUNCTION_TIMEOUT for
// aws-lambda-rie, 300 s by default): invocations are bounded by it plus 10 s. An invocation with
// no answer within the timeout plus 10 s fails as ambiguous (invoke.ErrAmbiguous: the caller
// does not send the batch again before that bound), and its endpoint is then held back for one
// more timeout so that it is never sent a second invocation while it may still run the first.
func WithFunctionTimeout(d time.Duration) Option {
	return func(c *httpConfig) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithHTTPClient sets the HTTP client (default, or nil: a client of its own that ignores proxy
// settings, so requests go only to the endpoints given). Its Timeout, if any, bounds each
// attempt; an attempt that times out is not retried, and its endpoint is held back as after an
// invocation with no answer.
func WithHTTPClient(client *http.Client) Option {
	return func(c *httpConfig) {
		if client != nil {
			c.client = client
		}
	}
}

// WithLogger sets the logger for retries and held-back endpoints, at debug level (default, or
// nil: discard). Errors are returned, never logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *httpConfig) {
		if l != nil {
			c.log = l
		}
	}
}

// WithRetries sets how often an attempt that did not reach the function is retried on the same
// endpoint (default 2) and the bounds of the exponential wait between attempts (default 50 ms to
// 1 s). Zero retries gives one attempt.
func WithRetries(max int, minWait, maxWait time.Duration) Option {
	return func(c *httpConfig) { c.retryMax, c.waitMin, c.waitMax = max, minWait, maxWait }
}

func (c *httpConfig) validate() error {
	switch {
	case c.function == "":
		return errors.New("function name is empty")
	case c.retryMax < 0:
		return fmt.Errorf("retries %d: must be 0 or more", c.retryMax)
	case c.waitMin < 0 || c.waitMax < c.waitMin:
		return fmt.Errorf("retry wait %v to %v: need 0 <= min <= max", c.waitMin, c.waitMax)
	}
	return nil
}

// New returns an invoker over the given endpoints: base URLs such as
// "http://127.0.0.1:9001" (the invoke path is appended), or full invocations URLs ending in
// "/invocations" (used as they are). Every endpoint must be distinct; each gets at most one
// invocation at a time.
func New(endpoints []string, opts ...Option) (*Pool, error) {
	cfg := httpConfig{
		function: invoke.DefaultFunctionName,
		timeout:  invoke.DefaultTimeout,
		client:   &http.Client{Transport: newTransport()},
		log:      slog.New(slog.DiscardHandler),
		retryMax: defaultRetryMax,
		waitMin:  defaultRetryWaitMin,
		waitMax:  defaultRetryWaitMax,
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	if len(endpoints) == 0 {
		return nil, errors.New("invoke: no endpoint given")
	}
	h := &Pool{
		free:     make(chan *endpoint, len(endpoints)), // a pool: one slot per endpoint, never more
		client:   cfg.client,
		timeout:  cfg.timeout,
		margin:   responseMargin,
		retryMax: cfg.retryMax,
		waitMin:  cfg.waitMin,
		waitMax:  cfg.waitMax,
		log:      cfg.log,
		newID:    uuid.NewString,
		now:      time.Now,
	}
	seen := make(map[string]string, len(endpoints))
	for _, e := range endpoints {
		u, err := invocationsURL(e, cfg.function)
		if err != nil {
			return nil, fmt.Errorf("invoke: endpoint %q: %w", e, err)
		}
		if prev, dup := seen[u]; dup {
			return nil, fmt.Errorf("invoke: endpoints %q and %q are the same: each endpoint runs one invocation at a time, so every one must be distinct", prev, e)
		}
		seen[u] = e
		h.free <- &endpoint{base: e, url: u}
	}
	return h, nil
}

// newTransport is the default transport: no proxy (requests go to the endpoints and nowhere
// else) and enough idle connections to keep one alive per endpoint.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		// The start check is asked again once a new connection is ready (invoke.CheckedDial).
		DialContext:           invoke.CheckedDial((&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// invocationsURL turns an endpoint as configured into the URL to POST invocations to.
func invocationsURL(endpoint, function string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("scheme %q: want http or https", u.Scheme)
	}
	if u.Host == "" {
		return "", errors.New("no host")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", errors.New("want a base URL without user, query or fragment")
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if strings.HasSuffix(u.Path, "/invocations") {
		return u.String(), nil
	}
	return strings.TrimSuffix(u.String(), "/") + "/2015-03-31/functions/" + url.PathEscape(function) + "/invocations", nil
}

// Invoke sends payload to a free endpoint, waiting for one as long as ctx allows, and classifies
// the answer once (see classifyHTTP):
//
//   - the function ran: a nil error; invoke.Response.FunctionError is invoke.FunctionErrorUnhandled for a
//     function error (X-Amz-Function-Error, an errorType/errorMessage document, a 502 from a
//     crashed runtime, aws-lambda-rie's plain-text timeout) and Payload its error document;
//   - 429: an error wrapping invoke.ErrThrottled;
//   - anything else that did not reach the function (transport errors and 5xx after the retries,
//     other 4xx, no answer within the timeout, a request over 6 MB): an error wrapping
//     invoke.ErrUnavailable;
//   - ctx ended first: an error wrapping ctx's.
func (h *Pool) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	if len(payload) > invoke.MaxPayloadBytes {
		// aws-lambda-rie would cut the body silently; Lambda answers RequestTooLargeException.
		return invoke.Response{}, fmt.Errorf("%w: request of %d bytes exceeds the %d-byte limit of a synchronous invocation", invoke.ErrUnavailable, len(payload), invoke.MaxPayloadBytes)
	}
	ep, err := h.acquire(ctx)
	if err != nil {
		return invoke.Response{}, err
	}
	defer h.release(ep)
	if err := invoke.CheckStart(ctx); err != nil { // the wait for an endpoint may have been long
		return invoke.Response{}, err
	}
	return h.invokeAt(ctx, ep, payload)
}

// acquire takes a free endpoint, waiting as long as ctx allows, and waits out its hold-back.
func (h *Pool) acquire(ctx context.Context) (*endpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	var ep *endpoint
	select {
	case ep = <-h.free:
	case <-ctx.Done():
		return nil, fmt.Errorf("invoke: waiting for a free endpoint: %w", ctx.Err())
	}
	if wait := ep.notBefore.Sub(h.now()); wait > 0 {
		h.log.Debug("endpoint held back after an abandoned invocation", "endpoint", ep.base, "wait", wait)
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			h.release(ep)
			return nil, fmt.Errorf("invoke: waiting for endpoint %s: %w", ep, ctx.Err())
		}
	}
	return ep, nil
}

// release gives an endpoint back to the pool. It never blocks: the pool has room for every
// endpoint and each is out at most once.
func (h *Pool) release(ep *endpoint) { h.free <- ep }

// CloseIdleConnections closes the HTTP client's idle keep-alive connections (see
// http.Client.CloseIdleConnections); call it when the invoker is no longer used. It does not
// interrupt invocations in flight.
func (h *Pool) CloseIdleConnections() { h.client.CloseIdleConnections() }

// invokeAt runs one invocation, with its retries, on ep.
func (h *Pool) invokeAt(ctx context.Context, ep *endpoint, payload []byte) (invoke.Response, error) {
	reqID := h.newID()
	limit := h.timeout + h.margin
	actx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tctx, st := invoke.TraceSend(actx) // whether each attempt's request was written

	var (
		last     *outcome // the classification of the latest attempt that got an answer
		inFlight bool     // an attempt was sent and has no answer yet
		attempts int
		stopped  error // the start check refused a retry
	)
	rc := &retryablehttp.Client{
		HTTPClient:   h.client,
		RetryMax:     h.retryMax,
		RetryWaitMin: h.waitMin,
		RetryWaitMax: h.waitMax,
		Backoff:      retryablehttp.DefaultBackoff,
		PrepareRetry: func(*http.Request) error { // after the back-off, just before the send
			stopped = invoke.CheckStart(ctx)
			return stopped
		},
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
		RequestLogHook: func(_ retryablehttp.Logger, _ *http.Request, _ int) {
			st.Attempt()
			inFlight = true
			attempts++
		},
		CheckRetry: func(cctx context.Context, resp *http.Response, err error) (bool, error) {
			if cerr := cctx.Err(); cerr != nil {
				return false, cerr // given up: the attempt may still be running at the endpoint
			}
			inFlight = false
			o := classifyHTTP(reqID, readAttempt(st, resp, err))
			last = &o
			if o.retry {
				h.log.Debug("invoke attempt did not reach the function; retrying", "endpoint", ep.base, "request_id", reqID, "attempt", attempts, "reason", o.reason)
			}
			return o.retry, nil
		},
	}
	req, err := newRequest(tctx, ep, reqID, invoke.TraceHeader(ctx), payload)
	if err != nil {
		return invoke.Response{}, err
	}
	resp, doErr := rc.Do(req)
	if resp != nil {
		_ = resp.Body.Close() // already read by CheckRetry
	}

	if (inFlight && actx.Err() != nil) || (last != nil && last.busy) {
		// The endpoint may still be running the invocation: hold it back until its own timeout
		// has ended it.
		ep.notBefore = h.now().Add(h.timeout)
		h.log.Debug("endpoint held back: an invocation was abandoned without an answer", "endpoint", ep.base, "request_id", reqID, "until", ep.notBefore)
	}
	if last != nil && !last.retry && !inFlight {
		return last.result(ep)
	}
	switch {
	case ctx.Err() != nil:
		return invoke.Response{}, fmt.Errorf("invoke %s, request %s: %w", ep, reqID, ctx.Err())
	case stopped != nil:
		return invoke.Response{}, fmt.Errorf("invoke %s, request %s, after %d attempts: %w", ep, reqID, attempts, stopped)
	case actx.Err() != nil && inFlight: // written: ambiguous, and the endpoint held back
		return invoke.Response{}, fmt.Errorf("%s: %w", ep, st.Failed(fmt.Errorf("no answer within %v (function timeout %v)", limit, h.timeout)))
	case actx.Err() != nil:
		return invoke.Response{}, fmt.Errorf("%w: %s: no attempt sent within %v", invoke.ErrUnavailable, ep, limit)
	case last != nil:
		return invoke.Response{}, fmt.Errorf("%w: %s: %s (%d attempts)", invoke.ErrUnavailable, ep, last.reason, attempts)
	default:
		return invoke.Response{}, fmt.Errorf("%w: %s: %w", invoke.ErrUnavailable, ep, doErr)
	}
}

// newRequest is invocation reqID's request to ep, carrying trace header th when there is one.
func newRequest(ctx context.Context, ep *endpoint, reqID, th string, payload []byte) (*retryablehttp.Request, error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, ep.url, payload)
	if err != nil {
		return nil, fmt.Errorf("%w: build request for %s: %w", invoke.ErrUnavailable, ep, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Amz-Invocation-Type", "RequestResponse")
	req.Header.Set(headerRequestID, reqID) // aws-lambda-rie makes it the handler's AwsRequestID
	if th != "" {
		req.Header.Set(invoke.HeaderTraceID, th) // as Lambda's Invoke API takes it
	}
	return req, nil
}

// attempt is what one HTTP attempt produced: a response (status, headers, body) or a transport
// error, classified (invoke.SendTrace.Failed: it wraps invoke.ErrUnavailable or
// invoke.ErrAmbiguous).
type attempt struct {
	status int
	header http.Header
	body   []byte // at most invoke.MaxPayloadBytes+1 bytes
	err    error
}

// readAttempt reads the response body (up to one byte past Lambda's response limit) and puts a
// copy back, so that whoever reads resp next sees it whole. A failure without an answer is
// classified by st: before or after the request was written.
func readAttempt(st *invoke.SendTrace, resp *http.Response, err error) attempt {
	if err != nil {
		return attempt{err: st.Failed(err)}
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, invoke.MaxPayloadBytes+1))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return attempt{err: st.Failed(fmt.Errorf("read response body: %w", rerr))}
	}
	return attempt{status: resp.StatusCode, header: resp.Header, body: body}
}
