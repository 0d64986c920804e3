package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
	"github.com/kinesis-esm/esm/metrics/live"
)

var ddbBootstrap struct {
	once sync.Once
	path string
	err  error
}

// buildDDBBootstrap builds the example function for DynamoDB streams, once per test binary.
func buildDDBBootstrap(t *testing.T) string {
	t.Helper()
	ddbBootstrap.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		ddbBootstrap.path = esmBin + "-ddb-bootstrap"
		ddbBootstrap.err = testenv.BuildBootstrap(ctx, "", ddbBootstrap.path, "github.com/kinesis-esm/esm/example/ddbbootstrap", "")
	})
	if ddbBootstrap.err != nil {
		t.Fatal(ddbBootstrap.err)
	}
	return ddbBootstrap.path
}

// streamTable is a table with a NEW_AND_OLD_IMAGES stream, its name and stream ARN, and the
// DynamoDB client of the ddb-local that serves it.
type streamTable struct {
	*dynamodb.Client
	name, arn string
}

// ddbStreamTable starts a private ddb-local whose shards rotate every rotate (stopped when the
// test ends) with one streamed table, and returns the table, the local's DynamoDB Streams client
// and its endpoint.
func ddbStreamTable(ctx context.Context, t *testing.T, rotate time.Duration) (streamTable, *dynamodbstreams.Client, string) {
	t.Helper()
	endpoint, stop, err := testenv.DDBStreamsEndpoint(ctx, "../..", local.DDBLocalOptions{Rotate: rotate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ddb, st := local.DDBClients(cfg, endpoint)
	table := streamTable{Client: ddb, name: fmt.Sprintf("streamed-%d", time.Now().UnixNano()%1e9)}
	if table.arn, err = local.CreateStreamTable(ctx, ddb, table.name, types.StreamViewTypeNewAndOldImages); err != nil {
		t.Fatal(err)
	}
	return table, st, endpoint
}

// TestDynamoDBStreamTwoWorkersKillAndRestart is issue 42's first must-show, on the built binary:
// a table with NEW_AND_OLD_IMAGES on a private ddb-local whose shards rotate every second, 2,000
// writes over 50 keys (every kind of write) over at least eight seconds, two "esm run" workers on
// a lease table on dynalite invoking the DynamoDB example function (exec:), one of them SIGKILLed
// once 200 deliveries were made and started again, with half of the writes after the kill. Every
// change is delivered, in order per key, with the images AWS sends (verify.DDBRecords), and no
// child shard is invoked before its parent's last invocation ended (verify.DDBLineage). The path
// is shown exercised: at least three rotations and three parent→child pairs judged.
func TestDynamoDBStreamTwoWorkersKillAndRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ddb, st, endpoint := ddbStreamTable(ctx, t, time.Second)
	table, arn := ddb.name, ddb.arn

	boot := buildDDBBootstrap(t)
	out := filepath.Join(t.TempDir(), "deliveries")
	env := append(stopEnv(), "AWS_ENDPOINT_URL_DYNAMODB="+dynalite(t), "AWS_ENDPOINT_URL_DYNAMODB_STREAMS="+endpoint,
		"EXAMPLE_OUTPUT="+out, "EXAMPLE_DELAY=20ms")
	leases := "ddb-leases-" + table
	worker := func(id string) *esmProc {
		return spawnESM(t, env, "run", "--invoke", "exec:"+boot, "--function-env-pass", "EXAMPLE_OUTPUT,EXAMPLE_DELAY",
			"--stream", arn, "--starting-position", "TRIM_HORIZON", "--batch-size", "25",
			"--lease-table", leases, "--worker-id", id, "--lease-duration", "3s")
	}
	w1, w2 := worker("w1"), worker("w2")

	// The producer writes 50 changes every 200 ms: half of them, then the rest once the kill
	// landed, so that the kill falls while records flow whatever the machine's pace.
	p := verify.NewDDBProducer(table, 50, 42)
	killed := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		for i := range 40 {
			if i == 20 {
				select {
				case <-killed:
				case <-ctx.Done():
					produced <- ctx.Err()
					return
				}
			}
			if err := p.Write(ctx, ddb, 50); err != nil {
				produced <- err
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		produced <- nil
	}()

	testkit.WaitFor(t, "deliveries under way", 2*time.Minute, func() bool { return testkit.LineCount(t, out) >= 200 })
	atKill := testkit.LineCount(t, out)
	if err := w1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w1.wait(t)
	w1 = worker("w1")
	close(killed)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if p.Total() != 2000 {
		t.Fatalf("%d changes written, want 2000", p.Total())
	}

	testkit.WaitFor(t, "every change delivered", 2*time.Minute, func() bool {
		ds, err := verify.ReadDDBDeliveries(out)
		if err != nil {
			t.Fatal(err)
		}
		return verify.DDBRecords(verify.DDBEventRecords(ds), p.Want)[0].OK
	})
	ds, err := verify.ReadDDBDeliveries(out)
	if err != nil {
		t.Fatal(err)
	}
	if bad := verify.Failed(verify.DDBRecords(verify.DDBEventRecords(ds), p.Want)); bad != "" {
		t.Fatal(bad)
	}
	shards, err := verify.ListDDBShards(ctx, st, arn)
	if err != nil {
		t.Fatal(err)
	}
	lin, pairs := verify.DDBLineage(ds, shards)
	if !lin.OK {
		t.Fatal(lin.Detail)
	}
	if len(shards) < 4 || pairs < 3 {
		t.Fatalf("%d shards (%d rotations), %d parent→child pairs judged: want at least 3 of each", len(shards), len(shards)-1, pairs)
	}
	t.Logf("%d deliveries of 2000 changes, %d shards, %d pairs judged, killed w1 after %d deliveries", len(ds), len(shards), pairs, atKill)
	for _, w := range []*esmProc{w1, w2} {
		if code := w.stop(t); code != 0 {
			t.Fatalf("exit %d after SIGTERM", code)
		}
	}
}

// TestDynamoDBStreamObserved: a mapping of a DynamoDB stream is watched as a Kinesis one is, on
// the built binary (esm run on a private ddb-local whose shards rotate every 2 s): /metrics
// accounts for every change polled and invoked, the live page draws the stream's shards
// (parents and children, finished and read, checkpoints), esm status lists them from the
// stream and the running worker, and every invocation is exported as a span naming the
// mapping's stream.
func TestDynamoDBStreamObserved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ddb, st, endpoint := ddbStreamTable(ctx, t, 2*time.Second)
	table, arn := ddb.name, ddb.arn
	col := &otlpCollector{}
	srv := httptest.NewServer(col)
	defer srv.Close()

	dir := t.TempDir()
	out, addr := filepath.Join(dir, "deliveries"), freeAddr(t)
	env := append(stopEnv(), "AWS_ENDPOINT_URL_DYNAMODB_STREAMS="+endpoint, "EXAMPLE_OUTPUT="+out,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL, "OTEL_BSP_SCHEDULE_DELAY=100")
	proc := spawnESM(t, env, "run", "--invoke", "exec:"+buildDDBBootstrap(t), "--function-env-pass", "EXAMPLE_OUTPUT",
		"--stream", arn, "--starting-position", "TRIM_HORIZON", "--batch-size", "10", "--state-dir", filepath.Join(dir, "state"),
		"--metrics-addr", addr, "--poll-interval", "100ms", "--shard-sync-interval", "1s")
	testkit.WaitFor(t, "/readyz", 60*time.Second, func() bool { return httpStatus(addr, "/readyz") == http.StatusOK })

	// Writes over at least two rotations, so that the stream has finished parents and children.
	p := verify.NewDDBProducer(table, 10, 7)
	var shards []verify.DDBShard
	var err error
	for rounds := 0; rounds < 10 || len(shards) < 3; rounds++ {
		if rounds > 60 {
			t.Fatalf("%d shards after %d rounds of writes: the stream does not rotate", len(shards), rounds)
		}
		if err := p.Write(ctx, ddb, 10); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if shards, err = verify.ListDDBShards(ctx, st, arn); err != nil {
			t.Fatal(err)
		}
	}
	total := float64(p.Total())
	var m map[string]float64
	testkit.WaitFor(t, "every change polled and invoked", 60*time.Second, func() bool {
		m = scrape(t, addr)
		return m["PolledEventCount"] == total && m["InvokedEventCount"]-m["FailedInvokeEventCount"] == total
	})
	if m["FilteredOutEventCount"] != 0 || m["DroppedEventCount"] != 0 {
		t.Fatalf("filtered %v, dropped %v of %v changes: want none", m["FilteredOutEventCount"], m["DroppedEventCount"], total)
	}

	// The live page: every shard of the stream, children naming their parents, a finished parent.
	var state live.State
	testkit.WaitFor(t, "the live page shows every shard", 30*time.Second, func() bool {
		if err := getJSON(addr, "/live/state.json", &state); err != nil || len(state.Mappings) != 1 {
			return false
		}
		return len(state.Mappings[0].Shards) >= len(shards)
	})
	finished, children := 0, 0
	for _, sh := range state.Mappings[0].Shards {
		if sh.State == "finished" {
			finished++
		}
		if len(sh.Parents) > 0 {
			children++
		}
	}
	if finished < 1 || children < 2 {
		t.Fatalf("/live/state.json: %d finished shards, %d with parents, want a finished parent and two children: %+v", finished, children, state.Mappings[0].Shards)
	}
	page := get(t, addr, "/live")
	for _, sh := range shards {
		if !strings.Contains(page, `data-shard="`+sh.ID+`"`) {
			t.Fatalf("/live does not draw shard %s", sh.ID)
		}
	}

	// esm status: the stream's shards, with the running worker's view.
	code, stdout, stderr := runESMEnv(t, env, "", "status", "--stream", arn, "--state-dir", filepath.Join(dir, "state"), "--metrics-addr", addr)
	if code != 0 || !strings.Contains(stdout, shards[len(shards)-1].ID) || !strings.Contains(stdout, "finished") {
		t.Fatalf("status while running: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Logf("esm status:\n%s", stdout)

	// Traces: one span per invocation, each naming the mapping's stream.
	ds, err := verify.ReadDDBDeliveries(out)
	if err != nil {
		t.Fatal(err)
	}
	if code := proc.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	outcomes, _, streams := col.byOutcome()
	invocations := map[string]bool{}
	for _, d := range ds {
		invocations[d.RequestID] = true
	}
	if outcomes["ok"] != len(invocations) || len(streams) != 1 {
		t.Fatalf("span outcomes %v on streams %v; the function saw %d invocations: want a span each, on the table's stream", outcomes, streams, len(invocations))
	}
	t.Logf("%v changes over %d shards; %d invocations traced on %v", total, len(shards), len(invocations), streams)
}
