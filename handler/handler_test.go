package handler

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

const childEnv = "HANDLER_TEST_START_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" { // the child of TestStartInsideLambda
		Start(func(_ context.Context, e events.KinesisEvent) (string, error) {
			return fmt.Sprintf("handled %d records of %s", len(e.Records), e.Records[0].EventSourceArn), nil
		})
	}
	os.Exit(m.Run())
}

// TestStartInsideLambda runs Start in a child process whose environment says it is inside Lambda
// (AWS_LAMBDA_RUNTIME_API): it must serve the Runtime API as lambda.Start does, not poll anything.
func TestStartInsideLambda(t *testing.T) {
	event := `{"Records":[{"eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/s","kinesis":{"data":"eA==","partitionKey":"k","sequenceNumber":"1"}}]}`
	response := make(chan string, 1)
	served := false
	var mu sync.Mutex
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/2018-06-01/runtime/invocation/next":
			mu.Lock()
			first := !served
			served = true
			mu.Unlock()
			if !first { // one invocation only: hold the runtime until the test ends
				<-r.Context().Done()
				return
			}
			w.Header().Set("Lambda-Runtime-Aws-Request-Id", "req-1")
			w.Header().Set("Lambda-Runtime-Deadline-Ms", fmt.Sprint(time.Now().Add(time.Minute).UnixMilli()))
			w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:f")
			io.WriteString(w, event)
		case r.Method == http.MethodPost && r.URL.Path == "/2018-06-01/runtime/invocation/req-1/response":
			b, _ := io.ReadAll(r.Body)
			response <- string(b)
			w.WriteHeader(http.StatusAccepted)
		default:
			t.Errorf("unexpected runtime API call %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer api.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(api.URL, "http://"))
	var out testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	select {
	case got := <-response:
		if want := `"handled 1 records of arn:aws:kinesis:us-east-1:123456789012:stream/s"`; got != want {
			t.Fatalf("response %s, want %s", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no response through the Runtime API; child output:\n%s", out.String())
	}
}

// build builds pkg for Linux as a Lambda bootstrap is built (static, -trimpath, lambda.norpc),
// stripped (-s -w) unless symbols are wanted, and returns its path.
func build(t *testing.T, pkg string, strip bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	args := []string{"build", "-o", out, "-trimpath", "-tags", "lambda.norpc"}
	if strip {
		args = append(args, "-ldflags=-s -w")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// maxSizeRatio is how much bigger a handler.Start binary may be than the same handler's with
// plain lambda.Start.
const maxSizeRatio = 1.3

// TestSlimHandlerSize: the example function with handler.Start, stripped, is at most 1.3 times the
// size of the same function with plain lambda.Start, and links no AWS SDK service client and
// none of esm's service (the poller, the CLI).
func TestSlimHandlerSize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three binaries")
	}
	t.Parallel()
	plain := build(t, "./testdata/plain", true)
	slim := build(t, "./testdata/slim", true)
	ps, ss := fileSize(t, plain), fileSize(t, slim)
	t.Logf("stripped: lambda.Start %d bytes, handler.Start %d bytes (%.3fx)", ps, ss, float64(ss)/float64(ps))
	if float64(ss) > maxSizeRatio*float64(ps) {
		t.Fatalf("handler.Start binary is %d bytes, %.2fx the %d of lambda.Start: the bound is %.1fx", ss, float64(ss)/float64(ps), ps, maxSizeRatio)
	}
	info, err := exec.Command("go", "version", "-m", slim).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, info)
	}
	if bytes.Contains(info, []byte("aws-sdk-go-v2")) || !bytes.Contains(info, []byte("github.com/aws/aws-lambda-go")) {
		t.Fatalf("modules of the handler.Start binary: want aws-lambda-go and no AWS SDK:\n%s", info)
	}
	// The symbols, from a build that keeps them.
	nm, err := exec.Command("go", "tool", "nm", build(t, "./testdata/slim", false)).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm: %v\n%s", err, nm)
	}
	forbidden := regexp.MustCompile(`aws-sdk-go-v2/service/|kinesis-esm/esm/(poller|cmd/esm/internal/cli|runner|lease|invoke)`)
	sc := bufio.NewScanner(bytes.NewReader(nm))
	symbols := 0
	for sc.Scan() {
		symbols++
		if forbidden.MatchString(sc.Text()) {
			t.Fatalf("handler.Start links %q", sc.Text())
		}
	}
	if symbols < 1000 || !bytes.Contains(nm, []byte("aws-lambda-go/lambda.Start")) {
		t.Fatalf("%d symbols, lambda.Start among them: %v; the symbol check saw no real binary", symbols, bytes.Contains(nm, []byte("lambda.Start")))
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestStartOutsideLambdaRunsTheMapping: a program whose main is handler.Start(fn), run outside
// Lambda with esm's flags (as go run . runs it), runs the mapping: esm polls kinesis-local and
// runs the program itself under the Runtime API, with START and REPORT lines for its
// invocations; SIGTERM to the program is a clean stop of both.
func TestStartOutsideLambdaRunsTheMapping(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kinesis-local")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	endpoint, kin, stop, err := testenv.Kinesis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	stream := fmt.Sprintf("handler-start-%d", os.Getpid())
	if _, err := local.CreateStream(ctx, kin, stream, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := local.PutRecords(ctx, kin, stream, []local.Record{{PartitionKey: "a", Data: []byte("one")}, {PartitionKey: "b", Data: []byte("two")}}); err != nil {
		t.Fatal(err)
	}
	esm := filepath.Join(t.TempDir(), "esm")
	if b, err := exec.Command("go", "build", "-o", esm, "github.com/kinesis-esm/esm/cmd/esm").CombinedOutput(); err != nil {
		t.Fatalf("build esm: %v\n%s", err, b)
	}
	prog := build(t, "./testdata/slim", true)
	dir := t.TempDir()
	deliveries := filepath.Join(dir, "out.jsonl")
	cmd := exec.Command(prog, "--stream", stream, "--endpoint-url", endpoint, "--state-dir", filepath.Join(dir, "state"),
		"--poll-interval", "100ms")
	cmd.Dir = dir // no template.yaml: flags only
	// The function runs under exec:, which passes it nothing of the environment unless named.
	cmd.Env = append(os.Environ(), "ESM_BIN="+esm, "EXAMPLE_OUTPUT="+deliveries, "ESM_FUNCTION_ENV_PASS=EXAMPLE_OUTPUT")
	var out testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	testkit.WaitFor(t, "both records delivered", time.Minute, func() bool {
		b, _ := os.ReadFile(deliveries)
		return bytes.Count(b, []byte("\n")) >= 2
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stop: %v\n%s", err, out.String())
	}
	log := out.String()
	if !regexp.MustCompile(`(?m)^START RequestId: \S+ Version: \$LATEST$`).MatchString(log) ||
		!regexp.MustCompile(`(?m)^REPORT RequestId: \S+\tDuration: `).MatchString(log) {
		t.Fatalf("no START/REPORT lines in the program's output:\n%s", log)
	}
	if !strings.Contains(log, "exec:") {
		t.Fatalf("output does not show esm running the program under exec::\n%s", log)
	}
}
