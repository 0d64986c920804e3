package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/runner"
)

// runESM runs the esm binary to completion and returns its exit code and stderr.
func runESM(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(esmBin, args...)
	cmd.Env = append(os.Environ(), "ESM_INVOKE=example") // the built-in example, unless --invoke says otherwise
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("esm %v did not exit", args)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// ddbStreamARN is a DynamoDB stream's ARN in the emulators' account.
const ddbStreamARN = "arn:aws:dynamodb:us-east-1:000000000000:table/orders/stream/2026-12-07T20:00:00.000"

func TestBadInputFailsClearlyAndWritesNothing(t *testing.T) {
	// A port nobody listens on: bind one, note it, close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadEndpoint := "http://" + l.Addr().String()
	l.Close()
	ddbEndpoint, stopDDB, err := testenv.DDBStreamsEndpoint(context.Background(), "../..", local.DDBLocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer stopDDB()
	cfg, err := runner.AWSConfig(context.Background(), "us-east-1", ddbEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	db, _ := local.DDBClients(cfg, ddbEndpoint)
	liveDDB, err := local.CreateStreamTable(context.Background(), db, fmt.Sprintf("badinput-%d-%d", os.Getpid(), time.Now().UnixNano()), ddbtypes.StreamViewTypeKeysOnly)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		args []string
		code int
		want []string // all must appear in stderr
	}{
		{"stream does not exist", []string{"run", "--endpoint-url", kinesisEndpoint, "--stream", "no-such-stream"}, 1,
			[]string{"stream not found", "no-such-stream"}},
		{"endpoint unreachable", []string{"run", "--endpoint-url", deadEndpoint, "--stream", "any"}, 1,
			[]string{l.Addr().String(), "connection refused"}},
		{"batch size out of range", []string{"run", "--endpoint-url", kinesisEndpoint, "--stream", "any", "--batch-size", "10001"}, 2,
			[]string{"batchSize", "10001", "less than or equal to 10000"}},
		{"bad starting position", []string{"run", "--endpoint-url", kinesisEndpoint, "--stream", "any", "--starting-position", "EARLIEST"}, 2,
			[]string{"startingPosition", "EARLIEST", "[LATEST, AT_TIMESTAMP, TRIM_HORIZON]"}},
		{"window out of range", []string{"run", "--endpoint-url", kinesisEndpoint, "--stream", "any", "--maximum-batching-window", "301"}, 2,
			[]string{"maximumBatchingWindowInSeconds", "301"}},
		{"timestamp without AT_TIMESTAMP", []string{"run", "--endpoint-url", kinesisEndpoint, "--stream", "any", "--starting-position-timestamp", "1700000000"}, 2,
			[]string{"StartingPositionTimestamp", "AT_TIMESTAMP"}},
		{"unknown flag", []string{"run", "--stream", "any", "--bogus"}, 2, []string{"--bogus"}},
		// A DynamoDB stream: Lambda's rules for it, and one that does not exist (on ddb-local).
		{"DynamoDB stream at a timestamp", []string{"run", "--endpoint-url", kinesisEndpoint, "--stream", ddbStreamARN,
			"--starting-position", "AT_TIMESTAMP", "--starting-position-timestamp", "1700000000"}, 2,
			[]string{"Unsupported starting position for arn type: " + ddbStreamARN}},
		{"DynamoDB stream with a consumer", []string{"run", "--endpoint-url", kinesisEndpoint, "--stream", ddbStreamARN, "--register-consumer", "c"}, 2,
			[]string{"DynamoDB Streams has no enhanced fan-out consumers", ddbStreamARN}},
		{"DynamoDB table", []string{"run", "--endpoint-url", kinesisEndpoint, "--stream", "arn:aws:dynamodb:us-east-1:000000000000:table/orders"}, 2,
			[]string{"is a table's ARN", "LatestStreamArn"}},
		{"DynamoDB stream does not exist", []string{"run", "--endpoint-url", ddbEndpoint, "--stream", ddbStreamARN}, 1,
			[]string{"stream not found", ddbStreamARN}},
		{"DynamoDB stream with the in-process Kinesis example", []string{"run", "--endpoint-url", ddbEndpoint, "--stream", liveDDB, "--invoke", "example"}, 2,
			[]string{"Go handler of Kinesis events", liveDDB, "aws:dynamodb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			code, stderr := runESM(t, append(tt.args, "--state-dir", state)...)
			if code != tt.code {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not name %q:\n%s", w, stderr)
				}
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n"); n != 0 {
				t.Errorf("error is %d lines, want one:\n%s", n+1, stderr)
			}
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Errorf("state directory was created (%v); nothing may be written on bad input", err)
			}
		})
	}
}

func TestStateDirInUseByAnotherProcess(t *testing.T) {
	stream := newStream(t, 1)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	first := startESM(t, nil, "--stream", stream, "--state-dir", state, "--log-level", "debug")
	testkit.WaitFor(t, "first process to hold the store", 30*time.Second, func() bool {
		return strings.Contains(first.stderr.String(), "mapping started")
	})
	db := filepath.Join(state, "state.db")
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	code, stderr := runESM(t, "run", "--endpoint-url", kinesisEndpoint, "--stream", stream, "--state-dir", state)
	if code != 1 {
		t.Fatalf("second process exit code %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, w := range []string{"state directory in use by another process", state, "pid", "stop that process or pass a different --state-dir"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr does not name %q:\n%s", w, stderr)
		}
	}
	after, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("the second process changed the state file")
	}
	if first.cmd.ProcessState != nil {
		t.Fatal("the first process died")
	}
	if code := first.stop(t); code != 0 {
		t.Fatalf("first process exit code %d after SIGTERM", code)
	}
}
