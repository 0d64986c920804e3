package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// holdProxy is the endpoint esm is given (--endpoint-url): Kinesis calls go to kinesis-local and
// DynamoDB calls to dynalite, except the operations it holds, which get no answer until esm hangs
// up, and the operations it fails, which get a 500 every time.
type holdProxy struct {
	srv      *httptest.Server
	kinesis  *httputil.ReverseProxy
	dynamo   *httputil.ReverseProxy
	hold     map[string]bool // X-Amz-Target operation names, e.g. "DescribeTable"
	fail     map[string]bool
	mu       sync.Mutex
	held     map[string]int // requests held so far, by operation
	released chan struct{}
}

func newHoldProxy(t *testing.T, dynamoEndpoint string, hold, fail []string) *holdProxy {
	t.Helper()
	forward := func(target string) *httputil.ReverseProxy { return reverseProxy(t, target) }
	p := &holdProxy{kinesis: forward(kinesisEndpoint), hold: map[string]bool{}, fail: map[string]bool{}, held: map[string]int{},
		released: make(chan struct{})}
	if dynamoEndpoint != "" {
		p.dynamo = forward(dynamoEndpoint)
	}
	for _, op := range hold {
		p.hold[op] = true
	}
	for _, op := range fail {
		p.fail[op] = true
	}
	p.srv = httptest.NewServer(p)
	t.Cleanup(func() {
		close(p.released)
		p.srv.Close()
	})
	return p
}

func (p *holdProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	service, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	switch {
	case p.hold[op]:
		p.mu.Lock()
		p.held[op]++
		p.mu.Unlock()
		select {
		case <-r.Context().Done(): // esm hung up: it stopped, or gave up
		case <-p.released:
		}
	case p.fail[op]:
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"__type":"com.amazon.coral.service#InternalFailure","message":"injected"}`)
	case strings.HasPrefix(service, "DynamoDB") && p.dynamo != nil:
		p.dynamo.ServeHTTP(w, r)
	default:
		p.kinesis.ServeHTTP(w, r)
	}
}

// reverseProxy forwards every request to target.
func reverseProxy(t testing.TB, target string) *httputil.ReverseProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	return &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) }}
}

// heldCount is how many requests of op are being held, or were.
func (p *holdProxy) heldCount(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[op]
}

var (
	dynamoOnce     sync.Once
	dynamoEndpoint string
	dynamoErr      error
	stopDynamo     = func() {}
)

// dynalite is the DynamoDB emulator's endpoint, started for the first test that needs it and
// stopped by testMain.
func dynalite(t *testing.T) string {
	t.Helper()
	dynamoOnce.Do(func() { dynamoEndpoint, stopDynamo, dynamoErr = testenv.DynamoEndpoint(context.Background()) })
	if dynamoErr != nil {
		t.Fatal(dynamoErr)
	}
	return dynamoEndpoint
}

// TestStopWhileStarting: SIGTERM while esm run or esm serve is blocked in a start-up step (an AWS
// call that gets no answer) is a clean stop, exit 0 with no error, whichever step it was; a
// failure that persists (every answer a 500) still exits 1 by itself, naming it.
func TestStopWhileStarting(t *testing.T) {
	stream := newStream(t, 1)
	ddb := dynalite(t)
	table := func() string { return fmt.Sprintf("stop-%d-%d", os.Getpid(), streamSeq.Add(1)) }
	run := func(dir string, extra ...string) []string {
		return append([]string{"run", "--invoke", "example", "--stream", stream, "--state-dir", filepath.Join(dir, "state")}, extra...)
	}
	serve := func(dir string, extra ...string) []string {
		return append([]string{"serve", "--api-addr", "127.0.0.1:0", "--function", "fn=example", "--state-dir", filepath.Join(dir, "state")}, extra...)
	}
	cases := []struct {
		name string
		args func(dir string) []string
		hold string // the operation esm is stopped in
	}{
		{"run: describe stream", func(dir string) []string { return run(dir) }, "DescribeStreamSummary"},
		{"run: list shards", func(dir string) []string { return run(dir) }, "ListShards"},
		{"run: provision", func(dir string) []string {
			name := fmt.Sprintf("stop-provision-%d-%d", os.Getpid(), streamSeq.Add(1))
			return []string{"run", "--invoke", "example", "--template", provisionTemplate(t, dir, name), "--provision", "--state-dir", filepath.Join(dir, "state")}
		}, "CreateStream"},
		{"run: describe lease table", func(dir string) []string { return run(dir, "--lease-table", table()) }, "DescribeTable"},
		{"run: create lease table", func(dir string) []string { return run(dir, "--lease-table", table()) }, "CreateTable"},
		{"run: mapping UUID", func(dir string) []string { return run(dir, "--lease-table", table()) }, "UpdateItem"},
		{"run: first claims", func(dir string) []string { return run(dir, "--lease-table", table()) }, "Scan"},
		{"run: register consumer", func(dir string) []string {
			return run(dir, "--register-consumer", fmt.Sprintf("stop-consumer-%d-%d", os.Getpid(), streamSeq.Add(1)))
		}, "RegisterStreamConsumer"},
		{"serve: template mapping's stream", func(dir string) []string {
			name := fmt.Sprintf("stop-template-%d-%d", os.Getpid(), streamSeq.Add(1))
			return []string{"serve", "--api-addr", "127.0.0.1:0", "--function", "Fn=example", "--template", provisionTemplate(t, dir, name),
				"--state-dir", filepath.Join(dir, "state")}
		}, "DescribeStreamSummary"},
		{"serve: describe mappings table", func(dir string) []string { return serve(dir, "--lease-table", table()) }, "DescribeTable"},
		{"serve: load mappings", func(dir string) []string { return serve(dir, "--lease-table", table()) }, "Scan"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newHoldProxy(t, ddb, []string{c.hold}, nil)
			proc := spawnESM(t, stopEnv(), append(c.args(t.TempDir()), "--endpoint-url", p.srv.URL)...)
			testkit.WaitFor(t, "esm to block in "+c.hold, 30*time.Second, func() bool { return p.heldCount(c.hold) > 0 })
			if code := proc.stop(t); code != 0 {
				t.Fatalf("SIGTERM while blocked in %s: exit %d, want 0\n%s", c.hold, code, tail(proc.stderr.String(), 20))
			}
			if out := proc.stderr.String(); strings.Contains(out, "esm: ") {
				t.Fatalf("a clean stop printed an error:\n%s", tail(out, 20))
			}
		})
	}

	failing := []struct {
		name string
		args []string
		fail string
		want string
	}{
		{"run: describe lease table", run(t.TempDir(), "--lease-table", table()), "DescribeTable", "esm: describe lease table"},
		{"serve: describe mappings table", serve(t.TempDir(), "--lease-table", table()), "DescribeTable", "esm: describe mappings table"},
	}
	for _, c := range failing {
		t.Run("failure persists/"+c.name, func(t *testing.T) {
			p := newHoldProxy(t, ddb, nil, []string{c.fail})
			proc := spawnESM(t, stopEnv(), append(c.args, "--endpoint-url", p.srv.URL)...)
			if code := proc.wait(t); code != 1 {
				t.Fatalf("%s failing every time: exit %d, want 1", c.fail, code)
			}
			if out := proc.stderr.String(); !strings.Contains(out, c.want) || !strings.Contains(out, "500") {
				t.Fatalf("the error does not name the failure (%q, status 500):\n%s", c.want, tail(out, 20))
			}
		})
	}
}

// stopEnv is the environment of the stop tests' processes: local credentials, no AWS settings
// of the machine.
func stopEnv() []string {
	return []string{"AWS_ACCESS_KEY_ID=AKIDLOCAL", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true"}
}

// provisionTemplate writes a template whose mapping reads the stream it declares, name.
func provisionTemplate(t *testing.T, dir, name string) string {
	t.Helper()
	return writeTemplateOn(t, dir, `  Stream:
    Type: AWS::Kinesis::Stream
    Properties:
      Name: `+name+`
      ShardCount: 1
`, "!GetAtt Stream.Arn")
}
