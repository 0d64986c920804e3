package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

var streamSeq atomic.Int64

// uniqueName returns a stream name no other test (in this or another test
// binary sharing the emulator) uses.
func uniqueName() string {
	return fmt.Sprintf("local-%d-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9, streamSeq.Add(1))
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// startKinesis starts a private kinesis-local that the test stops at the end.
func startKinesis(t *testing.T, opts KinesisOptions) *Process {
	t.Helper()
	begin := time.Now()
	p, err := StartKinesis(testContext(t), opts)
	if err != nil {
		t.Fatalf("StartKinesis: %v", err)
	}
	t.Logf("%v accepting after %v", p, time.Since(begin).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return p
}

// kinesisEndpoint is the kinesis-local that "make test" exported in ESM_TEST_KINESIS_ENDPOINT,
// else a private one the test stops at the end (internal/testbed/testenv gives other packages the same;
// it imports this package, so this package's tests cannot use it).
func kinesisEndpoint(t *testing.T) string {
	t.Helper()
	if v := os.Getenv("ESM_TEST_KINESIS_ENDPOINT"); v != "" {
		return v
	}
	return startKinesis(t, KinesisOptions{}).Endpoint()
}

func endpointPort(t *testing.T, endpoint string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(endpoint, "http://"))
	if err != nil {
		t.Fatalf("endpoint %q: %v", endpoint, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("endpoint %q: %v", endpoint, err)
	}
	return n
}

func TestCreateStreamSplitShard(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	endpoint := kinesisEndpoint(t)
	cfg, err := AWSConfig(ctx, "")
	if err != nil {
		t.Fatalf("AWSConfig: %v", err)
	}
	c := NewKinesisClient(cfg, endpoint)
	name := uniqueName()

	arn, err := CreateStream(ctx, c, name, 2)
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	wantARN := "arn:aws:kinesis:us-east-1:000000000000:stream/" + name
	if arn != wantARN {
		t.Errorf("CreateStream ARN = %q, want %q", arn, wantARN)
	}
	if _, err := CreateStream(ctx, c, name, 2); !errors.As(err, new(*types.ResourceInUseException)) {
		t.Errorf("second CreateStream error = %v, want ResourceInUseException", err)
	}

	put, err := PutRecords(ctx, c, name, []Record{
		{PartitionKey: "a", Data: []byte("1")},
		{PartitionKey: "b", Data: []byte("2")},
		{PartitionKey: "a", Data: []byte("3")},
	})
	if err != nil {
		t.Fatalf("PutRecords: %v", err)
	}
	if len(put) != 3 || put[0].ShardId == nil || put[0].SequenceNumber == nil || aws.ToString(put[0].ShardId) != aws.ToString(put[2].ShardId) {
		t.Errorf("PutRecords results = %+v, want 3 entries, the first and last in one shard", put)
	}

	shards, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatalf("ListShards: %v", err)
	}
	parent := shards.Shards[0]
	r := parent.HashKeyRange
	start, _ := new(big.Int).SetString(aws.ToString(r.StartingHashKey), 10)
	end, _ := new(big.Int).SetString(aws.ToString(r.EndingHashKey), 10)
	mid := new(big.Int).Add(start, end)
	mid.Rsh(mid, 1)
	if _, err := c.SplitShard(ctx, &kinesis.SplitShardInput{
		StreamName:         aws.String(name),
		ShardToSplit:       parent.ShardId,
		NewStartingHashKey: aws.String(mid.String()),
	}); err != nil {
		t.Fatalf("SplitShard: %v", err)
	}
	if err := WaitActive(ctx, c, name); err != nil {
		t.Fatalf("WaitActive: %v", err)
	}

	after, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatalf("ListShards after split: %v", err)
	}
	if len(after.Shards) != 4 {
		t.Fatalf("ListShards after split: %d shards, want 4", len(after.Shards))
	}
	children := 0
	for _, s := range after.Shards {
		if p := aws.ToString(s.ParentShardId); p != "" {
			if p != aws.ToString(parent.ShardId) {
				t.Errorf("shard %s: parent %s, want %s", aws.ToString(s.ShardId), p, aws.ToString(parent.ShardId))
			}
			children++
		}
	}
	if children != 2 {
		t.Errorf("%d shards with a parent, want 2: %+v", children, after.Shards)
	}

	if err := WaitActive(ctx, c, name+"-missing"); !errors.As(err, new(*types.ResourceNotFoundException)) {
		t.Errorf("WaitActive(missing) error = %v, want ResourceNotFoundException", err)
	}
}

func TestStartKinesisLoopbackAndStop(t *testing.T) {
	t.Parallel()
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	p := startKinesis(t, KinesisOptions{Port: ports[0], TLSPort: ports[1]})
	if got, want := p.Endpoint(), "http://127.0.0.1:"+strconv.Itoa(ports[0]); got != want {
		t.Errorf("Endpoint() = %q, want %q", got, want)
	}
	checkLoopbackOnly(t, ports[0], ports[1])

	// The emulator answers Kinesis requests.
	ctx := testContext(t)
	cfg, err := AWSConfig(ctx, "")
	if err != nil {
		t.Fatalf("AWSConfig: %v", err)
	}
	if _, err := NewKinesisClient(cfg, p.Endpoint()).ListStreams(ctx, &kinesis.ListStreamsInput{}); err != nil {
		t.Fatalf("ListStreams: %v", err)
	}

	pid := p.cmd.Process.Pid
	checkStop(t, p, ports...)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d after Stop: kill(0) = %v, want ESRCH", pid, err)
	}
}

func TestStartKinesisAutomaticPorts(t *testing.T) {
	t.Parallel()
	p := startKinesis(t, KinesisOptions{})
	port := endpointPort(t, p.Endpoint())
	if port == 0 {
		t.Fatalf("Endpoint() = %q, want a real port", p.Endpoint())
	}
	checkLoopbackOnly(t, port)
	checkStop(t, p, port)
}

func TestStartDynalite(t *testing.T) {
	t.Parallel()
	p, err := StartDynalite(testContext(t), DynaliteOptions{})
	if err != nil {
		t.Fatalf("StartDynalite: %v", err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	port := endpointPort(t, p.Endpoint())
	checkLoopbackOnly(t, port)

	// An unsigned request gets DynamoDB's own error shape back, which shows
	// that dynalite (and not some other server) owns the port.
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, p.Endpoint(), strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST ListTables: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "MissingAuthenticationToken") {
		t.Errorf("unsigned ListTables: %d %s, want 400 MissingAuthenticationToken", resp.StatusCode, body)
	}
	http.DefaultClient.CloseIdleConnections()

	checkStop(t, p, port)
}

// TestDynaliteSurvivesAnAbortedRequest: a client that goes away halfway through a request's
// body (a worker killed while it sent one) must not end the emulator, which dynalite's own
// handler does by rethrowing the request's "aborted" error; the preload keeps it running.
func TestDynaliteSurvivesAnAbortedRequest(t *testing.T) {
	t.Parallel()
	p, err := StartDynalite(testContext(t), DynaliteOptions{})
	if err != nil {
		t.Fatalf("StartDynalite: %v", err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	addr := strings.TrimPrefix(p.Endpoint(), "http://")
	for range 3 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// Half of the promised body, then the connection closes.
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n"+
			"Content-Type: application/x-amz-json-1.0\r\nContent-Length: 100\r\n\r\n{\"Lim", addr)
		conn.Close()
	}
	// Each abort's end of connection reaches dynalite's event loop before a later connection's
	// request can be read, so an answer on a new connection shows the aborts were handled: a
	// crashed emulator answers none.
	for i := range 3 {
		req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, p.Endpoint(), strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Close = true // a new connection each time
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request %d after the aborted ones: %v (the emulator stopped)", i+1, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("request %d after the aborted ones: status %d, want dynalite's 400 for an unsigned request", i+1, resp.StatusCode)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestStartDynalitePortInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	p, err := StartDynalite(testContext(t), DynaliteOptions{Port: port})
	if err == nil {
		_ = p.Stop()
		t.Fatalf("StartDynalite on a busy port succeeded")
	}
	if !strings.Contains(err.Error(), "already in use") {
		t.Errorf("StartDynalite error = %v, want one saying the port is in use", err)
	}
}

func TestStartKinesisContextEnds(t *testing.T) {
	t.Parallel()
	// kinesis-local needs about half a second to bind: the context ends first.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartKinesis(ctx, KinesisOptions{Port: ports[0], TLSPort: ports[1]})
	if err == nil {
		t.Logf("kinesis-local started within 20ms; nothing to check")
		if err := p.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
		return
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("StartKinesis error = %v, want context.DeadlineExceeded", err)
	}
	// The half-started emulator was killed: its port never starts accepting.
	time.Sleep(1500 * time.Millisecond)
	if accepts(t.Context(), ports[0]) {
		t.Errorf("port %d accepts after a start that failed", ports[0])
	}
}

func TestStartNotInstalled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := StartKinesis(t.Context(), KinesisOptions{RepoDir: dir}); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("StartKinesis in %s: error = %v, want ErrNotInstalled", dir, err)
	}
	if _, err := StartDynalite(t.Context(), DynaliteOptions{RepoDir: dir}); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("StartDynalite in %s: error = %v, want ErrNotInstalled", dir, err)
	}
}

func TestAWSConfig(t *testing.T) {
	// Settings from the developer's environment must not break or leak in.
	t.Setenv("AWS_PROFILE", "esm-no-such-profile")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "fromenv")
	ctx := t.Context()
	for _, tc := range []struct{ region, want string }{
		{"", "us-east-1"},
		{"eu-west-1", "eu-west-1"},
	} {
		cfg, err := AWSConfig(ctx, tc.region)
		if err != nil {
			t.Fatalf("AWSConfig(%q): %v", tc.region, err)
		}
		if cfg.Region != tc.want {
			t.Errorf("AWSConfig(%q).Region = %q, want %q", tc.region, cfg.Region, tc.want)
		}
		creds, err := cfg.Credentials.Retrieve(ctx)
		if err != nil {
			t.Fatalf("Retrieve: %v", err)
		}
		if creds.AccessKeyID != "AKIDLOCAL" || creds.SecretAccessKey != "local" || creds.SessionToken != "" {
			t.Errorf("credentials = %q/%q/%q, want AKIDLOCAL/local/(none)", creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken)
		}
	}
}

// checkStop stops p twice and checks that its ports stop accepting.
func checkStop(t *testing.T, p *Process, ports ...int) {
	t.Helper()
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	for _, port := range ports {
		if accepts(t.Context(), port) {
			t.Errorf("port %d still accepts after Stop", port)
		}
	}
}

// checkLoopbackOnly checks that every listening socket on the given ports is
// bound to 127.0.0.1, and that none of the machine's other addresses answer
// on them.
func checkLoopbackOnly(t *testing.T, ports ...int) {
	t.Helper()
	for _, port := range ports {
		if runtime.GOOS == "linux" {
			addrs := listenAddrs(t, port)
			if len(addrs) == 0 {
				t.Errorf("port %d: no listening socket in /proc/net/tcp{,6}", port)
			}
			for _, a := range addrs {
				if a != "0100007F" {
					t.Errorf("port %d: listening on %s (hex, /proc/net), want 127.0.0.1 only", port, a)
				}
			}
		}
		for _, ip := range otherLocalIPs(t) {
			addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
				t.Errorf("%s accepts connections; the emulator must listen on 127.0.0.1 only", addr)
			}
		}
	}
}

// listenAddrs returns the hex local addresses of the sockets in LISTEN state
// on port, from /proc/net/tcp and /proc/net/tcp6.
func listenAddrs(t *testing.T, port int) []string {
	t.Helper()
	var addrs []string
	suffix := fmt.Sprintf(":%04X", port)
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			fields := strings.Fields(s.Text())
			// sl local_address rem_address st ...; st 0A is LISTEN.
			if len(fields) < 4 || fields[3] != "0A" || !strings.HasSuffix(fields[1], suffix) {
				continue
			}
			addrs = append(addrs, strings.TrimSuffix(fields[1], suffix))
		}
		f.Close()
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return addrs
}

// otherLocalIPs returns the machine's own unicast addresses that are not
// loopback.
func otherLocalIPs(t *testing.T) []net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatalf("InterfaceAddrs: %v", err)
	}
	var ips []net.IP
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || !n.IP.IsGlobalUnicast() {
			continue
		}
		ips = append(ips, n.IP)
	}
	return ips
}
