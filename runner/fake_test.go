package runner

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"go.uber.org/goleak"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// received counts the records a handler was given, and closes got once it has want of them.
type received struct {
	mu   sync.Mutex
	n    int
	want int
	got  chan struct{}
}

func newReceived(want int) *received { return &received{want: want, got: make(chan struct{})} }

func (r *received) handle(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := r.n
	r.n += len(e.Records)
	if before < r.want && r.n >= r.want {
		close(r.got)
	}
	return events.KinesisEventResponse{}, nil
}

// fakeRunner is a Runner on the in-memory Kinesis and DynamoDB, logging to the returned buffer.
func fakeRunner(t *testing.T, kin *fakekinesis.Fake, ddb *fakedynamo.DB) (*Runner, *testkit.SyncBuffer) {
	t.Helper()
	logs := &testkit.SyncBuffer{}
	opts := []Option{WithKinesis(kin), WithLogger(slog.New(slog.NewTextHandler(logs, nil)))}
	if ddb != nil {
		opts = append(opts, WithDynamoDB(ddb))
	}
	r, err := New(aws.Config{Region: "us-east-1"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r, logs
}

// runUntil runs m on r until stop is called, which returns Run's error.
func runUntil(r *Runner, m Mapping) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, m) }()
	return func() error {
		cancel()
		return <-done
	}
}

func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestRunOnFakes: a Runner built on injected clients runs a mapping of a stream given by name,
// with a Go handler in-process and the state in a directory: every record is handled, the
// mapping's UUID is told, and a cancelled context is a clean stop.
func TestRunOnFakes(t *testing.T) {
	kin := fakekinesis.New()
	kin.CreateStream("s", 2)
	for i := range 10 {
		kin.Put("s", string(rune('a'+i)), []byte("x"))
	}
	r, logs := fakeRunner(t, kin, nil)
	rec := newReceived(10)
	var uuid atomic.Value
	dir := filepath.Join(t.TempDir(), "state")
	stop := runUntil(r, Mapping{
		Source:   Source{Stream: "s"},
		Function: Function{Handler: rec.handle},
		Config:   poller.Config{StartingPosition: poller.TrimHorizon, PollInterval: 10 * time.Millisecond},
		Store:    Store{StateDir: dir},
		Hooks:    Hooks{OnUUID: func(id string) { uuid.Store(id) }},
	})
	await(t, rec.got, "10 records")
	if err := stop(); err != nil {
		t.Fatalf("Run after a cancel: %v", err)
	}
	id, _ := uuid.Load().(string)
	if id == "" || !strings.Contains(logs.String(), "uuid="+id) {
		t.Fatalf("mapping UUID %q not told, or not logged:\n%s", id, logs)
	}
	abs, _ := filepath.Abs(dir)
	for _, want := range []string{"esm running", "stream=arn:aws:kinesis:", "function=arn:aws:lambda:us-east-1:", ":function:example", "state_dir=" + abs} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
}

// panicKinesis fails the test at any call: Run must make none.
type panicKinesis struct{ KinesisAPI }

// TestRunChecksSettingsBeforeAnyCall: a setting outside Lambda's range is refused, wrapping
// poller.ErrInvalidConfig and naming the field, before any call to Kinesis (a nil client here).
func TestRunChecksSettingsBeforeAnyCall(t *testing.T) {
	r, err := New(aws.Config{Region: "us-east-1"}, WithKinesis(panicKinesis{}))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "state")
	err = r.Run(context.Background(), Mapping{Source: Source{Stream: "s"}, Function: Function{Handler: func() error { return nil }},
		Config: poller.Config{StartingPosition: poller.Latest, BatchSize: 10001}, Store: Store{StateDir: dir}})
	var ve *poller.ValidationError
	if !errors.Is(err, poller.ErrInvalidConfig) || !errors.As(err, &ve) || ve.Field != "batchSize" {
		t.Fatalf("err = %v, want the batchSize ValidationError", err)
	}
	if err := r.Run(context.Background(), Mapping{Function: Function{Handler: func() error { return nil }}}); !errors.Is(err, poller.ErrInvalidConfig) {
		t.Fatalf("a mapping without a stream: %v", err)
	}
	if err := r.Run(context.Background(), Mapping{Source: Source{Stream: "s"}}); !errors.Is(err, ErrNoFunction) {
		t.Fatalf("a mapping without a function: %v", err)
	}
}

// TestRunWritesNothingForAMissingStream: a stream that does not exist ends Run with
// poller.ErrStreamNotFound before the state directory is created.
func TestRunWritesNothingForAMissingStream(t *testing.T) {
	r, _ := fakeRunner(t, fakekinesis.New(), nil)
	dir := filepath.Join(t.TempDir(), "state")
	err := r.Run(context.Background(), Mapping{Source: Source{Stream: "missing"}, Function: Function{Handler: func() error { return nil }},
		Config: poller.Config{StartingPosition: poller.Latest}, Store: Store{StateDir: dir}})
	if !errors.Is(err, poller.ErrStreamNotFound) {
		t.Fatalf("err = %v, want ErrStreamNotFound", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the state directory was created for a missing stream: %v", err)
	}
}

// TestRunSharesThroughALeaseTable: with a lease table the mapping's progress lives there, created
// when missing, the worker claims at its lease duration's pace (lease.Dynamo's ClaimInterval,
// the default of a mapping that sets none), and every record is handled.
func TestRunSharesThroughALeaseTable(t *testing.T) {
	kin := fakekinesis.New()
	kin.CreateStream("s", 2)
	for i := range 6 {
		kin.Put("s", string(rune('a'+i)), []byte("x"))
	}
	ddb := fakedynamo.New()
	r, logs := fakeRunner(t, kin, ddb)
	rec := newReceived(6)
	stop := runUntil(r, Mapping{
		Source:   Source{Stream: "s"},
		Function: Function{Handler: rec.handle},
		Config:   poller.Config{StartingPosition: poller.TrimHorizon, PollInterval: 10 * time.Millisecond},
		Store:    Store{LeaseTable: "leases", CreateLeaseTable: true, WorkerID: "w1", LeaseDuration: 2 * time.Second},
	})
	await(t, rec.got, "6 records")
	if err := stop(); err != nil {
		t.Fatalf("Run after a cancel: %v", err)
	}
	if len(ddb.Items("leases")) == 0 {
		t.Fatal("nothing in the lease table")
	}
	for _, want := range []string{"esm running", "lease_table=leases", "worker_id=w1", "lease_duration=2s", "claim_interval=200ms"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
}

// TestSupervisorRestartsAFailedMapping: a mapping whose start fails (ListShards refused twice) is
// told each failure, started again after the back-off, and then runs; Status counts its starts
// and keeps the last failure; Stop ends it.
func TestSupervisorRestartsAFailedMapping(t *testing.T) {
	kin := fakekinesis.New()
	kin.CreateStream("s", 1)
	kin.Put("s", "k", []byte("x"))
	var refused atomic.Int32
	kin.Inject(func(op string, _ any) error {
		if op == fakekinesis.OpListShards && refused.Add(1) <= 2 {
			return errors.New("refused")
		}
		return nil
	})
	r, _ := fakeRunner(t, kin, nil)
	s := r.Supervise(context.Background(), WithRestartBackoff(time.Millisecond))
	defer s.Close()
	rec := newReceived(1)
	var failures atomic.Int32
	sv := s.Start(Mapping{
		Source:   Source{Stream: "s"},
		Function: Function{Handler: rec.handle},
		Config:   poller.Config{StartingPosition: poller.TrimHorizon, PollInterval: 10 * time.Millisecond},
		Store:    Store{Open: func(context.Context) (poller.Store, error) { return poller.NewMemoryStore(), nil }},
		UUID:     "5e0f2a6b-8c1d-4e7f-9a3b-6d2c1e0f9a8b",
	}, func(err error) {
		if !strings.Contains(err.Error(), "refused") {
			t.Errorf("failure %v, want the refused ListShards", err)
		}
		failures.Add(1)
	})
	await(t, rec.got, "the record after two failed starts")
	st := sv.Status()
	if failures.Load() != 2 || st.Starts != 3 || !st.Running || st.Err == nil || st.UUID != "5e0f2a6b-8c1d-4e7f-9a3b-6d2c1e0f9a8b" {
		t.Fatalf("after two failures: %d told, status %+v", failures.Load(), st)
	}
	if all := s.Status(); len(all) != 1 || all[0].UUID != st.UUID {
		t.Fatalf("Supervisor.Status = %+v", all)
	}
	sv.Stop()
	if st := sv.Status(); st.Running || len(s.Status()) != 0 {
		t.Fatalf("after Stop: %+v, %d supervised", st, len(s.Status()))
	}
}

// TestRunChecksAStreamARNBeforeAnyCall: a stream given as a malformed ARN is refused as
// EventSourceArn before any call to Kinesis.
func TestRunChecksAStreamARNBeforeAnyCall(t *testing.T) {
	r, err := New(aws.Config{Region: "us-east-1"}, WithKinesis(panicKinesis{}))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background(), Mapping{Source: Source{Stream: "arn:aws:kinesis:us-east-1:1:table/s"}, Function: Function{Handler: func() error { return nil }},
		Config: poller.Config{StartingPosition: poller.Latest}, Store: Store{StateDir: filepath.Join(t.TempDir(), "state")}})
	var ve *poller.ValidationError
	if !errors.As(err, &ve) || ve.Field != "EventSourceArn" {
		t.Fatalf("err = %v, want the EventSourceArn ValidationError", err)
	}
}
