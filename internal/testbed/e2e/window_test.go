package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

var (
	endpoint string
	kin      *kinesis.Client
	seq      atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	ctx := context.Background()
	var stop func()
	var err error
	if endpoint, kin, stop, err = testenv.Kinesis(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	return m.Run()
}

func newStream(t *testing.T, shards int32) string {
	t.Helper()
	name := fmt.Sprintf("lib-e2e-%d-%d", os.Getpid(), seq.Add(1))
	if _, err := local.CreateStream(context.Background(), kin, name, shards); err != nil {
		t.Fatal(err)
	}
	return name
}

// runMapping runs a mapping in this process with the handler until the returned stop is called.
func runMapping(t *testing.T, stream, stateDir string, mc poller.Config, handler any) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	r := localRunner(t)
	go func() {
		done <- r.Run(ctx, runner.Mapping{Source: runner.Source{Stream: stream}, Function: runner.Function{Handler: handler},
			Store: runner.Store{StateDir: stateDir}, Config: mc})
	}()

	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("mapping: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestTumblingWindowSumOnKinesisLocal sums record values per key in 2-second tumbling windows of
// kinesis-local records, with a restart in the middle, and compares each window's final totals
// with the totals computed from the records' own arrival times.
func TestTumblingWindowSumOnKinesisLocal(t *testing.T) {
	const window = 2 * time.Second
	stream := newStream(t, 1)
	stateDir := filepath.Join(t.TempDir(), "state")
	var mu sync.Mutex
	totals := map[string]map[string]int{}
	invocations := 0
	handler := func(_ context.Context, e events.KinesisTimeWindowEvent) (events.KinesisTimeWindowEventResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		invocations++
		state := map[string]string{}
		for k, v := range e.State {
			state[k] = v
		}
		for _, r := range e.Records {
			n, _ := strconv.Atoi(string(r.Kinesis.Data))
			cur, _ := strconv.Atoi(state[r.Kinesis.PartitionKey])
			state[r.Kinesis.PartitionKey] = strconv.Itoa(cur + n)
		}
		if e.IsFinalInvokeForWindow {
			sums := map[string]int{}
			for k, v := range state {
				sums[k], _ = strconv.Atoi(v)
			}
			totals[e.Window.Start.UTC().Format(time.RFC3339)] = sums
		}
		return events.KinesisTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: state}}, nil
	}
	mc := poller.Config{StartingPosition: poller.TrimHorizon, BatchSize: 5, TumblingWindow: window, PollInterval: 100 * time.Millisecond}
	stop := runMapping(t, stream, stateDir, mc, handler)
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if _, err := local.PutRecords(ctx, kin, stream, []local.Record{{PartitionKey: fmt.Sprint("k", i%3), Data: []byte(strconv.Itoa(i))}}); err != nil {
			t.Fatal(err)
		}
		if i == 20 { // restart mid-run: the open window's state comes back from the state dir
			stop()
			stop = runMapping(t, stream, stateDir, mc, handler)
		}
		time.Sleep(50 * time.Millisecond) // a producer's pace, not synchronisation
	}
	want := expectedWindowSums(t, stream, window)
	testkit.WaitFor(t, "every window closed", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(totals) == len(want)
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(totals, want) {
		t.Fatalf("window totals\n got %v\nwant %v", totals, want)
	}
	t.Logf("%d windows, %d invocations", len(totals), invocations)
}

// expectedWindowSums reads the stream back and sums values per key per window of arrival time.
func expectedWindowSums(t *testing.T, stream string, window time.Duration) map[string]map[string]int {
	t.Helper()
	ctx := context.Background()
	it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String("shardId-000000000000"),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int{}
	iter := it.ShardIterator
	for {
		out, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Records {
			w := r.ApproximateArrivalTimestamp.Truncate(window).UTC().Format(time.RFC3339)
			if want[w] == nil {
				want[w] = map[string]int{}
			}
			n, _ := strconv.Atoi(string(r.Data))
			want[w][aws.ToString(r.PartitionKey)] += n
		}
		if len(out.Records) == 0 {
			return want
		}
		iter = out.NextShardIterator
	}
}

// localRunner is a Runner on the emulators at endpoint, logging nothing.
func localRunner(t *testing.T) *runner.Runner {
	t.Helper()
	cfg, err := runner.AWSConfig(context.Background(), "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(cfg, runner.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
