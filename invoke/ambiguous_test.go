package invoke_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/httpinvoke"
	"github.com/kinesis-esm/esm/invoke/lambdaapi"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// remoteFunction plays Lambda (or aws-lambda-rie behind a proxy): every invocation it receives
// runs for runFor whatever happens to the client's connection, and the first one's connection is
// reset after resetAfter (a NAT, a load balancer or a proxy dropping a long call).
type remoteFunction struct {
	runFor, resetAfter time.Duration
	running            sync.WaitGroup
	mu                 sync.Mutex
	runs               []remoteRun
}

type remoteRun struct {
	first      string // the batch's first sequence number
	start, end time.Time
}

func (f *remoteFunction) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev events.KinesisEvent
	_ = json.Unmarshal(body, &ev)
	f.mu.Lock()
	n := len(f.runs)
	run := remoteRun{start: time.Now(), end: time.Now().Add(f.runFor)}
	if len(ev.Records) > 0 {
		run.first = ev.Records[0].Kinesis.SequenceNumber
	}
	f.runs = append(f.runs, run)
	f.mu.Unlock()
	if n == 0 {
		f.running.Add(1)
		time.AfterFunc(f.runFor, f.running.Done) // it runs on at the function
		time.Sleep(f.resetAfter)
		_ = testkit.ResetConnection(w)
		return
	}
	time.Sleep(f.runFor)
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	w.Header().Set("X-Amzn-RequestId", fmt.Sprintf("req-%d", n))
	_, _ = w.Write([]byte("{}"))
}

// overlaps lists the invocations that ran at the same time (all of one shard here), and how many
// ran in all.
func (f *remoteFunction) overlaps() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	t0 := f.runs[0].start
	for i, x := range f.runs {
		for _, y := range f.runs[i+1:] {
			if x.start.Before(y.end) && y.start.Before(x.end) {
				out = append(out, fmt.Sprintf("batch from …%s ran +%v..+%v while batch from …%s ran +%v..+%v",
					y.first[len(y.first)-4:], y.start.Sub(t0), y.end.Sub(t0), x.first[len(x.first)-4:], x.start.Sub(t0), x.end.Sub(t0)))
			}
		}
	}
	return out, len(f.runs)
}

// runOneShard runs one poller (one shard, 5 records, batches of 2) on inv for d, with an invocation
// bound of 5 s; with a coordinator when leased.
func runOneShard(t *testing.T, inv poller.Invoker, d time.Duration, leased bool) {
	t.Helper()
	fk := fakekinesis.New()
	arn := fk.CreateStream("s", 1)
	for i := range 5 {
		fk.Put("s", fmt.Sprintf("k%d", i), []byte(fmt.Sprintf(`{"n":%d}`, i)))
	}
	cfg := poller.Config{BatchSize: 2,
		StartingPosition: poller.TrimHorizon, PollInterval: 50 * time.Millisecond, ShutdownGrace: 10 * time.Second}
	opts := []poller.Option{poller.WithLogger(slog.New(slog.DiscardHandler)), poller.WithInvocationBound(5 * time.Second),
		poller.WithFunctionARN("arn:aws:lambda:us-east-1:000000000000:function:f")}
	if leased {
		cfg.ClaimInterval = 100 * time.Millisecond
		opts = append(opts, poller.WithCoordinator(holdAll{}))
	}
	p, err := poller.New(kinesissrc.MustNew(fk, arn), cfg, poller.NewMemoryStore(), inv, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = p.Run(ctx)
}

// holdAll is a Coordinator that holds every shard.
type holdAll struct{}

func (holdAll) Register(context.Context, []poller.ShardInfo) error { return nil }
func (holdAll) Claim(_ context.Context, c []string) ([]string, error) {
	return c, nil
}
func (holdAll) Held(string) bool                      { return true }
func (holdAll) Release(context.Context, string) error { return nil }

// TestConnectionResetIsNotRetriedWhileRunning is the audit's defect 2 for each transport: the
// first invocation's connection is reset 300 ms after the request arrived while the function runs
// on for 4 s. Neither the invoker (the SDK's retryer, the HTTP pool's retries) nor the poller may
// send the batch again before the bound (5 s) has passed since the send; then it is retried and
// the rest of the shard follows. Before the fix the batch ran again 0.3 to 1 s later. Fails with
// either classification (SendTrace) or the poller's wait (send) reverted.
func TestConnectionResetIsNotRetriedWhileRunning(t *testing.T) {
	for _, tt := range []struct {
		name   string
		leased bool
		inv    func(url string) poller.Invoker
	}{
		{"lambda", false, lambdaInvoker},
		{"lambda leased", true, lambdaInvoker},
		{"http", false, func(url string) poller.Invoker {
			pool, err := httpinvoke.New([]string{url}, httpinvoke.WithFunctionTimeout(4*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.CloseIdleConnections)
			return pool
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fn := &remoteFunction{runFor: 4 * time.Second, resetAfter: 300 * time.Millisecond}
			srv := httptest.NewServer(fn)
			defer srv.Close()
			runOneShard(t, tt.inv(srv.URL), 10*time.Second, tt.leased)
			fn.running.Wait()
			o, n := fn.overlaps()
			if len(o) > 0 {
				t.Errorf("invocations of one shard overlapped:\n%s", strings.Join(o, "\n"))
			}
			if n < 2 {
				t.Errorf("%d invocations, want the reset one and its retry after the bound", n)
			}
		})
	}
}

func lambdaInvoker(url string) poller.Invoker {
	client := awslambda.New(awslambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	return lambdaapi.New(client, "f")
}
