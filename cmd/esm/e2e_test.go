package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
)

// These tests run the built esm binary as a real process against kinesis-local.

var (
	esmBin          string
	kinesisEndpoint string
	kin             *kinesis.Client
	streamSeq       atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	ctx := context.Background()
	var stop func()
	var err error
	if kinesisEndpoint, kin, stop, err = testenv.Kinesis(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	defer func() { stopDynamo() }() // started by the first test that needs it

	dir, err := os.MkdirTemp("", "esm-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	esmBin = filepath.Join(dir, "esm")
	build := exec.Command("go", "build", "-o", esmBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build esm:", err)
		return 1
	}
	return m.Run()
}

func newStream(t *testing.T, shards int32) string {
	t.Helper()
	name := fmt.Sprintf("e2e-%d-%d", os.Getpid(), streamSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := local.CreateStream(ctx, kin, name, shards); err != nil {
		t.Fatal(err)
	}
	return name
}

// esmProc is one esm process.
type esmProc struct {
	cmd    *exec.Cmd
	stderr *testkit.SyncBuffer
	done   chan error
}

func startESM(t *testing.T, env []string, args ...string) *esmProc {
	t.Helper()
	return startBin(t, esmBin, env, args...)
}

// startBin is startESM with another build of esm (efoBin): esm run on the test's kinesis-local, with
// the built-in example unless --invoke says otherwise.
func startBin(t *testing.T, bin string, env []string, args ...string) *esmProc {
	t.Helper()
	return spawnBin(t, bin, append([]string{"ESM_INVOKE=example"}, env...), append([]string{"run", "--endpoint-url", kinesisEndpoint}, args...)...)
}

// spawnESM starts the esm binary with args; the test's cleanup kills it if it still runs.
func spawnESM(t testing.TB, env []string, args ...string) *esmProc {
	t.Helper()
	return spawnBin(t, esmBin, env, args...)
}

// spawnBin is spawnESM with another build of esm.
func spawnBin(t testing.TB, bin string, env []string, args ...string) *esmProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	p := &esmProc{cmd: cmd, stderr: &testkit.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	cmd.Stdout = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("esm output:\n%s", tail(p.stderr.String(), 60))
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop sends SIGTERM and returns the exit code.
func (p *esmProc) stop(t testing.TB) int {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	return p.wait(t)
}

func (p *esmProc) wait(t testing.TB) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("esm did not exit")
	}
	return p.cmd.ProcessState.ExitCode()
}

func readDeliveries(t *testing.T, path string) []example.Delivery {
	t.Helper()
	ds, err := verify.ReadDeliveries(path)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func uniqueCount(ds []example.Delivery) int {
	seen := map[string]bool{}
	for _, d := range ds {
		seen[d.Data] = true
	}
	return len(seen)
}

// produce writes total records over keys partition keys, in PutRecords calls of 20, with data
// "<key>:<n>" numbering each key's records in put order. After each call it reports how many
// records are written.
func produce(ctx context.Context, stream string, keys, total int, progress func(int)) (map[string]int, error) {
	counters := make([]int, keys)
	for written := 0; written < total; {
		var batch []local.Record
		for len(batch) < 20 && written+len(batch) < total {
			k := (written + len(batch)) % keys
			batch = append(batch, local.Record{PartitionKey: fmt.Sprintf("key-%d", k), Data: fmt.Appendf(nil, "key-%d:%d", k, counters[k])})
			counters[k]++
		}
		if _, err := local.PutRecords(ctx, kin, stream, batch); err != nil {
			return nil, err
		}
		written += len(batch)
		progress(written)
	}
	perKey := map[string]int{}
	for k, n := range counters {
		perKey[fmt.Sprintf("key-%d", k)] = n
	}
	return perKey, nil
}

// TestReshardingLosesNothing is the core promise: a 4-shard stream written while it is split,
// merged and re-sized, read by one esm process (optionally killed with SIGKILL and restarted
// midway): every record arrives, first deliveries come in put order per key, no child shard is
// invoked before its parents are drained, and new shards are found without a restart.
func TestReshardingLosesNothing(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "continuous", true: "sigkill-restart"}[kill], func(t *testing.T) {
			testResharding(t, kill, source{})
		})
	}
}

func testResharding(t *testing.T, kill bool, src source) {
	const total, keys = 2000, 50
	stream := newStream(t, 4)
	dir := t.TempDir()
	out := filepath.Join(dir, "deliveries.jsonl")
	// The event dump gets a line when an invocation starts, the trace one when it returns: a line
	// more in the dump than in the trace is an invocation in flight.
	dump, trace := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "trace.jsonl")
	env := []string{"EXAMPLE_OUTPUT=" + out, "EXAMPLE_DELAY=25ms", "EXAMPLE_EVENT_DUMP=" + dump, "EXAMPLE_TRACE=" + trace}
	args := []string{"--stream", stream, "--state-dir", filepath.Join(dir, "state"), "--batch-size", "5",
		"--poll-interval", "200ms", "--shard-sync-interval", "10s"}
	if src.args != nil {
		args = append(args, src.args(t, stream)...)
	}
	proc := src.start(t, env, args...)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var written atomic.Int64
	prodErr := make(chan error, 1)
	var perKey map[string]int
	go func() {
		var err error
		perKey, err = produce(ctx, stream, keys, total, func(n int) { written.Store(int64(n)) })
		prodErr <- err
	}()

	// Reshard while the producer writes and the consumer lags behind.
	testkit.WaitFor(t, "500 records written", time.Minute, func() bool { return written.Load() >= 500 })
	open, err := local.OpenShards(ctx, kin, stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := local.SplitInHalf(ctx, kin, stream, *open[0].ShardId); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "1000 records written", time.Minute, func() bool { return written.Load() >= 1000 })
	if _, _, err := local.MergeFirstAdjacent(ctx, kin, stream); err != nil {
		t.Fatal(err)
	}
	var preKill, preKillInvocations int
	var killed string // the killed process's log: its subscriptions count too
	if kill {
		testkit.WaitFor(t, "800 deliveries", time.Minute, func() bool { return len(readDeliveries(t, out)) >= 800 })
		testkit.WaitFor(t, "an invocation in flight", time.Minute, func() bool { return testkit.LineCount(t, dump) > testkit.LineCount(t, trace) })
		_ = proc.cmd.Process.Kill() // SIGKILL: no chance to checkpoint or clean up
		proc.wait(t)
		preKill, preKillInvocations = len(readDeliveries(t, out)), testkit.LineCount(t, dump)
		// Judged after the process is gone: an invocation that started and never returned was in
		// flight at the kill.
		if inFlight := preKillInvocations - testkit.LineCount(t, trace); inFlight < 1 {
			t.Fatalf("the SIGKILL landed between invocations (%d started, all returned); it must catch one in flight", preKillInvocations)
		}
		killed = proc.stderr.String()
		proc = src.start(t, env, args...)
	}
	testkit.WaitFor(t, "1500 records written", time.Minute, func() bool { return written.Load() >= 1500 })
	if err := local.Resize(ctx, kin, stream, 8); err != nil {
		t.Fatal(err)
	}
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "all records delivered", 2*time.Minute, func() bool { return uniqueCount(readDeliveries(t, out)) >= total })
	if code := proc.stop(t); code != 0 {
		t.Fatalf("esm exited %d after SIGTERM, want 0", code)
	}

	got := readDeliveries(t, out)
	lineage, err := local.Lineage(ctx, kin, stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(lineage) < 4+2+1+8 {
		t.Fatalf("stream has %d shards; the reshards did not all happen", len(lineage))
	}
	if bad := verify.Failed(verify.Deliveries(got, perKey, lineage)); bad != "" {
		t.Fatal(bad)
	}
	if kill {
		checkOnlyInFlightRepeated(t, got, preKill)
		checkInFlightReinvoked(t, dump, preKillInvocations)
	} else if len(got) != total {
		t.Fatalf("%d deliveries for %d records: duplicates without any failure", len(got), total)
	}
	logPickup(t, got, lineage)
	if src.check != nil {
		src.check(t, stream, killed+proc.stderr.String())
	}
}

// checkOnlyInFlightRepeated: after a SIGKILL, the only records delivered twice are those of the
// last batch each shard had started before the kill (it may or may not have been checkpointed).
func checkOnlyInFlightRepeated(t *testing.T, got []example.Delivery, preKill int) {
	t.Helper()
	lastReq := map[string]string{} // shard → request id of its last invocation before the kill
	for _, d := range got[:preKill] {
		lastReq[d.ShardID] = d.RequestID
	}
	count := map[string]int{}
	req := map[string]string{}
	for _, d := range got {
		count[d.Data]++
		if _, ok := req[d.Data]; !ok {
			req[d.Data] = d.RequestID
		}
	}
	repeated := 0
	for i, d := range got[:preKill] {
		if count[d.Data] > 1 && req[d.Data] == d.RequestID {
			repeated++
			if lastReq[d.ShardID] != d.RequestID {
				t.Fatalf("record %s (delivery %d, shard %s) was repeated after the restart but its batch was not the one in flight", d.Data, i, d.ShardID)
			}
		}
	}
	for data, n := range count {
		if n > 2 {
			t.Fatalf("record %s delivered %d times", data, n)
		}
	}
	t.Logf("after SIGKILL at delivery %d: %d records repeated (all from batches in flight)", preKill, repeated)
}

// checkInFlightReinvoked judges the SIGKILL by the event dump (a line per invocation, written when
// it starts): the records of the batches in flight at the kill are invoked again after the
// restart — at least one such record, since the kill caught an invocation in flight — and the
// only records invoked twice are those of the last batch each shard had started before the kill.
func checkInFlightReinvoked(t *testing.T, dump string, preKill int) {
	t.Helper()
	raw, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	lastBefore := map[string]map[string]bool{} // shard → eventIDs of its last invocation before the kill
	first := map[string]int{}                  // eventID → invocation that first carried it
	count := map[string]int{}
	for i, line := range lines {
		var e events.KinesisEvent
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("event dump line %d: %v", i+1, err)
		}
		if i < preKill && len(e.Records) > 0 {
			ids := map[string]bool{}
			for _, r := range e.Records {
				ids[r.EventID] = true
			}
			lastBefore[strings.SplitN(e.Records[0].EventID, ":", 2)[0]] = ids
		}
		for _, r := range e.Records {
			if _, ok := first[r.EventID]; !ok {
				first[r.EventID] = i
			}
			count[r.EventID]++
		}
	}
	reinvoked := 0
	for id, n := range count {
		if n == 1 {
			continue
		}
		shard := strings.SplitN(id, ":", 2)[0]
		if n > 2 || first[id] >= preKill || !lastBefore[shard][id] {
			t.Fatalf("record %s invoked %d times, first in invocation %d of %d before the kill: only the batch a shard had in flight may be invoked again", id, n, first[id]+1, preKill)
		}
		reinvoked++
	}
	if reinvoked == 0 {
		t.Fatal("no record of the batches in flight at the SIGKILL was invoked again after the restart")
	}
	t.Logf("after SIGKILL at invocation %d: %d records invoked again, all from batches in flight", preKill, reinvoked)
}

// logPickup reports how long each child waited after its last parent delivery.
func logPickup(t *testing.T, got []example.Delivery, lineage map[string][]string) {
	first, last := map[string]int64{}, map[string]int64{}
	for _, d := range got {
		if _, ok := first[d.ShardID]; !ok {
			first[d.ShardID] = d.ReceivedAt
		}
		last[d.ShardID] = d.ReceivedAt
	}
	var worst int64
	for child, parents := range lineage {
		fc, ok := first[child]
		if !ok {
			continue
		}
		var drained int64 // the last invocation of the parent that finished last
		for _, p := range parents {
			drained = max(drained, last[p])
		}
		if drained > 0 && fc-drained > worst {
			worst = fc - drained
		}
	}
	t.Logf("%d deliveries; longest wait from the last parent invocation to the child's first: %d ms", len(got), worst)
}
