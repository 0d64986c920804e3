package getrecords

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

const emptyAnswer = `{"Records":[],"NextShardIterator":"AAAAAAAAAAH2","MillisBehindLatest":0}`

// emptyServer answers every request with no records and counts the requests and the
// connections it accepted.
func emptyServer(t *testing.T, tls bool) (srv *httptest.Server, requests, conns *atomic.Int64) {
	requests, conns = new(atomic.Int64), new(atomic.Int64)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		requests.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = io.WriteString(w, emptyAnswer)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, requests, conns
}

// TestServerClosedIdleConnection: a kept-alive connection the server closed while it was idle is
// not used again (net/http's transport notices that between requests, and so does the wire): the
// next call dials a new one and is answered on the lean path at its first attempt. Without the
// check, the request is written on the closed connection, fails, and the SDK retries it.
func TestServerClosedIdleConnection(t *testing.T) {
	srv, requests, conns := emptyServer(t, false)
	var ops atomic.Int64
	c := New(sdkClient(srv.URL, &ops))
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAH1")}
	ctx := context.Background()
	if _, err := c.GetRecords(ctx, in); err != nil {
		t.Fatal(err)
	}
	if c.tmpl.wire == nil || c.tmpl.wire.sent.Load() != 1 {
		t.Fatal("the first call did not go over the wire")
	}
	srv.CloseClientConnections()
	before := ops.Load()
	for range 3 {
		if _, err := c.GetRecords(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if n := ops.Load() - before; n != 0 {
		t.Errorf("%d calls went through the SDK's stack (a retry), want 0", n)
	}
	if r, cs := requests.Load(), conns.Load(); r != 4 || cs != 2 {
		t.Errorf("the server got %d requests on %d connections, want 4 on 2", r, cs)
	}
}

// TestWireOverTLS: over HTTPS the wire dials TLS with the SDK transport's configuration (here the
// test server's certificate as the only root, as AWS_CA_BUNDLE sets it) and keeps the connection.
func TestWireOverTLS(t *testing.T) {
	srv, requests, conns := emptyServer(t, true)
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	kin := kinesis.New(kinesis.Options{
		Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.TLSClientConfig.RootCAs = roots
		}),
	})
	c := New(kin)
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAH1")}
	for range 3 {
		out, err := c.GetRecords(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(out.NextShardIterator) != "AAAAAAAAAAH2" {
			t.Fatalf("next iterator %q", aws.ToString(out.NextShardIterator))
		}
	}
	if c.tmpl.wire == nil || c.tmpl.wire.tls == nil || c.tmpl.wire.sent.Load() != 3 {
		t.Fatal("the calls did not go over the wire with TLS")
	}
	if r, cs := requests.Load(), conns.Load(); r != 3 || cs != 1 {
		t.Errorf("the server got %d requests on %d connections, want 3 on 1", r, cs)
	}
}

// TestNoWireWhereNetHTTPDiffers: with a proxy for the endpoint, a client timeout or an HTTP
// client that is not the SDK's buildable one, the lean path sends through the SDK's HTTP client
// (the wire would not send what it sends).
func TestNoWireWhereNetHTTPDiffers(t *testing.T) {
	u, _ := url.Parse("https://kinesis.eu-west-1.amazonaws.com/")
	proxy, _ := url.Parse("http://127.0.0.1:1")
	for name, hc := range map[string]kinesis.HTTPClient{
		"proxy":    awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.Proxy = http.ProxyURL(proxy) }),
		"timeout":  awshttp.NewBuildableClient().WithTimeout(1),
		"net/http": http.DefaultClient,
	} {
		if newWire(hc, u) != nil {
			t.Errorf("%s: a wire", name)
		}
	}
	if newWire(awshttp.NewBuildableClient(), u) == nil {
		t.Error("no wire for the SDK's default client")
	}
}

// FuzzDecodeEmptyAsSDK: whatever body decodeEmpty takes, the SDK's protocol decodes to the same
// output (the seeds: the forms it takes and near misses it must leave to the SDK).
func FuzzDecodeEmptyAsSDK(f *testing.F) {
	for _, seed := range []string{
		emptyAnswer,
		`{"MillisBehindLatest":0,"NextShardIterator":"AAAA","Records":[]}`,
		" { \"Records\" : [ ] , \"NextShardIterator\" : \"A+/=\" , \"MillisBehindLatest\" : 86400000 } \n",
		`{"Records":[],"NextShardIterator":"AAAA","MillisBehindLatest":0,"ChildShards":[]}`,
		`{"Records":[],"NextShardIterator":"AAAA","MillisBehindLatest":1.5}`,
		`{"Records":[],"NextShardIterator":"AAAA","MillisBehindLatest":-1}`,
		`{"Records":[],"NextShardIterator":"AAAA","MillisBehindLatest":01}`,
		`{"Records":[],"NextShardIterator":null,"MillisBehindLatest":0}`,
		`{"Records":[],"NextShardIterator":"AAAA","MillisBehindLatest":0,"Records":[]}`,
		`{"Records":[],"NextShardIterator":"AA\"AA","MillisBehindLatest":0}`,
		`{"Records":[],"MillisBehindLatest":0}`,
		`{"Records":[],"NextShardIterator":"AAAA","MillisBehindLatest":0}x`,
		`{"ChildShards":null,"MillisBehindLatest":0,"NextShardIterator":"AAAA","Records":null,"ResultMetadata":{}}`,
		`{"Records":[],"NextShardIterator":"AAAA","MillisBehindLatest":0,"New":[1,-2,{"a":["b",true,false,null]}]}`,
		`{"Records":[],"NextShardIterator":"AAAA","MillisBehindLatest":0,"New":"\u00e9"}`,
		`{"Records":[],"NextShardIterator":"AAAA","MillisBehindLatest":0,"New":1e5}`,
		`{"Records":[],"NextShardIterator":"AAAA","MillisBehindLatest":0,"ChildShards":[]}`,
	} {
		f.Add(seed)
	}
	var ops atomic.Int64
	c := New(sdkClient("http://127.0.0.1:1", &ops))
	f.Fuzz(func(t *testing.T, body string) {
		var got kinesis.GetRecordsOutput
		if !decodeEmpty([]byte(body), &got) {
			if !reflect.DeepEqual(got, kinesis.GetRecordsOutput{}) {
				t.Fatalf("%q: not taken, but the output was written: %+v", body, got)
			}
			return
		}
		var want kinesis.GetRecordsOutput
		resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
		if err := c.opts.Protocol.DeserializeResponse(context.Background(), c.op, kinesis.TypeRegistry, &smithyhttp.Response{Response: resp}, &want); err != nil {
			t.Fatalf("%q: taken, but the SDK fails: %v", body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %+v, the SDK's %+v", body, got, want)
		}
	})
}

// TestInformationalAnswerSkipped: a 1xx answer before the real one (here 103 Early Hints) is
// read past, as net/http's transport does; the request is sent once.
func TestInformationalAnswerSkipped(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		requests.Add(1)
		w.Header().Set("Link", "</x>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = io.WriteString(w, emptyAnswer)
	}))
	t.Cleanup(srv.Close)
	var ops atomic.Int64
	c := New(sdkClient(srv.URL, &ops))
	if _, err := c.template(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := ops.Load()
	out, err := c.GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAH1")})
	if err != nil || aws.ToString(out.NextShardIterator) != "AAAAAAAAAAH2" {
		t.Fatalf("%v, %+v", err, out)
	}
	if r, o, sent := requests.Load(), ops.Load()-before, c.tmpl.wire.sent.Load(); r != 1 || o != 0 || sent != 1 {
		t.Errorf("%d requests, %d through the SDK's stack, %d over the wire; want 1, 0, 1", r, o, sent)
	}
}

// TestInvalidHeaderNotWritten: a header value net/http refuses to send is not written by the
// wire either: the request goes to the SDK's HTTP client, which fails it as the SDK's own call
// does. A request's own (here a session token with a line break, which the signer puts in
// X-Amz-Security-Token) is checked with each call; one of the template's (here one an API option
// adds to every request) is checked once, and keeps the wire off.
func TestInvalidHeaderNotWritten(t *testing.T) {
	for _, c := range []struct {
		name     string
		opts     func(*kinesis.Options)
		template bool
	}{
		{"session token", func(o *kinesis.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "token\r\nX-Injected: 1")
		}, false},
		{"template", func(o *kinesis.Options) {
			o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue("X-Extra", "a\r\nX-Injected: 1"))
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, requests, _ := emptyServer(t, false)
			var ops atomic.Int64
			sdk := kinesis.New(sdkClient(srv.URL, &ops).Options(), c.opts)
			lean := New(kinesis.New(sdkClient(srv.URL, &ops).Options(), c.opts))
			in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAH1")}
			_, wantErr := sdk.GetRecords(context.Background(), in)
			_, gotErr := lean.GetRecords(context.Background(), in)
			if wantErr == nil || gotErr == nil || gotErr.Error() != wantErr.Error() {
				t.Fatalf("error %v, want %v", gotErr, wantErr)
			}
			if n := requests.Load(); n != 0 {
				t.Errorf("the server got %d requests", n)
			}
			switch {
			case lean.tmpl == nil:
				t.Error("the lean path has no template")
			case c.template && lean.tmpl.wire != nil:
				t.Error("the lean path has a wire for a template net/http refuses")
			case !c.template && (lean.tmpl.wire == nil || lean.tmpl.wire.sent.Load() != 0):
				t.Error("the wire wrote the request (or was off)")
			}
		})
	}
}

// reads hands out its chunks one Read at a time, as a connection whose answer arrives in parts.
type reads [][]byte

func (r *reads) Read(p []byte) (int, error) {
	if len(*r) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*r)[0])
	if (*r)[0] = (*r)[0][n:]; len((*r)[0]) == 0 {
		*r = (*r)[1:]
	}
	return n, nil
}

// TestEmptyAnswerInParts: an idle shard's answer whose body arrives after its head (a TLS record
// of its own) is still decoded in place, and all of it consumed; one that does not fit the
// buffer is left whole for http.ReadResponse.
func TestEmptyAnswerInParts(t *testing.T) {
	head := "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\nDate: Wed, 02 Dec 2026 01:02:03 GMT\r\nContent-Length: " +
		strconv.Itoa(len(emptyAnswer)) + "\r\n\r\n"
	br := bufio.NewReaderSize(&reads{[]byte(head), []byte(emptyAnswer)}, 4096)
	if _, err := br.Peek(1); err != nil || br.Buffered() != len(head) {
		t.Fatalf("%d bytes buffered (%v), want the head's %d", br.Buffered(), err, len(head))
	}
	var out kinesis.GetRecordsOutput
	q, closing := peekEmpty(br, &out)
	if !q.ok || closing || string(q.date[:q.dateLen]) != "Wed, 02 Dec 2026 01:02:03 GMT" || aws.ToString(out.NextShardIterator) != "AAAAAAAAAAH2" {
		t.Fatalf("%+v, %+v", q, out)
	}
	if _, err := br.Peek(1); err != io.EOF {
		t.Errorf("the answer was not all consumed: %v", err)
	}

	big := `{"Records":[],"NextShardIterator":"` + strings.Repeat("A", 5000) + `","MillisBehindLatest":0}`
	head = "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n"
	br = bufio.NewReaderSize(&reads{[]byte(head), []byte(big)}, 4096)
	_, _ = br.Peek(1)
	if q, _ := peekEmpty(br, &kinesis.GetRecordsOutput{}); q.ok || br.Buffered() != len(head) {
		t.Fatalf("a %d-byte answer was taken (%v) or consumed (%d buffered)", len(big), q.ok, br.Buffered())
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.ContentLength != int64(len(big)) {
		t.Fatalf("http.ReadResponse after it: %v", err)
	}
}
