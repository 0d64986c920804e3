// Package rie holds the end-to-end tests of esm driving an unmodified Lambda bootstrap (the
// example function, plain lambda.Start) under aws-lambda-rie over HTTP, from records in
// kinesis-local: success, handler errors, panics, timeouts, a pool of instances serving many
// shards, and the event JSON compared with the same handler run in-process. Everything binds
// 127.0.0.1.
package rie

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"go.uber.org/goleak"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/httpinvoke"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// bootstrapPackage is the example function's Lambda entry point.
const bootstrapPackage = "github.com/kinesis-esm/esm/example/bootstrap"

var (
	kinesisEndpoint string
	kin             *kinesis.Client
	rieBin          string // aws-lambda-rie, the version pinned in go.mod
	bootstrapBin    string // the example function as a bootstrap for this machine
	streamSeq       atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stop func()
	var err error
	if kinesisEndpoint, kin, stop, err = testenv.Kinesis(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stopOnce := sync.OnceFunc(stop)
	defer stopOnce()

	dir, err := os.MkdirTemp("", "esm-rie-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	if rieBin, err = testenv.BuildRIE(ctx, dir, ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bootstrapBin = filepath.Join(dir, "bootstrap")
	if err := testenv.BuildBootstrap(ctx, "", bootstrapBin, bootstrapPackage, ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if testing.Verbose() {
		fmt.Printf("built aws-lambda-rie and the bootstrap in %v\n", time.Since(start).Round(time.Millisecond))
	}

	code := m.Run()
	stopOnce() // a private emulator's process watcher is not a leak of the code under test
	if c, ok := kin.Options().HTTPClient.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	if code == 0 {
		// Idle keep-alive connections of the SDK clients are not goroutines anyone leaked.
		if err := goleak.Find(goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			return 1
		}
	}
	return code
}

// testContext is a context that ends with the test, bounded by limit.
func testContext(t *testing.T, limit time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return ctx
}

// newStream creates a stream with a unique name.
func newStream(t *testing.T, shards int32) string {
	t.Helper()
	name := fmt.Sprintf("rie-%d-%d", os.Getpid(), streamSeq.Add(1))
	if _, err := local.CreateStream(testContext(t, 30*time.Second), kin, name, shards); err != nil {
		t.Fatal(err)
	}
	return name
}

// put writes records with data "<key>:<n>" under the given keys, n counting each key's records
// from 0 in put order, and returns how many each key got.
func put(t *testing.T, stream string, keys []string, perKey int) map[string]int {
	t.Helper()
	var recs []local.Record
	for i := range perKey {
		for _, k := range keys {
			recs = append(recs, local.Record{PartitionKey: k, Data: fmt.Appendf(nil, "%s:%d", k, i)})
		}
	}
	if _, err := local.PutRecords(testContext(t, 30*time.Second), kin, stream, recs); err != nil {
		t.Fatal(err)
	}
	written := map[string]int{}
	for _, k := range keys {
		written[k] = perKey
	}
	return written
}

// startRIE runs the example bootstrap under aws-lambda-rie with env, stopped when the test ends.
func startRIE(t *testing.T, timeout time.Duration, env ...string) *local.RIE {
	t.Helper()
	r, err := local.StartRIE(testContext(t, 30*time.Second), local.RIEOptions{
		Binary:       rieBin,
		Handler:      []string{bootstrapBin},
		Env:          env,
		Timeout:      timeout,
		FunctionName: "example",
		Dir:          t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s output:\n%s", r, r.Output())
		}
		if err := r.Stop(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// alive fails the test if the emulator has exited.
func alive(t *testing.T, r *local.RIE) {
	t.Helper()
	select {
	case <-r.Exited():
		t.Fatalf("%s exited:\n%s", r, r.Output())
	default:
	}
}

// mapping is one event source mapping run in this process by runner.Run.
type mapping struct {
	cancel context.CancelFunc
	done   chan error
	logs   *testkit.SyncBuffer
}

// mappingConfig is the mapping used by the tests: from the oldest record, polled every 100 ms.
func mappingConfig(batchSize int) poller.Config {
	return poller.Config{
		StartingPosition: poller.TrimHorizon,
		BatchSize:        batchSize,
		PollInterval:     100 * time.Millisecond,
		ShutdownGrace:    5 * time.Second,
	}
}

// runMapping runs the mapping of stream to inv (or, when inv is nil, to handler in-process) until
// stop is called or the test ends.
func runMapping(t *testing.T, stream string, cfg poller.Config, inv invoke.Invoker, handler any) *mapping {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m := &mapping{cancel: cancel, done: make(chan error, 1), logs: &testkit.SyncBuffer{}}
	awsCfg, err := runner.AWSConfig(ctx, "", kinesisEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(awsCfg, runner.WithLogger(slog.New(slog.NewTextHandler(m.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	mapping := runner.Mapping{
		Source:   runner.Source{Stream: stream},
		Function: runner.Function{Invoker: inv, Handler: handler, Name: "example"},
		Config:   cfg,
		Store:    runner.Store{StateDir: t.TempDir()},
	}
	go func() { m.done <- r.Run(ctx, mapping) }()
	t.Cleanup(func() {
		m.stop(t)
		if t.Failed() {
			t.Logf("mapping of %s logged:\n%s", stream, tail(m.logs.String(), 40))
		}
	})
	return m
}

// stop ends the mapping and waits for it; later calls do nothing.
func (m *mapping) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	if err, ok := <-m.done; ok {
		close(m.done)
		if err != nil {
			t.Errorf("mapping ended with %v", err)
		}
	}
}

// deliveries reads what the example function wrote to EXAMPLE_OUTPUT.
func deliveries(t *testing.T, path string) []example.Delivery {
	t.Helper()
	ds, err := verify.ReadDeliveries(path)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// traces reads what the example function wrote to EXAMPLE_TRACE.
func traces(t *testing.T, path string) []example.Trace {
	t.Helper()
	var out []example.Trace
	for _, line := range lines(t, path) {
		var tr example.Trace
		if err := json.Unmarshal(line, &tr); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, tr)
	}
	return out
}

// lines returns the complete lines of a file of JSON lines that may still be written to; a
// missing file has none.
func lines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// Only complete lines: the file may be read while a line (an event of 64 KiB) is being written.
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	return bytes.FieldsFunc(b, func(r rune) bool { return r == '\n' })
}

// call is one invocation seen by recorder.
type call struct {
	payload    []byte
	resp       invoke.Response
	err        error
	start, end time.Time
}

// recorder is an invoker that records every invocation of the one it wraps.
type recorder struct {
	inv invoke.Invoker

	mu    sync.Mutex
	calls []call
}

func (r *recorder) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	start := time.Now()
	resp, err := r.inv.Invoke(ctx, payload)
	r.mu.Lock()
	r.calls = append(r.calls, call{payload: bytes.Clone(payload), resp: resp, err: err, start: start, end: time.Now()})
	r.mu.Unlock()
	return resp, err
}

func (r *recorder) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// wire is an http.RoundTripper that records, per endpoint, the invocations in flight and the
// status of every answer.
type wire struct {
	base http.RoundTripper

	mu              sync.Mutex
	inFlight        map[string]int
	peakPerHost     map[string]int
	total, peak     int
	requestsPerHost map[string]int
	statuses        []int
}

func newWire() *wire {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = nil
	return &wire{base: base, inFlight: map[string]int{}, peakPerHost: map[string]int{}, requestsPerHost: map[string]int{}}
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	host := r.URL.Host
	w.mu.Lock()
	w.inFlight[host]++
	w.requestsPerHost[host]++
	w.total++
	w.peakPerHost[host] = max(w.peakPerHost[host], w.inFlight[host])
	w.peak = max(w.peak, w.total)
	w.mu.Unlock()
	resp, err := w.base.RoundTrip(r)
	w.mu.Lock()
	w.inFlight[host]--
	w.total--
	if err == nil {
		w.statuses = append(w.statuses, resp.StatusCode)
	}
	w.mu.Unlock()
	return resp, err
}

// answers returns the status of every answer so far, in order.
func (w *wire) answers() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.statuses...)
}

func (w *wire) client() *http.Client { return &http.Client{Transport: w} }

func (w *wire) close() { w.base.(*http.Transport).CloseIdleConnections() }

// httpInvoker is an invoke.HTTP over endpoints whose traffic w records.
func httpInvoker(t *testing.T, w *wire, timeout time.Duration, endpoints ...string) *httpinvoke.Pool {
	t.Helper()
	inv, err := httpinvoke.New(endpoints, httpinvoke.WithHTTPClient(w.client()), httpinvoke.WithFunctionTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	return inv
}

// errorDocument decodes a function error's payload.
func errorDocument(t *testing.T, payload []byte) invoke.ErrorDocument {
	t.Helper()
	var doc invoke.ErrorDocument
	if err := json.Unmarshal(payload, &doc); err != nil {
		t.Fatalf("error document %s: %v", payload, err)
	}
	return doc
}

func tail(s string, n int) string {
	ls := bytes.Split([]byte(s), []byte("\n"))
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return string(bytes.Join(ls, []byte("\n")))
}
