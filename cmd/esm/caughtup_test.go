package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/cmd/esm/internal/cli"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// These tests run "esm run --until-caught-up" as CI would: the built binary on kinesis-local with
// the example function, ending on its own with a summary and a verdict.

// caughtUpSummary is the --json summary.
type caughtUpSummary struct {
	CaughtUp bool `json:"caughtUp"`
	cli.Counts
	Shards   int                   `json:"shards"`
	PerShard map[string]cli.Counts `json:"perShard"`
}

// lastSummary parses the last line of stdout as the --json summary.
func lastSummary(t *testing.T, stdout string) caughtUpSummary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var s caughtUpSummary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("the last line of stdout is not the JSON summary: %v\n%s", err, stdout)
	}
	return s
}

// TestUntilCaughtUpExample: 120 records on two shards; esm run --until-caught-up exits 0 on its
// own once all of them were invoked, with the summary (per shard too); run again on the same
// state, it finds nothing more and exits 0 at once with zero records.
func TestUntilCaughtUpExample(t *testing.T) {
	stream := newStream(t, 2)
	perKey, err := produce(context.Background(), stream, 6, 120, func(int) {})
	if err != nil || len(perKey) == 0 {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tmpl := writeTemplate(t, dir, stream)
	out := filepath.Join(dir, "deliveries")
	args := []string{"run", "--endpoint-url", kinesisEndpoint, "--template", tmpl, "--state-dir", filepath.Join(dir, "state"),
		"--until-caught-up", "--json", "--per-shard"}
	code, stdout, stderr := runESMEnv(t, []string{"EXAMPLE_OUTPUT=" + out}, "", args...)
	if code != 0 {
		t.Fatalf("exit %d, want 0\n%s\n%s", code, stdout, tail(stderr, 30))
	}
	if got := uniqueCount(readDeliveries(t, out)); got != 120 {
		t.Fatalf("%d distinct records invoked before the exit, want 120", got)
	}
	s := lastSummary(t, stdout)
	perShard := 0
	for _, c := range s.PerShard {
		perShard += c.Records
	}
	if !s.CaughtUp || s.Records != 120 || s.Invocations == 0 || s.Delivered != 0 || s.Dropped != 0 || s.Shards != 2 || len(s.PerShard) != 2 || perShard != 120 {
		t.Fatalf("summary %+v: want caught up, 120 records (per shard too) on 2 shards, invocations, nothing delivered or dropped", s)
	}
	if !strings.Contains(stderr, "every shard caught up; stopping") {
		t.Fatalf("no log of the end:\n%s", tail(stderr, 30))
	}

	code, stdout, stderr = runESMEnv(t, []string{"EXAMPLE_OUTPUT=" + out}, "", args...)
	if s := lastSummary(t, stdout); code != 0 || !s.CaughtUp || s.Records != 0 || s.Invocations != 0 {
		t.Fatalf("second run: exit %d, summary %+v: want 0 and nothing read\n%s", code, s, tail(stderr, 30))
	}
}

// TestSDKGetRecordsFlag: esm run --sdk-getrecords reads with the SDK's own GetRecords (its start
// says so) and delivers every record, as the lean path does.
func TestSDKGetRecordsFlag(t *testing.T) {
	stream := newStream(t, 2)
	if _, err := produce(context.Background(), stream, 6, 60, func(int) {}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "deliveries")
	code, stdout, stderr := runESMEnv(t, []string{"EXAMPLE_OUTPUT=" + out}, "", "run", "--endpoint-url", kinesisEndpoint,
		"--template", writeTemplate(t, dir, stream), "--state-dir", filepath.Join(dir, "state"), "--until-caught-up", "--json", "--sdk-getrecords")
	if code != 0 {
		t.Fatalf("exit %d, want 0\n%s\n%s", code, stdout, tail(stderr, 30))
	}
	if got := uniqueCount(readDeliveries(t, out)); got != 60 {
		t.Fatalf("%d distinct records invoked, want 60", got)
	}
	if !strings.Contains(stderr, "getrecords=sdk") {
		t.Fatalf("the start does not say it reads with the SDK's GetRecords:\n%s", tail(stderr, 30))
	}
}

// TestUntilCaughtUpPoison: a poison record fails its batch (no retries), which goes to the
// on-failure queue (goaws): esm run --until-caught-up exits 3 with the summary counting it and
// the message on the queue. Without a destination the batch is dropped: exit 4.
func TestUntilCaughtUpPoison(t *testing.T) {
	srv, sqsC := goaws(t)
	stream := newStream(t, 1)
	url, arn, err := local.CreateQueue(context.Background(), sqsC, "failures-"+stream)
	if err != nil {
		t.Fatal(err)
	}
	putSequenced(t, stream, "a", "poison", "c")
	env := append(endpoints(srv.Endpoint(), ""), "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH=poison", "EXAMPLE_OUTPUT="+filepath.Join(t.TempDir(), "out"))
	tmpl := redriveTemplate(t, stream, "SQS", arn, 1, false)
	code, stdout, stderr := runESMEnv(t, env, "", "run", "--template", tmpl, "--sqs-protocol", "query", "--state-dir", filepath.Join(t.TempDir(), "state"),
		"--until-caught-up", "--json")
	s := lastSummary(t, stdout)
	if code != cli.ExitDelivered || !s.CaughtUp || s.Records != 3 || s.Delivered != 1 || s.Dropped != 0 || s.FailedInvocations != 1 {
		t.Fatalf("exit %d, summary %+v: want %d, caught up, 3 records, 1 failed invocation, 1 record to the destination\n%s", code, s, cli.ExitDelivered, tail(stderr, 30))
	}
	if !strings.Contains(stderr, "esm: caught up, but 1 records went to the on-failure destination") {
		t.Fatalf("stderr does not say why:\n%s", tail(stderr, 5))
	}
	if v, h := queueCounts(t, sqsC, url); v != "1" || h != "0" {
		t.Fatalf("queue: %s visible, %s in flight; want the one failure record", v, h)
	}

	dir := t.TempDir()
	noDest := writeTemplate(t, dir, stream, "MaximumRetryAttempts: 0", "BatchSize: 1")
	code, stdout, stderr = runESMEnv(t, env, "", "run", "--template", noDest, "--state-dir", filepath.Join(dir, "state"), "--until-caught-up")
	if code != cli.ExitDropped || !strings.Contains(stdout, "caught up: 1 shards") || !strings.Contains(stdout, "1 dropped") {
		t.Fatalf("without a destination: exit %d, want %d, and a summary with 1 dropped\n%s\n%s", code, cli.ExitDropped, stdout, tail(stderr, 30))
	}
}

// TestUntilCaughtUpUsage: the flags of --until-caught-up are checked before anything is read:
// exit 2 and a message that says what to change.
func TestUntilCaughtUpUsage(t *testing.T) {
	tmpl := writeTemplate(t, t.TempDir(), "s")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--idle-for", "5s"}, "--idle-for goes with --until-caught-up: add --until-caught-up, or drop --idle-for"},
		{[]string{"--json"}, "--json goes with --until-caught-up"},
		{[]string{"--per-shard"}, "--per-shard goes with --until-caught-up"},
		{[]string{"--until-caught-up", "--idle-for=-1s"}, "--idle-for -1s: must be positive"},
		{[]string{"--until-caught-up", "--idle-for", "soon"}, "--idle-for"},
		{[]string{"--until-caught-up", "--no-enabled"}, "the mapping is disabled (Enabled: false or --no-enabled), so nothing would be read"},
		{[]string{"--until-caught-up", "--idle-for", "5s", "--register-consumer", "c"}, "--idle-for: not supported when reading through an enhanced fan-out consumer"},
	} {
		args := append([]string{"run", "--endpoint-url", kinesisEndpoint, "--template", tmpl, "--state-dir", filepath.Join(t.TempDir(), "state")}, c.args...)
		code, _, stderr := runESMEnv(t, nil, "", args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// TestUntilCaughtUpTwoWorkers: two workers share a 4-shard stream through a lease table, each
// with --until-caught-up and a function that takes 100 ms per batch of 10: both exit 0 on their
// own, every record was invoked, and neither exited before the last batch of any shard ended
// (the rule: every shard of the mapping caught up, not only the worker's own).
func TestUntilCaughtUpTwoWorkers(t *testing.T) {
	stream := newStream(t, 4)
	if _, err := produce(context.Background(), stream, 8, 200, func(int) {}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "deliveries")
	env := append(stopEnv(), "AWS_ENDPOINT_URL_KINESIS="+kinesisEndpoint, "AWS_ENDPOINT_URL_DYNAMODB="+dynalite(t),
		"EXAMPLE_OUTPUT="+out, "EXAMPLE_DELAY=100ms")
	table := fmt.Sprintf("caughtup-%d-%d", streamSeq.Add(1), time.Now().UnixNano()%1e6)
	var procs []*esmProc
	for _, id := range []string{"w1", "w2"} {
		procs = append(procs, spawnESM(t, env, "run", "--invoke", "example", "--stream", stream, "--batch-size", "10",
			"--lease-table", table, "--worker-id", id, "--lease-duration", "3s", "--until-caught-up", "--json"))
	}
	ended := make([]time.Time, len(procs))
	records := 0
	for i, p := range procs {
		if code := p.wait(t); code != 0 {
			t.Fatalf("worker %d: exit %d, want 0\n%s", i+1, code, tail(p.stderr.String(), 30))
		}
		ended[i] = time.Now()
		var s caughtUpSummary
		for _, l := range strings.Split(p.stderr.String(), "\n") {
			if strings.HasPrefix(l, `{"caughtUp"`) {
				if err := json.Unmarshal([]byte(l), &s); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !s.CaughtUp || s.Delivered != 0 || s.Dropped != 0 {
			t.Fatalf("worker %d: summary %+v", i+1, s)
		}
		records += s.Records
	}
	ds := readDeliveries(t, out)
	if got := uniqueCount(ds); got != 200 || records < 200 {
		t.Fatalf("%d distinct records invoked, %d read by the workers; want 200", got, records)
	}
	var lastDone int64
	for _, d := range ds {
		lastDone = max(lastDone, d.DoneAt)
	}
	for i, e := range ended {
		if e.UnixNano() < lastDone {
			t.Fatalf("worker %d exited %v before the last batch ended", i+1, time.Unix(0, lastDone).Sub(e))
		}
	}
}

// TestUntilCaughtUpIdleFor: esm run --until-caught-up --idle-for 3s on an empty stream, with 40
// records put once its shard is being read (a run to the tips of the start would end then):
// it exits 0 with all 40 invoked, and not before 3 s after the last put.
func TestUntilCaughtUpIdleFor(t *testing.T) {
	stream := newStream(t, 1)
	dir := t.TempDir()
	out := filepath.Join(dir, "deliveries")
	p := startESM(t, []string{"EXAMPLE_OUTPUT=" + out}, "--template", writeTemplate(t, dir, stream),
		"--state-dir", filepath.Join(dir, "state"), "--poll-interval", "200ms", "--until-caught-up", "--idle-for", "3s", "--json")
	testkit.WaitFor(t, "the shard read", 30*time.Second, func() bool { return strings.Contains(p.stderr.String(), "shard started") })
	if _, err := produce(context.Background(), stream, 4, 40, func(int) {}); err != nil {
		t.Fatal(err)
	}
	lastPut := time.Now()
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, tail(p.stderr.String(), 30))
	}
	ended := time.Now()
	if got := uniqueCount(readDeliveries(t, out)); got != 40 {
		t.Fatalf("%d distinct records invoked, want 40", got)
	}
	if idle := ended.Sub(lastPut); idle < 3*time.Second {
		t.Fatalf("exited %v after the last put, want at least --idle-for 3s", idle)
	}
	if !strings.Contains(p.stderr.String(), `"records":40`) {
		t.Fatalf("no summary with 40 records:\n%s", tail(p.stderr.String(), 5))
	}
}

// TestUntilCaughtUpStopped: SIGTERM before the mapping is caught up (a function that takes 2 s
// per batch of 1, 5 records) still stops cleanly, prints the summary, and exits 5.
func TestUntilCaughtUpStopped(t *testing.T) {
	stream := newStream(t, 1)
	putSequenced(t, stream, "a", "b", "c", "d", "e")
	dir := t.TempDir()
	out := filepath.Join(dir, "deliveries")
	p := startESM(t, []string{"EXAMPLE_OUTPUT=" + out, "EXAMPLE_DELAY=2s"}, "--template", writeTemplate(t, dir, stream, "BatchSize: 1"),
		"--state-dir", filepath.Join(dir, "state"), "--until-caught-up")
	testkit.WaitFor(t, "the first invocation", 30*time.Second, func() bool { return len(readDeliveries(t, out)) > 0 })
	if code := p.stop(t); code != cli.ExitNotCaughtUp {
		t.Fatalf("exit %d, want %d\n%s", code, cli.ExitNotCaughtUp, tail(p.stderr.String(), 30))
	}
	if s := p.stderr.String(); !strings.Contains(s, "stopped before caught up: 1 shards") || !strings.Contains(s, "esm: stopped before every shard was caught up") {
		t.Fatalf("no summary or verdict:\n%s", tail(s, 10))
	}
}
