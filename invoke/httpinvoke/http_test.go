package httpinvoke

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
)

// fakeEndpoint is a Lambda-Invoke-compatible endpoint on 127.0.0.1 that records what it receives
// and answers with respond (n counts requests from 1).
type fakeEndpoint struct {
	srv     *httptest.Server
	respond func(n int, w http.ResponseWriter, r *http.Request)

	mu          sync.Mutex
	requests    []recorded
	inFlight    int
	maxInFlight int
}

type recorded struct {
	method, path string
	header       http.Header
	body         string
}

func newFakeEndpoint(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *fakeEndpoint {
	t.Helper()
	f := &fakeEndpoint{respond: respond}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, recorded{method: r.Method, path: r.URL.EscapedPath(), header: r.Header.Clone(), body: string(body)})
		n := len(f.requests)
		f.inFlight++
		f.maxInFlight = max(f.maxInFlight, f.inFlight)
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.inFlight--
			f.mu.Unlock()
		}()
		f.respond(n, w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEndpoint) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func (f *fakeEndpoint) max() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxInFlight
}

func (f *fakeEndpoint) request(i int) recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[i]
}

func reply(status int, body string, header ...string) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		for i := 0; i < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func newHTTP(t *testing.T, endpoints []string, opts ...Option) *Pool {
	t.Helper()
	opts = append([]Option{WithRetries(2, time.Millisecond, 5*time.Millisecond)}, opts...)
	h, err := New(endpoints, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.CloseIdleConnections)
	return h
}

func TestHTTPRequestShape(t *testing.T) {
	f := newFakeEndpoint(t, reply(200, `{"batchItemFailures":null}`))
	h := newHTTP(t, []string{f.srv.URL}, WithFunctionName("my-function"))
	payload := `{"Records":[]}`
	resp, err := h.Invoke(context.Background(), []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Failed() || resp.StatusCode != 200 || string(resp.Payload) != `{"batchItemFailures":null}` || resp.ExecutedVersion != "$LATEST" {
		t.Fatalf("response %+v", resp)
	}
	r := f.request(0)
	if r.method != http.MethodPost || r.path != "/2015-03-31/functions/my-function/invocations" || r.body != payload {
		t.Fatalf("request %s %s %q", r.method, r.path, r.body)
	}
	if r.header.Get("Content-Type") != "application/json" || r.header.Get("X-Amz-Invocation-Type") != "RequestResponse" {
		t.Fatalf("headers %v", r.header)
	}
	if id := r.header.Get("X-Amzn-RequestId"); id == "" || id != resp.RequestID {
		t.Fatalf("request ID sent %q, reported %q", id, resp.RequestID)
	}
}

func TestHTTPFunctionErrorsAreNeverRetried(t *testing.T) {
	tests := []struct {
		name    string
		respond func(int, http.ResponseWriter, *http.Request)
		errType string
	}{
		{name: "handler error", respond: reply(200, `{"errorMessage":"boom","errorType":"errorString"}`), errType: "errorString"},
		{name: "panic", respond: reply(502, `{"errorMessage":"kaboom","errorType":"string","stackTrace":[]}`), errType: "string"},
		{name: "lambda header", respond: reply(200, `{"errorMessage":"x","errorType":"Custom"}`, "X-Amz-Function-Error", "Unhandled"), errType: "Custom"},
		{name: "timeout", respond: reply(200, "Task timed out after 3.00 seconds"), errType: "Sandbox.Timedout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEndpoint(t, tt.respond)
			h := newHTTP(t, []string{f.srv.URL})
			resp, err := h.Invoke(context.Background(), []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if resp.FunctionError != invoke.FunctionErrorUnhandled || resp.StatusCode != 200 {
				t.Fatalf("response %+v", resp)
			}
			if !strings.Contains(string(resp.Payload), `"errorType":"`+tt.errType+`"`) {
				t.Fatalf("payload %s", resp.Payload)
			}
			if n := f.count(); n != 1 {
				t.Fatalf("%d requests, want 1: a function error is never retried", n)
			}
		})
	}
}

func TestHTTPRetriesWhatDidNotReachTheFunction(t *testing.T) {
	t.Run("5xx then success", func(t *testing.T) {
		f := newFakeEndpoint(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n <= 2 {
				reply(503, "busy")(n, w, r)
				return
			}
			reply(200, "null")(n, w, r)
		})
		h := newHTTP(t, []string{f.srv.URL})
		resp, err := h.Invoke(context.Background(), []byte(`{}`))
		if err != nil || resp.Failed() || f.count() != 3 {
			t.Fatalf("resp %+v, err %v, %d requests; want success on the third", resp, err, f.count())
		}
	})
	t.Run("5xx every time", func(t *testing.T) {
		f := newFakeEndpoint(t, reply(500, ""))
		h := newHTTP(t, []string{f.srv.URL})
		_, err := h.Invoke(context.Background(), []byte(`{}`))
		if !errors.Is(err, invoke.ErrUnavailable) || f.count() != 3 || !strings.Contains(err.Error(), "status 500") {
			t.Fatalf("err %v after %d requests; want invoke.ErrUnavailable after 3", err, f.count())
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		f := newFakeEndpoint(t, reply(200, "null"))
		url := f.srv.URL
		f.srv.Close()
		h := newHTTP(t, []string{url})
		_, err := h.Invoke(context.Background(), []byte(`{}`))
		if !errors.Is(err, invoke.ErrUnavailable) || !strings.Contains(err.Error(), "3 attempts") {
			t.Fatalf("err %v; want invoke.ErrUnavailable after 3 attempts", err)
		}
	})
	t.Run("4xx is not retried", func(t *testing.T) {
		f := newFakeEndpoint(t, reply(404, `{"message":"Function not found"}`))
		h := newHTTP(t, []string{f.srv.URL})
		_, err := h.Invoke(context.Background(), []byte(`{}`))
		if !errors.Is(err, invoke.ErrUnavailable) || f.count() != 1 {
			t.Fatalf("err %v after %d requests; want invoke.ErrUnavailable after 1", err, f.count())
		}
	})
	t.Run("429 is throttled, not retried here", func(t *testing.T) {
		f := newFakeEndpoint(t, reply(429, `{"message":"Rate Exceeded."}`))
		h := newHTTP(t, []string{f.srv.URL})
		_, err := h.Invoke(context.Background(), []byte(`{}`))
		if !errors.Is(err, invoke.ErrThrottled) || errors.Is(err, invoke.ErrUnavailable) || f.count() != 1 {
			t.Fatalf("err %v after %d requests; want invoke.ErrThrottled after 1", err, f.count())
		}
	})
}

func TestHTTPRejectsOversizedRequests(t *testing.T) {
	f := newFakeEndpoint(t, reply(200, "null"))
	h := newHTTP(t, []string{f.srv.URL})
	_, err := h.Invoke(context.Background(), make([]byte, invoke.MaxPayloadBytes+1))
	if !errors.Is(err, invoke.ErrUnavailable) || f.count() != 0 {
		t.Fatalf("err %v, %d requests; want invoke.ErrUnavailable and nothing sent", err, f.count())
	}
}

// blocking answers each request only once the test releases it; entered reports each arrival.
type blocking struct {
	entered chan int // the request's number
	release chan struct{}
}

func newBlocking() *blocking {
	return &blocking{entered: make(chan int), release: make(chan struct{})}
}

func (b *blocking) respond(n int, w http.ResponseWriter, r *http.Request) {
	select {
	case b.entered <- n:
	case <-r.Context().Done():
		return
	}
	select {
	case <-b.release:
		reply(200, "null")(n, w, r)
	case <-r.Context().Done():
	}
}

func TestHTTPOneInvocationInFlightPerEndpoint(t *testing.T) {
	const calls = 6
	b1, b2 := newBlocking(), newBlocking()
	f1, f2 := newFakeEndpoint(t, b1.respond), newFakeEndpoint(t, b2.respond)
	h := newHTTP(t, []string{f1.srv.URL, f2.srv.URL})

	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := h.Invoke(context.Background(), []byte(`{}`))
			errs <- err
		}()
	}
	// Let the invocations through one at a time, alternately on each endpoint as they arrive.
	for done := 0; done < calls; {
		select {
		case <-b1.entered:
			b1.release <- struct{}{}
		case <-b2.entered:
			b2.release <- struct{}{}
		}
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		done++
	}
	if f1.max() != 1 || f2.max() != 1 {
		t.Fatalf("most invocations in flight at once: %d and %d, want 1 per endpoint", f1.max(), f2.max())
	}
	if f1.count()+f2.count() != calls || f1.count() == 0 || f2.count() == 0 {
		t.Fatalf("requests %d and %d: want %d spread over both endpoints", f1.count(), f2.count(), calls)
	}
}

func TestHTTPWaitForAnEndpointHonoursContext(t *testing.T) {
	b := newBlocking()
	f := newFakeEndpoint(t, b.respond)
	h := newHTTP(t, []string{f.srv.URL})

	first := make(chan error, 1)
	go func() {
		_, err := h.Invoke(context.Background(), []byte(`{}`))
		first <- err
	}()
	<-b.entered // the only endpoint is busy

	start := time.Now() // before the deadline is set, so that the wait cannot seem shorter than it
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := h.Invoke(ctx, []byte(`{}`))
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, invoke.ErrUnavailable) || errors.Is(err, invoke.ErrThrottled) {
		t.Fatalf("err %v: want the context's deadline, not a classification", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the context ended", waited)
	}
	if f.count() != 1 {
		t.Fatalf("%d requests: the waiting invocation must not reach the busy endpoint", f.count())
	}

	b.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	go func() { // the endpoint is back in the pool
		n := <-b.entered
		if n == 2 {
			b.release <- struct{}{}
		}
	}()
	if _, err := h.Invoke(context.Background(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
}

func TestHTTPAbandonedInvocationHoldsTheEndpointBack(t *testing.T) {
	b := newBlocking()
	f := newFakeEndpoint(t, b.respond)
	const timeout = 100 * time.Millisecond
	h := newHTTP(t, []string{f.srv.URL}, WithFunctionTimeout(timeout))
	h.margin = 20 * time.Millisecond

	go func() { <-b.entered }() // the first request never gets an answer
	// The invoker gives up no earlier than timeout+margin after started, and holds the endpoint
	// back for timeout from then: a bound that no scheduling delay can undercut (a time taken
	// after Invoke returned is later than the invoker's own, by however long the return took).
	started := time.Now()
	_, err := h.Invoke(context.Background(), []byte(`{}`))
	if !errors.Is(err, invoke.ErrAmbiguous) || !strings.Contains(err.Error(), "no answer within") {
		t.Fatalf("err %v: want invoke.ErrAmbiguous for an endpoint that never answers", err)
	}

	// While held back, a waiting invocation still honours its context.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := h.Invoke(ctx, []byte(`{}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v: want the context's deadline while the endpoint is held back", err)
	}

	arrived := make(chan time.Time, 1)
	go func() {
		<-b.entered
		arrived <- time.Now()
		b.release <- struct{}{}
	}()
	if _, err := h.Invoke(context.Background(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if after, least := (<-arrived).Sub(started), timeout+h.margin+timeout; after < least {
		t.Fatalf("the next invocation reached the endpoint %v after the abandoned one started, want at least %v: given up after the timeout and margin, then held back for the function timeout", after, least)
	}
}

func TestHTTPCallerCancelIsNotAClassification(t *testing.T) {
	b := newBlocking()
	f := newFakeEndpoint(t, b.respond)
	h := newHTTP(t, []string{f.srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-b.entered
		cancel()
	}()
	_, err := h.Invoke(ctx, []byte(`{}`))
	if !errors.Is(err, context.Canceled) || errors.Is(err, invoke.ErrUnavailable) {
		t.Fatalf("err %v: want context.Canceled", err)
	}
}

func TestNewHTTPValidation(t *testing.T) {
	tests := []struct {
		name      string
		endpoints []string
		opts      []Option
		want      string
	}{
		{name: "no endpoint", want: "no endpoint"},
		{name: "duplicate", endpoints: []string{"http://127.0.0.1:9001", "http://127.0.0.1:9001/"}, want: "are the same"},
		{name: "duplicate with case", endpoints: []string{"HTTP://LOCALHOST:9001", "http://localhost:9001"}, want: "are the same"},
		{name: "scheme", endpoints: []string{"ftp://127.0.0.1:9001"}, want: "scheme"},
		{name: "no scheme", endpoints: []string{"127.0.0.1:9001"}, want: "endpoint"},
		{name: "query", endpoints: []string{"http://127.0.0.1:9001/?x=1"}, want: "query"},
		{name: "empty function", endpoints: []string{"http://127.0.0.1:9001"}, opts: []Option{WithFunctionName("")}, want: "function name"},
		{name: "negative retries", endpoints: []string{"http://127.0.0.1:9001"}, opts: []Option{WithRetries(-1, 0, 0)}, want: "retries"},
		{name: "waits reversed", endpoints: []string{"http://127.0.0.1:9001"}, opts: []Option{WithRetries(1, time.Second, time.Millisecond)}, want: "retry wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.endpoints, tt.opts...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestInvocationsURL(t *testing.T) {
	tests := []struct{ endpoint, function, want string }{
		{"http://127.0.0.1:9001", "function", "http://127.0.0.1:9001/2015-03-31/functions/function/invocations"},
		{"http://127.0.0.1:9001/", "function", "http://127.0.0.1:9001/2015-03-31/functions/function/invocations"},
		{"https://lambda.example:443/prefix", "f", "https://lambda.example:443/prefix/2015-03-31/functions/f/invocations"},
		{"http://127.0.0.1:9001", "arn:aws:lambda:us-east-1:1:function:f", "http://127.0.0.1:9001/2015-03-31/functions/arn:aws:lambda:us-east-1:1:function:f/invocations"},
		{"http://127.0.0.1:9001", "a b/c", "http://127.0.0.1:9001/2015-03-31/functions/a%20b%2Fc/invocations"},
		{"http://127.0.0.1:8080/2015-03-31/functions/function/invocations", "ignored", "http://127.0.0.1:8080/2015-03-31/functions/function/invocations"},
	}
	for _, tt := range tests {
		got, err := invocationsURL(tt.endpoint, tt.function)
		if err != nil || got != tt.want {
			t.Errorf("invocationsURL(%q, %q) = %q, %v; want %q", tt.endpoint, tt.function, got, err, tt.want)
		}
	}
}

func TestHTTPClientTimeoutIsNotRetriedOnTheBusyEndpoint(t *testing.T) {
	b := newBlocking()
	f := newFakeEndpoint(t, b.respond)
	const timeout, attemptTimeout = 100 * time.Millisecond, 20 * time.Millisecond
	client := &http.Client{Timeout: attemptTimeout, Transport: newTransport()}
	h := newHTTP(t, []string{f.srv.URL}, WithHTTPClient(client), WithFunctionTimeout(timeout))

	go func() { <-b.entered }() // never answered
	// The attempt ends no earlier than attemptTimeout after started, and the endpoint is held back
	// for timeout from then (measured from before the call, as no scheduling delay can undercut).
	started := time.Now()
	_, err := h.Invoke(context.Background(), []byte(`{}`))
	if !errors.Is(err, invoke.ErrAmbiguous) || f.count() != 1 {
		t.Fatalf("err %v after %d requests: a timed-out attempt must not be retried at once", err, f.count())
	}
	arrived := make(chan time.Time, 1)
	go func() {
		<-b.entered
		arrived <- time.Now()
		b.release <- struct{}{}
	}()
	client.Timeout = 0
	if _, err := h.Invoke(context.Background(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if after, least := (<-arrived).Sub(started), attemptTimeout+timeout; after < least {
		t.Fatalf("the next invocation reached the endpoint %v after the timed-out one started, want at least %v: the attempt's timeout, then the function timeout held back", after, least)
	}
}

func TestNewHTTPZeroOptionsMeanDefaults(t *testing.T) {
	h, err := New([]string{"http://127.0.0.1:9001"}, WithFunctionTimeout(0), WithHTTPClient(nil), WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if h.timeout != invoke.DefaultTimeout || h.client == nil || h.log == nil {
		t.Fatalf("timeout %v, client %v, logger %v: want the defaults", h.timeout, h.client, h.log)
	}
}

// A retry is sent only while the caller's start check says yes (the poller's lease): a retry
// sent after the lease may have ended could outlast the wait of the worker that takes it over.
func TestHTTPRetryAsksTheStartCheck(t *testing.T) {
	var allowed atomic.Bool
	allowed.Store(true)
	f := newFakeEndpoint(t, func(n int, w http.ResponseWriter, r *http.Request) {
		allowed.Store(false) // the lease ends while the first attempt is answered
		reply(503, "busy")(n, w, r)
	})
	h := newHTTP(t, []string{f.srv.URL})
	_, err := h.Invoke(invoke.WithStartCheck(context.Background(), allowed.Load), []byte(`{}`))
	if !errors.Is(err, invoke.ErrNotStarted) || !errors.Is(err, invoke.ErrUnavailable) || f.count() != 1 {
		t.Fatalf("err %v after %d requests; want invoke.ErrNotStarted after 1", err, f.count())
	}
}

// An invocation that waited for a free endpoint is not sent when the start check says no.
func TestHTTPWaitForAnEndpointAsksTheStartCheck(t *testing.T) {
	release := make(chan struct{})
	f := newFakeEndpoint(t, func(n int, w http.ResponseWriter, r *http.Request) {
		<-release
		reply(200, "null")(n, w, r)
	})
	h := newHTTP(t, []string{f.srv.URL})
	first := make(chan error, 1)
	go func() { _, err := h.Invoke(context.Background(), []byte(`{}`)); first <- err }()
	testkit.WaitFor(t, "the first invocation at the endpoint", 10*time.Second, func() bool { return f.count() == 1 })
	var allowed atomic.Bool
	allowed.Store(true)
	second := make(chan error, 1)
	go func() {
		_, err := h.Invoke(invoke.WithStartCheck(context.Background(), allowed.Load), []byte(`{}`))
		second <- err
	}()
	allowed.Store(false) // the lease ends while the second waits
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; !errors.Is(err, invoke.ErrNotStarted) || f.count() != 1 {
		t.Fatalf("err %v after %d requests; want invoke.ErrNotStarted, and only the first sent", err, f.count())
	}
}
