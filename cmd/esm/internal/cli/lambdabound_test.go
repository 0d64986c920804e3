package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// cutDB is one worker's DynamoDB: the fake's, but for its item calls while cut (a worker cut off
// from DynamoDB alone).
type cutDB struct {
	*fakedynamo.DB
	cut atomic.Bool
}

var errCut = errors.New("dial tcp: i/o timeout (partitioned)")

func (d *cutDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if d.cut.Load() {
		return nil, errCut
	}
	return d.DB.GetItem(ctx, in, o...)
}
func (d *cutDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if d.cut.Load() {
		return nil, errCut
	}
	return d.DB.BatchGetItem(ctx, in, o...)
}
func (d *cutDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if d.cut.Load() {
		return nil, errCut
	}
	return d.DB.PutItem(ctx, in, o...)
}
func (d *cutDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d.cut.Load() {
		return nil, errCut
	}
	return d.DB.UpdateItem(ctx, in, o...)
}
func (d *cutDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if d.cut.Load() {
		return nil, errCut
	}
	return d.DB.DeleteItem(ctx, in, o...)
}
func (d *cutDB) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if d.cut.Load() {
		return nil, errCut
	}
	return d.DB.Scan(ctx, in, o...)
}

// lambdaFunction plays Lambda for one function whose Timeout on Lambda is 60 s: its configuration
// (GetFunctionConfiguration) and its invocations, each running as long as dur says.
type lambdaFunction struct {
	dur   func(n int) time.Duration
	onRun func(n int, worker string)
	mu    sync.Mutex
	runs  []lambdaRun
}

type lambdaRun struct {
	worker, shard string
	start, end    time.Time
}

func (l *lambdaFunction) endpoint(worker string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/configuration") {
			_, _ = io.WriteString(w, `{"FunctionName":"f","Timeout":60,"Role":"arn:aws:iam::000000000000:role/f"}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var ev events.KinesisEvent
		_ = json.Unmarshal(body, &ev)
		run := lambdaRun{worker: worker, start: time.Now()}
		if len(ev.Records) > 0 {
			run.shard = strings.SplitN(ev.Records[0].EventID, ":", 2)[0]
		}
		l.mu.Lock()
		l.runs = append(l.runs, run)
		n := len(l.runs)
		l.mu.Unlock()
		if l.onRun != nil {
			l.onRun(n, worker)
		}
		time.Sleep(l.dur(n))
		l.mu.Lock()
		l.runs[n-1].end = time.Now()
		l.mu.Unlock()
		w.Header().Set("X-Amz-Executed-Version", "$LATEST")
		_, _ = io.WriteString(w, "{}")
	}))
}

// overlaps lists the invocations of one shard by two workers that ran at the same time.
func (l *lambdaFunction) overlaps(t0 time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	end := func(r lambdaRun) time.Time {
		if r.end.IsZero() {
			return time.Now()
		}
		return r.end
	}
	for i, x := range l.runs {
		for _, y := range l.runs[i+1:] {
			if x.shard == y.shard && x.worker != y.worker && x.start.Before(end(y)) && y.start.Before(end(x)) {
				out = append(out, fmt.Sprintf("%s: %s's invocation +%v..+%v while %s's ran +%v..+%v", x.shard, y.worker,
					y.start.Sub(t0), end(y).Sub(t0), x.worker, x.start.Sub(t0), end(x).Sub(t0)))
			}
		}
	}
	return out
}

// TestLambdaTargetBoundFollowsFunctionTimeout is the audit's defect 5 as esm run builds a
// lambda: mapping: two workers, lease 3 s, --timeout not given (3 s), the function's Timeout on
// Lambda 60 s. Worker a is cut off from DynamoDB alone when its invocation (25 s, well within the
// function's timeout) starts. Its successor must not invoke the shard while that invocation
// runs: the bound is the function's timeout plus 10 s, not --timeout's. Before the fix b invoked
// at about +19 s (a bound of 13 s). Fails with boundLambda not called. About 30 s.
func TestLambdaTargetBoundFollowsFunctionTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("about 30 s")
	}
	fk := fakekinesis.New()
	fk.CreateStream("orders", 1)
	db := fakedynamo.New()
	var dbsMu sync.Mutex // the function's handler reads dbs while a worker starts
	dbs := map[string]*cutDB{}
	cutOf := func(worker string) *cutDB {
		dbsMu.Lock()
		defer dbsMu.Unlock()
		return dbs[worker]
	}
	var started atomic.Bool
	fn := &lambdaFunction{
		dur: func(n int) time.Duration {
			if n == 1 {
				return 25 * time.Second
			}
			return 50 * time.Millisecond
		},
		onRun: func(n int, worker string) {
			if n == 1 {
				started.Store(true)
				cutOf(worker).cut.Store(true)
			}
		},
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	start := func(id string) (stop func()) {
		d := &cutDB{DB: db}
		dbsMu.Lock()
		dbs[id] = d
		dbsMu.Unlock()
		srv := fn.endpoint(id)
		awsCfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
		c := &Config{Invoke: []string{"lambda:f"}, AWS: awsCfg, Logger: log.With("worker", id), Run: runner.Mapping{
			Source:   runner.Source{Stream: "orders"},
			Function: runner.Function{Name: "f", Timeout: invoke.DefaultTimeout},
			Config: poller.Config{BatchSize: 10, StartingPosition: poller.TrimHorizon, PollInterval: 50 * time.Millisecond,
				ShardSyncInterval: time.Second, ShutdownGrace: 2 * time.Second},
			Store: runner.Store{LeaseTable: "leases", CreateLeaseTable: true, WorkerID: id, LeaseDuration: 3 * time.Second},
		}}
		fn, closeInv, err := c.function(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if fn.Timeout != 60*time.Second {
			t.Errorf("function timeout %v, want the function's own on Lambda, 60 s", fn.Timeout)
		}
		m := c.Run
		m.Function = fn
		r, err := runner.New(awsCfg, runner.WithKinesis(fk), runner.WithDynamoDB(d), runner.WithLogger(c.Logger))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = r.Run(ctx, m); close(done) }()
		return func() { cancel(); <-done; _ = closeInv(); srv.Close() }
	}
	t0 := time.Now()
	stopA := start("a")
	for i := range 3 {
		fk.Put("orders", fmt.Sprintf("k%d", i), []byte(`{}`))
	}
	for deadline := time.Now().Add(30 * time.Second); !started.Load(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a never invoked")
		}
	}
	stopB := start("b")
	time.Sleep(27 * time.Second)
	o := fn.overlaps(t0)
	cutOf("a").cut.Store(false)
	stopB()
	stopA()
	if len(o) > 0 {
		t.Errorf("invocations of one shard overlapped across workers (lambda: target, the function's timeout 60 s, --timeout 3 s):\n%s", strings.Join(o, "\n"))
	}
}
