package esmapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// These tests drive the API with aws-sdk-go-v2's Lambda client and raw HTTP against a Manager
// whose mappings read streams on kinesis-local.

var (
	kinesisEndpoint string
	dynamoEndpoint  string
	kin             *kinesis.Client
	streamSeq       atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if testkit.Fuzzing() { // the fuzz targets need no emulator
		return m.Run()
	}
	var stop func()
	var err error
	if kinesisEndpoint, kin, stop, err = testenv.Kinesis(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	var stopDynamo func()
	if dynamoEndpoint, stopDynamo, err = testenv.DynamoEndpoint(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopDynamo()
	return m.Run()
}

// newStream creates a one-shard stream and returns its name and ARN.
func newStream(t *testing.T) (name, arn string) {
	t.Helper()
	name = fmt.Sprintf("esmapi-%d-%d", os.Getpid(), streamSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	arn, err := local.CreateStream(ctx, kin, name, 1)
	if err != nil {
		t.Fatal(err)
	}
	return name, arn
}

func put(t *testing.T, stream string, data ...string) {
	t.Helper()
	recs := make([]local.Record, len(data))
	for i, d := range data {
		recs[i] = local.Record{PartitionKey: "pk", Data: []byte(d)}
	}
	if _, err := local.PutRecords(context.Background(), kin, stream, recs); err != nil {
		t.Fatal(err)
	}
}

// recorder is an in-process function that keeps every batch it was invoked with.
type recorder struct {
	mu      sync.Mutex
	batches [][]string
	block   func() // when set, called at the start of every invocation
	fail    string // when set, a batch holding a record with this data fails (after it was recorded)
}

func (r *recorder) handle(_ context.Context, e events.KinesisEvent) error {
	if r.block != nil {
		r.block()
	}
	var b []string
	for _, rec := range e.Records {
		b = append(b, string(rec.Kinesis.Data))
	}
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	if r.fail != "" && slices.Contains(b, r.fail) {
		return errors.New("cannot handle " + r.fail)
	}
	return nil
}

// records are every record delivered so far, in delivery order.
func (r *recorder) records() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, b := range r.batches {
		out = append(out, b...)
	}
	return out
}

func (r *recorder) batchSizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, b := range r.batches {
		out = append(out, len(b))
	}
	return out
}

func (r *recorder) has(data ...string) func() bool {
	return func() bool {
		got := r.records()
		for _, d := range data {
			if !slices.Contains(got, d) {
				return false
			}
		}
		return true
	}
}

// server is a Manager on a state directory, served over HTTP on 127.0.0.1.
type server struct {
	m      *esmapi.Manager
	http   *httptest.Server
	store  *checkpoint.FileStore
	client *lambda.Client
	closed bool
}

// startServer opens the state directory dir and serves the API with the recorders as functions.
func startServer(t *testing.T, dir string, fns map[string]*recorder) *server {
	t.Helper()
	ctx := context.Background()
	shared := newRunner(t)
	store, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	var functions []esmapi.Function
	for name, r := range fns {
		functions = append(functions, esmapi.Function{Name: name, Invoker: inprocess.New(r.handle)})
	}
	m, err := esmapi.Open(ctx, shared, esmapi.FileCatalog{Dir: dir + "/mappings"}, esmapi.ProgressFuncs{
		StoreFunc:  func(_ context.Context, id string) (poller.Store, error) { return store.Mapping(id), nil },
		DeleteFunc: func(_ context.Context, id string) error { return store.DeleteMapping(id) },
	},
		esmapi.WithFunctions(functions...),
		esmapi.WithBase(poller.Config{PollInterval: 50 * time.Millisecond, MinPollSpacing: 20 * time.Millisecond, ShutdownGrace: 5 * time.Second}),
		esmapi.WithRestartBackoff(100*time.Millisecond),
	)
	if err != nil {
		_ = store.Close()
		t.Fatal(err)
	}
	s := &server{m: m, http: httptest.NewServer(m.Handler()), store: store}
	s.client = lambda.New(lambda.Options{
		Region:       local.DefaultRegion,
		BaseEndpoint: aws.String(s.http.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local", ""),
	})
	t.Cleanup(s.close)
	return s
}

// startOpen serves the API of a Manager opened on catalog and progress with opts (the engine
// filled in).
func startOpen(t *testing.T, catalog esmapi.Catalog, progress esmapi.Progress, opts ...esmapi.Option) *server {
	t.Helper()
	return startEngine(t, newRunner(t), catalog, progress, opts...)
}

// newRunner is a Runner on kinesis-local.
func newRunner(t *testing.T) *runner.Runner {
	t.Helper()
	cfg, err := runner.AWSConfig(context.Background(), local.DefaultRegion, kinesisEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startEngine is startOpen with another runner.
func startEngine(t *testing.T, engine *runner.Runner, catalog esmapi.Catalog, progress esmapi.Progress, opts ...esmapi.Option) *server {
	t.Helper()
	m, err := esmapi.Open(context.Background(), engine, catalog, progress, opts...)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{m: m, http: httptest.NewServer(m.Handler())}
	s.client = lambda.New(lambda.Options{
		Region:       local.DefaultRegion,
		BaseEndpoint: aws.String(s.http.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local", ""),
	})
	t.Cleanup(s.close)
	return s
}

// close stops the server as a process exit would: the API, then every mapping, then the store.
func (s *server) close() {
	if s.closed {
		return
	}
	s.closed = true
	s.http.Close()
	s.m.Close()
	if s.store != nil {
		_ = s.store.Close()
	}
}

// waitState waits until the mapping's State is want.
func (s *server) waitState(t *testing.T, id, want string) *lambda.GetEventSourceMappingOutput {
	t.Helper()
	var out *lambda.GetEventSourceMappingOutput
	testkit.WaitFor(t, "state "+want, 20*time.Second, func() bool {
		var err error
		out, err = s.client.GetEventSourceMapping(context.Background(), &lambda.GetEventSourceMappingInput{UUID: aws.String(id)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.State) == want
	})
	return out
}

// mustJSON is v as indented JSON, for failure messages.
func mustJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func uniq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

var _ = strings.TrimSpace
