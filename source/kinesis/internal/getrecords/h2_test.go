package getrecords

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// h2Server is a test server over TLS that offers HTTP/2 (as AWS's endpoints do) and counts the
// requests and connections, answering with answer.
func h2Server(t *testing.T, answer http.HandlerFunc) (srv *httptest.Server, requests, conns *atomic.Int64) {
	requests, conns = new(atomic.Int64), new(atomic.Int64)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.ProtoMajor != 2 {
			http.Error(w, "HTTP/2 only", http.StatusHTTPVersionNotSupported)
			return
		}
		answer(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, requests, conns
}

// bounded is a context for a call that must end: it fails the call, instead of hanging the
// test, where the wire would wait for ever.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func answerEmpty(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_, _ = io.WriteString(w, emptyAnswer)
}

// leanOver is the lean path of a client of srv, with its wire (HTTP/2 once it has dialled),
// closed when the test ends.
func leanOver(t *testing.T, srv *httptest.Server, ops *atomic.Int64) (*Client, *wire) {
	c := New(sdkClient(srv.URL, ops, trusting(srv)))
	tmpl, err := c.template(context.Background())
	if err != nil || tmpl.wire == nil || !tmpl.wire.h2 {
		t.Fatalf("the lean path has no wire offering HTTP/2 (%v)", err)
	}
	t.Cleanup(tmpl.wire.close)
	return c, tmpl.wire
}

// TestH2CallsShareAConnection: the calls of many shards at once go as streams of one HTTP/2
// connection (the server allows 250 at once; over HTTP/1.1 each call in flight needs its own),
// each answered on the lean path, and the connection's goroutines end with the wire.
func TestH2CallsShareAConnection(t *testing.T) {
	srv, requests, conns := h2Server(t, answerEmpty)
	var ops atomic.Int64
	c, w := leanOver(t, srv, &ops)
	captured := ops.Load() // the template's call
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAH1"), Limit: aws.Int32(10000)}
	const shards, polls = 200, 5
	callAtOnce(t, c, in, shards, polls, "AAAAAAAAAAH2")
	if n := requests.Load(); n != shards*polls {
		t.Fatalf("the server got %d requests, want %d", n, shards*polls)
	}
	if n := w.quick.Load(); n != shards*polls {
		t.Errorf("%d answers decoded on the lean path, want %d", n, shards*polls)
	}
	if n := ops.Load() - captured; n != 0 {
		t.Errorf("%d calls went through the SDK's stack", n)
	}
	w.mu.Lock()
	proto, h2conns := w.proto, len(w.h2conns)
	w.mu.Unlock()
	if proto != protoH2 || h2conns != 1 || conns.Load() != 1 {
		t.Errorf("the wire speaks %v on %d HTTP/2 connections, the server saw %d, want HTTP/2 on 1", proto, h2conns, conns.Load())
	}
	w.close()
	connGoroutinesEnd(t)
}

// connGoroutinesEnd waits until no goroutine of an HTTP/2 connection of the wire is left (close
// waits for its read loop; its flusher ends right after), failing the test if one stays.
func connGoroutinesEnd(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	testkit.WaitFor(t, "the goroutines of the closed HTTP/2 connection to end", 10*time.Second, func() bool {
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "getrecords.(*h2conn)")
	})
}

// TestH2LargeAnswer: an answer larger than a stream's receive window (a GetRecords answer may be
// 10 MiB; the window is 4 MiB) arrives whole: the wire gives the window back as it reads. Without
// that, the server stops sending and the call never ends.
func TestH2LargeAnswer(t *testing.T) {
	data := strings.Repeat("QUJD", 6<<20/4) // 6 MiB of base64
	body := `{"Records":[{"SequenceNumber":"1","ApproximateArrivalTimestamp":1.7e9,"Data":"` + data + `","PartitionKey":"p"}],"NextShardIterator":"AAAAAAAAAAH2","MillisBehindLatest":0}`
	srv, _, _ := h2Server(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = io.WriteString(w, body)
	})
	var ops atomic.Int64
	c, w := leanOver(t, srv, &ops)
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAH1")}
	for range 3 { // 18 MiB on one connection
		out, err := c.GetRecords(bounded(t), in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Records) != 1 || len(out.Records[0].Data) != len(data)/4*3 {
			t.Fatalf("got %d records", len(out.Records))
		}
	}
	if n := w.sent.Load(); n != 3 {
		t.Errorf("the wire sent %d requests, want 3", n)
	}
}

// TestH2Cancelled: a call whose context ends while the server holds its stream fails with
// context.Canceled, the server sees the stream cancelled, and the connection serves the next call.
func TestH2Cancelled(t *testing.T) {
	held, gone := make(chan struct{}, 1), make(chan struct{}, 1)
	var hold atomic.Bool
	hold.Store(true)
	srv, requests, conns := h2Server(t, func(w http.ResponseWriter, r *http.Request) {
		if hold.Load() {
			_, _ = io.Copy(io.Discard, r.Body)
			held <- struct{}{}
			<-r.Context().Done()
			gone <- struct{}{}
			return
		}
		answerEmpty(w, r)
	})
	var ops atomic.Int64
	c, _ := leanOver(t, srv, &ops)
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAH1")}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-held; cancel() }()
	if _, err := c.GetRecords(ctx, in); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
	select { // the server sees the stream reset
	case <-gone:
	case <-bounded(t).Done():
		t.Fatal("the server did not see the cancelled stream end")
	}
	hold.Store(false)
	if _, err := c.GetRecords(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if r, cs := requests.Load(), conns.Load(); r != 2 || cs != 1 {
		t.Errorf("the server got %d requests on %d connections, want 2 on 1", r, cs)
	}
}

// TestH2StreamReset: a stream the server resets fails as the SDK's own call fails on it: the
// same requests (the SDK retries a reset stream as it retries any send failure) and the same end.
// Started with StartGetRecords (async), the reset stream's call is finished by its finish.
func TestH2StreamReset(t *testing.T) {
	for _, async := range []bool{false, true} {
		for _, resets := range []int64{1, 5} {
			t.Run(fmt.Sprintf("%d async=%t", resets, async), func(t *testing.T) { h2StreamReset(t, resets, async) })
		}
	}
}

func h2StreamReset(t *testing.T, resets int64, async bool) {
	var n atomic.Int64
	srv, requests, _ := h2Server(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= resets {
			panic(http.ErrAbortHandler) // RST_STREAM
		}
		answerEmpty(w, r)
	})
	var sdkOps, leanOps atomic.Int64
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAH1")}
	_, wantErr := sdkClient(srv.URL, &sdkOps, trusting(srv)).GetRecords(context.Background(), in)
	wantRequests := requests.Load()
	n.Store(0)
	requests.Store(0)
	c, w := leanOver(t, srv, &leanOps)
	var gotErr error
	if async {
		// A first call, answered, tells the wire that the endpoint speaks HTTP/2.
		n.Store(resets)
		if _, err := c.GetRecords(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		n.Store(0)
		requests.Store(0)
		w.sent.Store(0)
		_, gotErr = startAndWait(context.Background(), c, in)
		if c.onStream.Load() != 1 {
			t.Errorf("%d calls sent as a stream no goroutine waits on, want 1", c.onStream.Load())
		}
	} else {
		_, gotErr = c.GetRecords(context.Background(), in)
	}
	if (gotErr == nil) != (wantErr == nil) || requests.Load() != wantRequests {
		t.Errorf("%d requests, error %v; the SDK made %d, error %v", requests.Load(), gotErr, wantRequests, wantErr)
	}
	if w.sent.Load() != 1 {
		t.Errorf("the wire sent %d requests, want the first attempt", w.sent.Load())
	}
}

// scripted is an HTTP/2 server over TLS whose connections each run serve on their framer (the
// preface read, the server's SETTINGS sent). It returns its URL and an SDK HTTP client that
// trusts it.
func scripted(t *testing.T, serve func(fr *http2.Framer)) (string, *awshttp.BuildableClient) {
	certs := httptest.NewUnstartedServer(nil) // for its certificate only
	certs.StartTLS()
	cert, roots := certs.TLS.Certificates, x509.NewCertPool()
	roots.AddCert(certs.Certificate())
	certs.Close()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: cert, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, conn)
			mu.Unlock()
			wg.Go(func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				preface := make([]byte, len(http2.ClientPreface))
				if _, err := io.ReadFull(br, preface); err != nil || string(preface) != http2.ClientPreface {
					return
				}
				fr := http2.NewFramer(conn, br)
				if fr.WriteSettings() != nil {
					return
				}
				serve(fr)
			})
		}
	})
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.TLSClientConfig.RootCAs = roots })
	return "https://" + ln.Addr().String(), hc
}

// answerFrames writes an empty answer on stream id.
func answerFrames(fr *http2.Framer, id uint32) error {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	_ = enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/x-amz-json-1.1"})
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	return fr.WriteData(id, true, []byte(emptyAnswer))
}

// requestEnds reads frames until a request's stream has ended (its DATA with END_STREAM),
// answering PINGs and SETTINGS, and returns its id.
func requestEnds(fr *http2.Framer) (uint32, error) {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return 0, err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					return 0, err
				}
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				return f.StreamID, nil
			}
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				return f.StreamID, nil
			}
		}
	}
}

// TestH2GoAway: a server's GOAWAY ends the connection for new calls: a call whose stream it did
// not process is sent again (on another connection, answered), the one it processed is answered
// on the old one, and the next calls dial a new connection.
func TestH2GoAway(t *testing.T) {
	var accepted, answered atomic.Int64
	url, hc := scripted(t, func(fr *http2.Framer) {
		if accepted.Add(1) > 1 { // later connections answer everything
			for {
				id, err := requestEnds(fr)
				if err != nil {
					return
				}
				answered.Add(1) // before the answer: the client may check as soon as it has it
				if answerFrames(fr, id) != nil {
					return
				}
			}
		}
		// The first takes two streams, processes the first only, then goes away.
		first, err := requestEnds(fr)
		if err != nil {
			return
		}
		second, err := requestEnds(fr)
		if err != nil {
			return
		}
		answered.Add(1)
		if fr.WriteGoAway(first, http2.ErrCodeNo, nil) != nil || answerFrames(fr, first) != nil {
			return
		}
		_ = second
		_, _ = requestEnds(fr) // until the client closes (nothing more comes on it)
	})
	kin := sdkClient(url, new(atomic.Int64), func(o *kinesis.Options) { o.HTTPClient = hc })
	c := New(kin)
	tmpl, err := c.template(context.Background())
	if err != nil || tmpl.wire == nil {
		t.Fatal("no wire", err)
	}
	w := tmpl.wire
	t.Cleanup(w.close)
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAH1")}
	// Two calls at once on the first connection: hold the second until the first is on it.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			_, err := c.GetRecords(bounded(t), in)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := c.GetRecords(bounded(t), in); err != nil {
			t.Fatal(err)
		}
	}
	// The wire wrote 4 requests (2 on the first connection, 2 on the next), the SDK's HTTP client
	// the one the GOAWAY left unprocessed: 4 answered, 1 on the first connection.
	if a, n, sent := accepted.Load(), answered.Load(), w.sent.Load(); a < 2 || n != 4 || sent != 4 {
		t.Errorf("%d connections, %d requests answered, %d written by the wire; want a new connection after the GOAWAY, 4, 4", a, n, sent)
	}
}

// TestH2SendWindow: the wire sends no more request bytes than the server's window allows (65,535
// until it grants more): calls past it wait, and go once the server's WINDOW_UPDATE comes.
func TestH2SendWindow(t *testing.T) {
	iterator := strings.Repeat("A", 1000) // a body of 1,032 bytes: 63 fit the window
	release, stop := make(chan struct{}), make(chan struct{})
	var overrun, answered atomic.Int64
	url, hc := scripted(t, func(fr *http2.Framer) {
		received, allowed := 0, 65535
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() && fr.WriteSettingsAck() != nil {
					return
				}
			case *http2.DataFrame:
				if received += int(f.Length); received > allowed {
					overrun.Add(1)
				}
				if f.StreamEnded() {
					answered.Add(1)
					if answerFrames(fr, f.StreamID) != nil {
						return
					}
				}
				if allowed == 65535 && received+1032 > allowed { // the window is spent: wait for the test
					select {
					case <-release:
					case <-stop:
						return
					}
					allowed += 1 << 20
					if fr.WriteWindowUpdate(0, 1<<20) != nil {
						return
					}
				}
			}
		}
	})
	t.Cleanup(func() { close(stop) }) // before scripted's cleanup waits for the server
	c := New(sdkClient(url, new(atomic.Int64), func(o *kinesis.Options) { o.HTTPClient = hc }))
	tmpl, err := c.template(context.Background())
	if err != nil || tmpl.wire == nil {
		t.Fatal("no wire", err)
	}
	w := tmpl.wire
	t.Cleanup(w.close)
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String(iterator), Limit: aws.Int32(100)}
	done := make(chan []error, 1)
	go func() { done <- callsAtOnce(c, in, 100, 1, "AAAAAAAAAAH2") }()
	// The server takes 63 requests and waits; the other 37 calls wait for the window.
	testkit.WaitFor(t, "63 requests within the window and calls waiting for more", 20*time.Second, func() bool {
		return w.waited.Load() > 0 && answered.Load() >= 63
	})
	if n := answered.Load(); n != 63 {
		t.Errorf("%d requests within the window, want 63", n)
	}
	close(release)
	for _, err := range <-done {
		t.Fatal(err)
	}
	if n, o := answered.Load(), overrun.Load(); n != 100 || o != 0 {
		t.Errorf("%d requests answered, %d DATA frames past the window; want 100, 0", n, o)
	}
}

// FuzzH2Answer: whatever frames a server sends after its SETTINGS, a call on the connection ends
// (an answer or an error, within its context) without a panic, and the connection's goroutines
// end when it is closed. An idle answer it decodes has a next iterator.
func FuzzH2Answer(f *testing.F) {
	frames := func(write func(fr *http2.Framer)) []byte {
		var b bytes.Buffer
		write(http2.NewFramer(&b, nil))
		return b.Bytes()
	}
	f.Add(frames(func(fr *http2.Framer) { _ = answerFrames(fr, 1) }))
	f.Add(frames(func(fr *http2.Framer) { _ = fr.WriteRSTStream(1, http2.ErrCodeRefusedStream) }))
	f.Add(frames(func(fr *http2.Framer) { _ = fr.WriteGoAway(0, http2.ErrCodeNo, nil) }))
	f.Add(frames(func(fr *http2.Framer) {
		_ = fr.WritePing(false, [8]byte{1})
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 0}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
		_ = fr.WriteWindowUpdate(0, 100)
		_ = answerFrames(fr, 1)
	}))
	f.Add(frames(func(fr *http2.Framer) {
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "100"})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
		hb.Reset()
		_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "400"})
		_ = enc.WriteField(hpack.HeaderField{Name: "content-encoding", Value: "gzip"})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: false})
		_ = fr.WriteContinuation(1, true, nil)
		_ = fr.WriteData(1, true, []byte(`{"__type":"ExpiredIteratorException"}`))
	}))
	tmpl := &http.Request{Method: http.MethodPost, Host: "kinesis.test", URL: &url.URL{Scheme: "https", Host: "kinesis.test", Path: "/"},
		Header: http.Header{"Content-Type": {"application/x-amz-json-1.1"}, "X-Amz-Target": {"Kinesis_20131202.GetRecords"}}}
	f.Fuzz(func(t *testing.T, server []byte) {
		client, srv := net.Pipe()
		defer srv.Close()
		go func() { _, _ = io.Copy(io.Discard, srv) }() // what the client writes
		go func() {
			_, _ = srv.Write(frames(func(fr *http2.Framer) { _ = fr.WriteSettings() }))
			_, _ = srv.Write(server)
			_ = srv.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w := &wire{gzip: true, lower: lowerNames(tmpl.Header)}
		c, err := newH2Conn(ctx, w, client)
		if err != nil {
			return // the server's SETTINGS did not arrive whole: the pipe closed under it
		}
		defer c.close()
		if !c.reserve() {
			return
		}
		out := &kinesis.GetRecordsOutput{}
		_, q, err := c.roundTrip(ctx, tmpl, []byte(`{"ShardIterator":"AAAA"}`), new(bytes.Buffer), out)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("the call did not end with the server's frames")
		}
		if err == nil && q.ok && out.NextShardIterator == nil {
			t.Fatal("an idle answer decoded without a next iterator")
		}
	})
}

// TestH2Batch: the requests of calls started within a batch wait in their connection's buffer
// until the batch is sent (the last of two overlapping batches), then leave together and are
// answered.
func TestH2Batch(t *testing.T) {
	srv, requests, _ := h2Server(t, answerEmpty)
	c, w := leanOver(t, srv, new(atomic.Int64))
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAH1"), Limit: aws.Int32(10000)}
	if _, err := c.GetRecords(bounded(t), in); err != nil { // opens the HTTP/2 connection
		t.Fatal(err)
	}
	heldBefore := w.heldWrites.Load()
	send, other := c.Batch(), c.Batch()
	const calls = 5
	results := make(chan error, calls)
	for range calls {
		if !c.StartGetRecords(bounded(t), in, func(out *kinesis.GetRecordsOutput, finish func() (*kinesis.GetRecordsOutput, error)) {
			var err error
			if finish != nil {
				out, err = finish()
			}
			if err == nil && aws.ToString(out.NextShardIterator) != "AAAAAAAAAAH2" {
				err = errors.New("next iterator " + aws.ToString(out.NextShardIterator))
			}
			results <- err
		}) {
			t.Fatal("a call was not started on the HTTP/2 connection")
		}
	}
	heldConns := func() int {
		w.batchMu.Lock()
		defer w.batchMu.Unlock()
		return len(w.held)
	}
	if n := w.heldWrites.Load() - heldBefore; n != calls || heldConns() != 1 {
		t.Fatalf("%d requests of %d waited for the batch, on %d connections; want all, on 1", n, calls, heldConns())
	}
	other()
	if heldConns() != 1 {
		t.Fatal("the requests were sent when one of two overlapping batches was")
	}
	send()
	send() // a second send does nothing
	for range calls {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if requests.Load() != calls+1 || heldConns() != 0 {
		t.Fatalf("the server got %d requests, %d connections still wait; want %d and none", requests.Load(), heldConns(), calls+1)
	}
	if _, err := c.GetRecords(bounded(t), in); err != nil || w.heldWrites.Load()-heldBefore != calls { // no batch: sent at once
		t.Fatalf("a call after the batch: %v, %d requests waited", err, w.heldWrites.Load()-heldBefore)
	}
}
