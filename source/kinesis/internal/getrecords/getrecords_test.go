package getrecords

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// answer is one scripted HTTP answer of the test server; drop cuts the connection instead, gzip
// sends the body gzipped (when the request accepts it).
type answer struct {
	status int
	header map[string]string
	body   string
	drop   bool
	gzip   bool
}

// recorded is one request as the server received it.
type recorded struct {
	method, path string
	header       http.Header
	body         []byte
}

// server answers the requests it gets with script, in order (the last answer repeats), and
// records them.
type server struct {
	*httptest.Server
	mu     sync.Mutex
	script []answer
	reqs   []recorded
}

func newServer(t *testing.T, h2 bool) *server {
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, recorded{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
		a := s.script[min(len(s.reqs), len(s.script))-1]
		s.mu.Unlock()
		if a.drop && r.ProtoMajor == 2 {
			panic(http.ErrAbortHandler) // the stream is reset
		}
		if a.drop {
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
			return
		}
		w.Header()["Date"] = nil // no clock skew: both clients sign at the time they are given
		w.Header().Set("X-Amzn-Requestid", "req-1")
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		if a.gzip && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(a.status)
			zw := gzip.NewWriter(w)
			_, _ = io.WriteString(zw, a.body)
			_ = zw.Close()
			return
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	if h2 {
		s.EnableHTTP2 = true
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// trusting is a client option for a test server over TLS: the SDK's HTTP client with the server's
// certificate as its only root (as AWS_CA_BUNDLE sets it).
func trusting(srv *httptest.Server) func(*kinesis.Options) {
	return func(o *kinesis.Options) {
		if srv.TLS == nil {
			return
		}
		roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.TLSClientConfig.RootCAs = roots
		})
	}
}

// run sets the script and returns the requests made by call.
func (s *server) run(script []answer, call func()) []recorded {
	s.mu.Lock()
	s.script, s.reqs = script, nil
	s.mu.Unlock()
	call()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs
}

const pinnedID = "00000000-0000-4000-8000-000000000001"

// sdkClient is a Kinesis client of the server, with the SDK's standard retryer (1 ms back-off) and
// its invocation ID pinned (the SDK draws it at random, and it is signed); ops counts the calls
// that went through its middleware stack.
func sdkClient(url string, ops *atomic.Int64, optFns ...func(*kinesis.Options)) *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "session-token"),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		}),
		APIOptions: []func(*middleware.Stack) error{func(st *middleware.Stack) error {
			return st.Build.Add(middleware.BuildMiddlewareFunc("PinInvocationID", func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				ops.Add(1)
				in.Request.(*smithyhttp.Request).Header.Set("Amz-Sdk-Invocation-Id", pinnedID)
				return next.HandleBuild(ctx, in)
			}), middleware.After)
		}},
	}, optFns...)
}

// TestSameAsSDK makes each GetRecords call through the SDK client and through the lean path
// against a server with the same scripted answers, and compares what the server received (every
// header but User-Agent's per-call feature list, byte for byte, and the body) and what the
// callers got: the output, or the error (its text, its types and the poller's classification).
// A first request of the lean path is signed at the time the SDK's was (X-Amz-Date), so that its
// Authorization can be compared; later attempts (the SDK's retries), and the first of a call the
// lean path leaves to the SDK client (one naming the stream), are compared without their time and
// signature: the SDK signs them at its own clock, which may have passed a second since.
//
// It runs with the requests sent over the wire (the lean path's own connections) and through the
// SDK's HTTP client (where the wire is off: a proxy, a client timeout).
//
// Over TLS with HTTP/2 (h2: the test server offers it, both clients take it) the wire sends each
// call as a stream of a shared connection. A dropped connection is HTTP/1.1's: there the server
// resets the stream instead (TestH2StreamReset compares that).
//
// The async columns make each call with StartGetRecords instead, and run its finish on the test's
// goroutine: over HTTP/2 every call the lean path handles is sent as a stream no goroutine waits
// on, elsewhere on a goroutine of its own; the requests and results are the same.
func TestSameAsSDK(t *testing.T) {
	t.Run("wire", func(t *testing.T) { sameAsSDK(t, true, false, false) })
	t.Run("http client", func(t *testing.T) { sameAsSDK(t, false, false, false) })
	t.Run("wire h2", func(t *testing.T) { sameAsSDK(t, true, true, false) })
	t.Run("wire async", func(t *testing.T) { sameAsSDK(t, true, false, true) })
	t.Run("http client async", func(t *testing.T) { sameAsSDK(t, false, false, true) })
	t.Run("wire h2 async", func(t *testing.T) { sameAsSDK(t, true, true, true) })
}

// startAndWait makes the call with c.StartGetRecords, and runs its finish here; a call it does
// not start is made with GetRecords, as the poller's idle poller does.
func startAndWait(ctx context.Context, c *Client, in *kinesis.GetRecordsInput) (*kinesis.GetRecordsOutput, error) {
	type result struct {
		out    *kinesis.GetRecordsOutput
		finish func() (*kinesis.GetRecordsOutput, error)
	}
	ch := make(chan result, 1)
	if !c.StartGetRecords(ctx, in, func(out *kinesis.GetRecordsOutput, finish func() (*kinesis.GetRecordsOutput, error)) {
		ch <- result{out, finish}
	}) {
		return c.GetRecords(ctx, in)
	}
	r := <-ch
	if r.finish != nil {
		return r.finish()
	}
	return r.out, nil
}

func sameAsSDK(t *testing.T, viaWire, h2, async bool) {
	srv := newServer(t, h2)
	var sdkOps, leanOps atomic.Int64
	sdk := sdkClient(srv.URL, &sdkOps, trusting(srv.Server))
	lean := New(sdkClient(srv.URL, &leanOps, trusting(srv.Server)))
	if !lean.lean {
		t.Fatal("the lean path is off for the SDK's standard configuration")
	}
	tmpl, err := lean.template(context.Background())
	if err != nil || tmpl.wire == nil {
		t.Fatalf("the lean path does not send the requests itself (%v)", err)
	}
	w := tmpl.wire
	if !viaWire {
		tmpl.wire = nil
	}
	lean.newID = func() string { return pinnedID }

	const records = `{"Records":[{"SequenceNumber":"49590338271490256608559692538361571095921575989136588898","ApproximateArrivalTimestamp":1.7044316805E9,"Data":"aGVsbG8=","PartitionKey":"pk-1","EncryptionType":"KMS"},` +
		`{"SequenceNumber":"49590338271490256608559692540925702759324208523137515618","ApproximateArrivalTimestamp":1704431681.123,"Data":"","PartitionKey":"pk-2"}],` +
		`"NextShardIterator":"AAAAAAAAAAH2","MillisBehindLatest":1500}`
	const throttled = `{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded for shard shardId-000000000001 in stream s under account 123456789012."}`
	ok := func(body string) answer { return answer{status: 200, body: body} }
	fail := func(status int, body string) answer { return answer{status: status, body: body} }
	cases := []struct {
		name     string
		script   []answer
		requests int  // how many requests each client makes
		quick    bool // the wire decodes the answer itself
	}{
		{"records", []answer{ok(records)}, 1, false},
		{"records gzipped", []answer{{status: 200, body: records, gzip: true}}, 1, false},
		{"chunked", []answer{{status: 200, body: records, header: map[string]string{"Transfer-Encoding": "chunked"}}}, 1, false},
		{"connection close", []answer{{status: 200, body: records, header: map[string]string{"Connection": "close"}}}, 1, false},
		{"empty", []answer{ok(`{"Records":[],"NextShardIterator":"AAAAAAAAAAH3","MillisBehindLatest":0}`)}, 1, true},
		{"empty, other order and spaces", []answer{ok(" {\"MillisBehindLatest\" : 1200,\n\"NextShardIterator\":\"AAAAAAAAAAH3+/=\", \"Records\":[ ]}\r\n")}, 1, true},
		{"empty, gzipped", []answer{{status: 200, body: `{"Records":[],"NextShardIterator":"AAAAAAAAAAH3","MillisBehindLatest":0}`, gzip: true}}, 1, false},
		{"empty, escaped iterator", []answer{ok(`{"Records":[],"NextShardIterator":"AAAA\u0041\/","MillisBehindLatest":0}`)}, 1, false},
		{"shard end", []answer{ok(`{"Records":[],"MillisBehindLatest":0,"ChildShards":[{"ShardId":"shardId-000000000002","ParentShards":["shardId-000000000001"],"HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"170141183460469231731687303715884105727"}}]}`)}, 1, false},
		{"unknown fields and nulls", []answer{ok(`{"Records":null,"NextShardIterator":"AAAAAAAAAAH4","MillisBehindLatest":null,"SomethingNew":{"a":[1,2]}}`)}, 1, false},
		{"expired iterator", []answer{fail(400, `{"__type":"ExpiredIteratorException","message":"Iterator expired. The iterator was created at time Mon Jan 01 00:00:00 UTC 2024 while right now it is Mon Jan 01 00:06:00 UTC 2024 which is further in the future than the tolerated delay of 300000 milliseconds."}`)}, 1, false},
		{"expired iterator, error type header", []answer{{status: 400, header: map[string]string{"X-Amzn-ErrorType": "ExpiredIteratorException:http://internal.amazon.com/coral/com.amazon.coral.service/"}, body: `{"message":"Iterator expired."}`}}, 1, false},
		{"throttled thrice", []answer{fail(400, throttled)}, 3, false},
		{"throttled once", []answer{fail(400, throttled), ok(records)}, 2, false},
		{"internal failure", []answer{fail(500, `{"__type":"InternalFailure","message":"internal"}`)}, 3, false},
		{"service unavailable, no JSON", []answer{fail(503, `Service Unavailable`), ok(records)}, 2, false},
		{"invalid argument", []answer{fail(400, `{"__type":"InvalidArgumentException","message":"Invalid ShardIterator."}`)}, 1, false},
		{"KMS throttling", []answer{fail(400, `{"__type":"KMSThrottlingException","message":"slow down"}`)}, 1, false},
		{"access denied", []answer{fail(400, `{"__type":"AccessDeniedException","message":"no"}`)}, 1, false},
		{"resource not found", []answer{fail(400, `{"__type":"com.amazonaws.kinesis#ResourceNotFoundException","message":"Shard not found"}`)}, 1, false},
		{"unmodelled error", []answer{fail(400, `{"__type":"SomethingNewException","message":"new"}`)}, 1, false},
		{"malformed answer", []answer{ok(`{"Records":[`)}, 1, false},
		{"connection dropped", []answer{{drop: true}}, 3, false},
		{"connection dropped once", []answer{{drop: true}, ok(records)}, 2, false},
	}
	// The poller's inputs (a base64 iterator, a limit), which the lean path writes itself, others,
	// which it has the SDK's protocol serialize, and one naming the stream, which it leaves to the
	// SDK client.
	inputs := []*kinesis.GetRecordsInput{
		{ShardIterator: aws.String("AAAAAAAAAAH1AaZz09+/=-_"), Limit: aws.Int32(10000)},
		{ShardIterator: aws.String("AAAAAAAAAAH1")},
		{ShardIterator: aws.String("AAAAAAAAAAH1+/=<&>\"\\é\u2028\x01"), Limit: aws.Int32(1)},
		{ShardIterator: aws.String("AAAAAAAAAAH1"), Limit: aws.Int32(100), StreamARN: aws.String("arn:aws:kinesis:eu-west-1:123456789012:stream/s")},
	}
	ctx := context.Background()
	var leanHandled int
	t.Cleanup(w.close)
	call := lean.GetRecords
	if async {
		call = func(ctx context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
			return startAndWait(ctx, lean, in)
		}
		// The first call's TLS handshake tells the wire that the endpoint speaks HTTP/2.
		srv.run([]answer{ok(`{"Records":[],"NextShardIterator":"AAAAAAAAAAH3","MillisBehindLatest":0}`)}, func() {
			if _, err := lean.GetRecords(ctx, inputs[0]); err != nil {
				t.Fatal(err)
			}
		})
	}
	for i, c := range cases {
		in := inputs[i%len(inputs)]
		if h2 && slices.ContainsFunc(c.script, func(a answer) bool { return a.drop }) {
			continue // HTTP/1.1's; TestH2StreamReset
		}
		t.Run(c.name, func(t *testing.T) {
			var wantOut, gotOut *kinesis.GetRecordsOutput
			var wantErr, gotErr error
			want := srv.run(c.script, func() { wantOut, wantErr = sdk.GetRecords(ctx, in) })
			signedAt, err := time.Parse("20060102T150405Z", want[0].header.Get("X-Amz-Date"))
			if err != nil {
				t.Fatal(err)
			}
			lean.now = func() time.Time { return signedAt }
			if _, err := lean.template(ctx); err != nil { // made before the count below
				t.Fatal(err)
			}
			before, wired, quick, streamed := leanOps.Load(), w.sent.Load(), w.quick.Load(), lean.onStream.Load()
			got := srv.run(c.script, func() { gotOut, gotErr = call(ctx, in) })
			if n, want := lean.onStream.Load()-streamed, async && viaWire && h2 && in.StreamARN == nil; n > 1 || (n == 1) != want {
				t.Errorf("%d calls sent as a stream no goroutine waits on, want it: %v", n, want)
			}
			if n := w.quick.Load() - quick; (n == 1) != (viaWire && c.quick && in.StreamARN == nil) || n > 1 {
				t.Errorf("%d answers decoded by the wire itself, want it: %v", n, viaWire && c.quick)
			}
			if n, want := w.sent.Load()-wired, int64(min(1, c.requests)); in.StreamARN == nil && n != want && viaWire || !viaWire && n != 0 {
				t.Errorf("the lean path wrote %d requests itself, want %d (the first attempt)", n, want)
			}

			if len(want) != c.requests || len(got) != c.requests {
				t.Fatalf("requests: the SDK made %d, the lean path %d; want %d", len(want), len(got), c.requests)
			}
			for i := range want {
				// A call naming the stream goes through the SDK client, which signs its first
				// attempt at its own time too.
				compareRequests(t, i+1, want[i], got[i], i == 0 && in.StreamARN == nil)
			}
			lean := wantErr == nil && c.requests == 1 && in.StreamARN == nil // else the SDK's stack
			if sdkCalls := leanOps.Load() - before; lean != (sdkCalls == 0) {
				t.Errorf("the lean path made %d calls through the SDK's stack", sdkCalls)
			} else if sdkCalls == 0 {
				leanHandled++
			}
			compareResults(t, wantOut, gotOut, wantErr, gotErr)
		})
	}
	if leanHandled == 0 {
		t.Fatal("no call was answered on the lean path")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if viaWire && h2 != (w.proto == protoH2 && len(w.h2conns) == 1) {
		t.Errorf("the wire speaks %v on %d HTTP/2 connections, want HTTP/2: %v", w.proto, len(w.h2conns), h2)
	}
}

// compareRequests compares attempt n of the SDK (want) and of the lean path (got); pinned: got was
// signed at the time want was (a first attempt of the lean path's own), so its date and signature
// are compared too.
func compareRequests(t *testing.T, n int, want, got recorded, pinned bool) {
	t.Helper()
	if want.method != got.method || want.path != got.path {
		t.Errorf("attempt %d: %s %s, want %s %s", n, got.method, got.path, want.method, want.path)
	}
	if !bytes.Equal(want.body, got.body) {
		t.Errorf("attempt %d: body\n%s\nwant\n%s", n, got.body, want.body)
	}
	skip := []string{"User-Agent"} // its feature list (m/…) names what each call used
	if !pinned {
		skip = append(skip, "X-Amz-Date", "Authorization") // signed when they are made
	}
	for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Target", "Content-Type", "Content-Length", "X-Amz-Security-Token", "Amz-Sdk-Request", "Amz-Sdk-Invocation-Id"} {
		if want.header.Get(k) == "" {
			t.Errorf("attempt %d: the SDK's request has no %s", n, k)
		}
	}
	keys := func(h http.Header) []string {
		var ks []string
		for k := range h {
			if !slices.Contains(skip, k) {
				ks = append(ks, k)
			}
		}
		slices.Sort(ks)
		return ks
	}
	if wk, gk := keys(want.header), keys(got.header); !slices.Equal(wk, gk) {
		t.Errorf("attempt %d: headers %v, want %v", n, gk, wk)
	}
	for _, k := range keys(want.header) {
		if w, g := want.header.Values(k), got.header.Values(k); !slices.Equal(w, g) {
			t.Errorf("attempt %d: %s: %q, want %q", n, k, g, w)
		}
	}
}

// compareResults compares the outputs and errors of the two calls.
func compareResults(t *testing.T, wantOut, gotOut *kinesis.GetRecordsOutput, wantErr, gotErr error) {
	t.Helper()
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("error %v, want %v", gotErr, wantErr)
	}
	if wantErr != nil {
		if gotErr.Error() != wantErr.Error() {
			t.Errorf("error\n%v\nwant\n%v", gotErr, wantErr)
		}
		for _, same := range []func(error) bool{
			isA[*types.ProvisionedThroughputExceededException], isA[*types.ExpiredIteratorException],
			isA[*types.InvalidArgumentException], isA[*types.KMSThrottlingException], isA[*types.AccessDeniedException],
			isA[*types.ResourceNotFoundException], isA[*smithy.GenericAPIError], isA[*smithy.DeserializationError],
			isA[*smithy.OperationError], isA[*retry.MaxAttemptsError], isA[*smithyhttp.RequestSendError],
			isA[*smithyhttp.ResponseError],
		} {
			if same(gotErr) != same(wantErr) {
				t.Errorf("error %T %v: the error types it wraps differ from the SDK's %T", gotErr, gotErr, wantErr)
			}
		}
		return
	}
	wantOut.ResultMetadata, gotOut.ResultMetadata = middleware.Metadata{}, middleware.Metadata{}
	if !reflect.DeepEqual(wantOut, gotOut) {
		t.Errorf("output\n%+v\nwant\n%+v", gotOut, wantOut)
	}
}

func isA[T error](err error) bool {
	_, ok := errors.AsType[T](err)
	return ok
}

// TestClockSkewAsSDK: after an answer whose Date header is ten minutes ahead of the local clock,
// the next request of the lean path is signed ten minutes ahead, and its Amz-Sdk-Request names the
// call's deadline in the server's time, as the SDK's next request does.
func TestClockSkewAsSDK(t *testing.T) {
	const ahead = 10 * time.Minute
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	var reqs []http.Header
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Date", time.Now().Add(ahead).UTC().Format(http.TimeFormat))
		_, _ = io.WriteString(w, `{"Records":[],"NextShardIterator":"AAAAAAAAAAH2","MillisBehindLatest":0}`)
	})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	defer cancel()
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAH1")}
	second := func(call func() error) http.Header {
		mu.Lock()
		reqs = nil
		mu.Unlock()
		for range 2 {
			if err := call(); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(reqs) != 2 {
			t.Fatalf("%d requests, want 2", len(reqs))
		}
		return reqs[1]
	}
	var ops atomic.Int64
	sdk := sdkClient(srv.URL, &ops)
	lean := New(sdkClient(srv.URL, &ops))
	want := second(func() error { _, err := sdk.GetRecords(ctx, in); return err })
	before := ops.Load()
	got := second(func() error { _, err := lean.GetRecords(ctx, in); return err })
	if n := ops.Load() - before; n != 1 { // the template only
		t.Fatalf("%d calls through the SDK's stack, want 1 (the template)", n)
	}
	for _, h := range []http.Header{want, got} {
		signed, err := time.Parse("20060102T150405Z", h.Get("X-Amz-Date"))
		if err != nil {
			t.Fatal(err)
		}
		if d := signed.Sub(time.Now().Add(ahead)); d < -5*time.Second || d > 5*time.Second {
			t.Errorf("signed at %s, %s from the server's clock", signed, d)
		}
	}
	ttl := func(h http.Header) time.Time {
		_, v, ok := strings.Cut(h.Get("Amz-Sdk-Request"), "; ttl=")
		at, err := time.Parse("20060102T150405Z", v)
		if !ok || err != nil {
			t.Fatalf("Amz-Sdk-Request %q names no ttl", h.Get("Amz-Sdk-Request"))
		}
		return at
	}
	if d := ttl(got).Sub(ttl(want)); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("Amz-Sdk-Request %q, want %q", got.Get("Amz-Sdk-Request"), want.Get("Amz-Sdk-Request"))
	}
}

// TestCancelledOnTheWire: a call whose context ends while the server holds it fails, on both
// paths, with an error that is context.Canceled, and makes no other request.
func TestCancelledOnTheWire(t *testing.T) {
	held := make(chan struct{}, 4)
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server sees the client go
		requests.Add(1)
		held <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	var ops atomic.Int64
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAH1")}
	lean := New(sdkClient(srv.URL, &ops))
	if _, err := lean.template(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func(context.Context) error{
		"sdk":  func(ctx context.Context) error { _, err := sdkClient(srv.URL, &ops).GetRecords(ctx, in); return err },
		"lean": func(ctx context.Context) error { _, err := lean.GetRecords(ctx, in); return err },
	} {
		requests.Store(0)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-held; cancel() }()
		if err := call(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", name, err)
		}
		if n := requests.Load(); n != 1 {
			t.Errorf("%s: %d requests, want 1", name, n)
		}
	}
}

// TestConcurrentCallsShareNothing: the pollers of many shards call one Client at once, so each
// request must be its own. Under -race this fails when requests share the template's URL, which
// the signer writes while another request is on the wire.
func TestConcurrentCallsShareNothing(t *testing.T) {
	srv, served, _ := emptyServer(t, false)
	var ops atomic.Int64
	c := New(sdkClient(srv.URL, &ops))
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAA"), Limit: aws.Int32(10)}
	const workers, calls = 8, 20
	callAtOnce(t, c, in, workers, calls, "")
	if got := served.Load(); got != workers*calls {
		t.Fatalf("the server answered %d calls, want %d", got, workers*calls)
	}
}

// callAtOnce makes calls GetRecords calls of in on c from each of workers goroutines at once, and
// fails the test on an error or, with next set, an answer whose next iterator is not next.
func callAtOnce(t *testing.T, c *Client, in *kinesis.GetRecordsInput, workers, calls int, next string) {
	t.Helper()
	for _, err := range callsAtOnce(c, in, workers, calls, next) {
		t.Fatal(err)
	}
}

// callsAtOnce is callAtOnce returning the errors, for a goroutine other than the test's.
func callsAtOnce(c *Client, in *kinesis.GetRecordsInput, workers, calls int, next string) []error {
	var wg sync.WaitGroup
	errs := make(chan error, workers*calls)
	for range workers {
		wg.Go(func() {
			for range calls {
				out, err := c.GetRecords(context.Background(), in)
				if err == nil && next != "" && aws.ToString(out.NextShardIterator) != next {
					err = errors.New("next iterator " + aws.ToString(out.NextShardIterator))
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return all
}
