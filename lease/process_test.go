package lease

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
)

// These tests run esm processes ("esm run --lease-table") against kinesis-local and dynalite.

var (
	buildOnce sync.Once
	esmBin    string
	buildErr  error
	binDir    string // removed by testMain
)

// esmBinary builds cmd/esm once per test binary.
func esmBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "esm-lease-"); buildErr != nil {
			return
		}
		esmBin = filepath.Join(binDir, "esm")
		out, err := exec.Command("go", "build", "-o", esmBin, "github.com/kinesis-esm/esm/cmd/esm").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build esm: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return esmBin
}

// processEnv is the environment of an esm process: this one's without AWS or ESM settings, plus
// the emulators' endpoints for Kinesis and DynamoDB (the SDK's per-service variables) and
// placeholder credentials.
func processEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "ESM_") && !strings.HasPrefix(kv, "EXAMPLE_") {
			env = append(env, kv)
		}
	}
	return append(append(env,
		"AWS_ACCESS_KEY_ID=AKIDLOCAL", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_KINESIS="+kinesisEndpoint, "AWS_ENDPOINT_URL_DYNAMODB="+dynamoEndpoint,
	), extra...)
}

// esmProc is one esm worker process.
type esmProc struct {
	id     string
	cmd    *exec.Cmd
	log    *logBuffer // stderr and stdout
	out    string     // EXAMPLE_OUTPUT
	done   chan struct{}
	exited atomic.Bool
}

// startESM runs "esm run" as worker id of the table.
func startESM(t *testing.T, dir, id, stream, table string, leaseDuration time.Duration, env ...string) *esmProc {
	t.Helper()
	p := &esmProc{id: id, log: &logBuffer{}, out: filepath.Join(dir, id+".jsonl"), done: make(chan struct{})}
	p.cmd = exec.Command(esmBinary(t), "run", "--stream", stream, "--lease-table", table, "--worker-id", id,
		"--lease-duration", leaseDuration.String(), "--batch-size", "10", "--poll-interval", "200ms",
		"--shard-sync-interval", "5s", "--shutdown-grace", "10s", "--log-level", "debug", "--invoke", "example",
		"--state-dir", filepath.Join(dir, "unused-"+id))
	p.cmd.Dir = dir // no template.yaml there: flags only
	p.cmd.Env = processEnv(append([]string{"EXAMPLE_OUTPUT=" + p.out}, env...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.exited.Store(true)
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited.Load() {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output (last 80 lines):\n%s", p.id, lastLines(p.log.String(), 80))
		}
		if keep := os.Getenv("LEASE_TEST_KEEP_LOGS"); keep != "" { // a directory for whole logs
			_ = os.WriteFile(filepath.Join(keep, t.Name()+"-"+p.id+".log"), []byte(p.log.String()), 0o644)
		}
	})
	return p
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// stop sends SIGTERM and waits for the exit, which must be clean.
func (p *esmProc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit after SIGTERM", p.id)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("%s exited %d after SIGTERM", p.id, code)
	}
}

func (p *esmProc) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *esmProc) deliveries(t *testing.T) []example.Delivery {
	t.Helper()
	ds, err := verify.ReadDeliveries(p.out)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// logEvent is one line of a worker's log.
type logEvent struct {
	at      time.Time
	msg     string
	worker  string
	attrs   map[string]string
	counter int64
}

// events parses the worker's slog text lines.
func (p *esmProc) events() []logEvent {
	var out []logEvent
	for _, line := range strings.Split(p.log.String(), "\n") {
		attrs := parseLogLine(line)
		at, err := time.Parse(time.RFC3339Nano, attrs["time"])
		if err != nil {
			continue
		}
		n, _ := strconv.ParseInt(attrs["lease_counter"], 10, 64)
		out = append(out, logEvent{at: at, msg: attrs["msg"], worker: p.id, attrs: attrs, counter: n})
	}
	return out
}

// parseLogLine reads key=value pairs of slog's text format; quoted values are Go-quoted.
func parseLogLine(line string) map[string]string {
	out := map[string]string{}
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		k, rest, ok := strings.Cut(line, "=")
		if !ok {
			break
		}
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for end < len(rest) && rest[end] != '"' {
				if rest[end] == '\\' {
					end++
				}
				end++
			}
			v, err := strconv.Unquote(rest[:min(end+1, len(rest))])
			if err != nil {
				break
			}
			out[k], line = v, rest[min(end+1, len(rest)):]
			continue
		}
		v, after, _ := strings.Cut(rest, " ")
		out[k], line = v, after
	}
	return out
}

// allDeliveries merges the workers' deliveries in invocation order (stable within a worker).
func allDeliveries(t *testing.T, procs []*esmProc) []example.Delivery {
	t.Helper()
	var all []example.Delivery
	for _, p := range procs {
		all = append(all, p.deliveries(t)...)
	}
	slices.SortStableFunc(all, func(a, b example.Delivery) int { return cmp.Compare(a.ReceivedAt, b.ReceivedAt) })
	return all
}

// checkExclusive checks, from the workers' logs and deliveries, that no worker started an
// invocation for a shard after another worker had taken the shard's lease since it last took it
// itself: a worker invokes only while the lease is its own.
func checkExclusive(t *testing.T, procs []*esmProc) {
	t.Helper()
	type take struct {
		ms     int64
		worker string
	}
	takes := map[string][]take{}
	for _, p := range procs {
		for _, e := range p.events() {
			if e.msg == "lease taken" {
				takes[e.attrs["shard_id"]] = append(takes[e.attrs["shard_id"]], take{e.at.UnixMilli(), p.id})
			}
		}
	}
	checked := 0
	for _, p := range procs {
		for _, d := range p.deliveries(t) {
			var mine int64 = -1
			for _, tk := range takes[d.ShardID] {
				if tk.worker == p.id && tk.ms <= d.ReceivedAt {
					mine = max(mine, tk.ms)
				}
			}
			if mine < 0 {
				t.Fatalf("%s invoked %s (%s) at %d without ever taking its lease", p.id, d.ShardID, d.Data, d.ReceivedAt)
			}
			for _, tk := range takes[d.ShardID] {
				if tk.worker != p.id && tk.ms > mine && tk.ms < d.ReceivedAt {
					t.Fatalf("%s invoked %s (%s) at %d, after %s took the lease at %d (its own take: %d)",
						p.id, d.ShardID, d.Data, d.ReceivedAt, tk.worker, tk.ms, mine)
				}
			}
			checked++
		}
	}
	t.Logf("%d deliveries checked: each invoked by the lease's owner", checked)
}

// takenFrom notes the unfinished leases worker owns now and returns a condition: each of them
// is finished or owned by another worker.
func takenFrom(t *testing.T, table, worker string) func() bool {
	t.Helper()
	ids := leasesOwnedBy(t, table, worker)
	if len(ids) == 0 {
		t.Fatalf("%s owns no lease", worker)
	}
	return func() bool {
		ls := leasesOf(t, table)
		for _, id := range ids {
			if l := ls[id]; !l.Finished() && (l.Owner == "" || l.Owner == worker) {
				return false
			}
		}
		return true
	}
}

// ownersNow counts, per owner, the leases of unfinished shards, and how many there are.
func ownersNow(t *testing.T, table string) (map[string]int, int) { return openOwners(t, table) }

// ownersIfTable is ownersNow for a table the workers may not have created yet.
func ownersIfTable(t *testing.T, table string) (map[string]int, int) {
	t.Helper()
	if _, err := ListLeases(context.Background(), ddb, table); err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, 0
		}
		t.Fatal(err)
	}
	return openOwners(t, table)
}

// dropTableAtEnd deletes a table the test or its workers create.
func dropTableAtEnd(t testing.TB, table string) {
	t.Cleanup(func() { _, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table}) })
}

// produceSlowly writes records over keys until stop is closed, numbering each key's records.
func produceSlowly(ctx context.Context, stream string, keys int, every time.Duration, stop <-chan struct{}, written *atomic.Int64) (map[string]int, error) {
	counters := make([]int, keys)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			perKey := map[string]int{}
			for k, c := range counters {
				perKey[fmt.Sprintf("key-%d", k)] = c
			}
			return perKey, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		k := n % keys
		rec := local.Record{PartitionKey: fmt.Sprintf("key-%d", k), Data: fmt.Appendf(nil, "key-%d:%d", k, counters[k])}
		if _, err := local.PutRecords(ctx, kin, stream, []local.Record{rec}); err != nil {
			return nil, err
		}
		counters[k]++
		written.Add(1)
	}
}

func uniqueData(ds []example.Delivery) int {
	seen := map[string]bool{}
	for _, d := range ds {
		seen[d.Data] = true
	}
	return len(seen)
}

// TestProcessesShareStream is the first two demands with real processes: three esm
// workers on an 8-shard stream that is split and merged while 5,000 records over 100 keys are
// written; one is killed with SIGKILL and its shards are taken over within a lease duration plus
// one renewal interval; another is stopped with SIGTERM and its shards are taken within 2 s.
// Nothing is lost, first deliveries come in order per key, parents are drained before children,
// and no worker invokes a shard whose lease another took.
func TestProcessesShareStream(t *testing.T) {
	const total, keys = 5000, 100
	const leaseDuration = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stream, _ := newStream(t, "procs", 8)
	table := uniqueName("procs")
	dir := t.TempDir()
	var procs []*esmProc
	var ids []string
	for i := range 3 {
		id := fmt.Sprintf("w%d", i)
		ids = append(ids, id)
		procs = append(procs, startESM(t, dir, id, stream, table, leaseDuration, "EXAMPLE_DELAY=5ms"))
	}
	dropTableAtEnd(t, table)
	testkit.WaitFor(t, "three workers balanced on 8 shards", 30*time.Second, func() bool {
		o, n := ownersIfTable(t, table)
		return n == 8 && balanced(o, n, ids)
	})

	var written atomic.Int64
	prodErr := make(chan error, 1)
	var perKey map[string]int
	go func() {
		var err error
		perKey, err = produceKeys(ctx, stream, keys, total, &written)
		prodErr <- err
	}()
	testkit.WaitFor(t, "1,000 records written", time.Minute, func() bool { return written.Load() >= 1000 })
	open, err := local.OpenShards(ctx, kin, stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := local.SplitInHalf(ctx, kin, stream, *open[2].ShardId); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "2,000 records written", time.Minute, func() bool { return written.Load() >= 2000 })
	if _, _, err := local.MergeFirstAdjacent(ctx, kin, stream); err != nil {
		t.Fatal(err)
	}

	// SIGKILL: the killed worker's leases expire and are taken.
	testkit.WaitFor(t, "3,000 records written", time.Minute, func() bool { return written.Load() >= 3000 })
	killed := time.Now()
	procs[0].kill(t)
	horizon := horizonOf(t, table, ids[0]) // its last heartbeat's
	taken := takenFrom(t, table, ids[0])
	inFlight := len(leasesOwnedBy(t, table, ids[0])) // at most one batch each may repeat
	testkit.WaitFor(t, "the killed worker's shards taken over", 20*time.Second, taken)
	takeover := time.Since(killed)
	// The takers wait, after the death, until the horizon the dead worker's last heartbeat
	// published (its invocations' deadlines) has passed (DESIGN.md, "The takeover bound"); its
	// last heartbeat came before the kill.
	limit := TakeoverBound(leaseDuration, horizon)
	t.Logf("SIGKILL: shards taken over %s after the kill (lease duration %s, its last horizon %s: bound %s)",
		takeover.Round(time.Millisecond), leaseDuration, horizon, limit)
	if takeover > limit {
		t.Errorf("takeover after SIGKILL took %s, more than the takeover bound for its last horizon (%s)", takeover, limit)
	}

	// SIGTERM: the worker releases its leases on the way out.
	termed := time.Now()
	taken = takenFrom(t, table, ids[1])
	_ = procs[1].cmd.Process.Signal(syscall.SIGTERM)
	testkit.WaitFor(t, "the stopped worker's shards taken over", 10*time.Second, taken)
	takeover = time.Since(termed)
	t.Logf("SIGTERM: shards taken over %s after the signal", takeover.Round(time.Millisecond))
	if takeover > 2*time.Second {
		t.Errorf("takeover after SIGTERM took %s, want within 2 s", takeover)
	}
	procs[1].stop(t)

	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "every record delivered", 2*time.Minute, func() bool { return uniqueData(allDeliveries(t, procs)) >= total })
	procs[2].stop(t)

	got := allDeliveries(t, procs)
	lineage, err := local.Lineage(ctx, kin, stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(lineage) != 8+2+1 {
		t.Fatalf("stream has %d shards, want 11 after a split and a merge", len(lineage))
	}
	if bad := verify.Failed(verify.Deliveries(got, perKey, lineage)); bad != "" {
		t.Fatal(bad)
	}
	checkExclusive(t, procs)
	// Only the batches in flight at the SIGKILL may repeat (batch size 10); a hand-over or a
	// graceful stop repeats nothing.
	t.Logf("%d deliveries of %d records", len(got), total)
	if repeats := len(got) - total; repeats > 10*inFlight {
		t.Errorf("%d records delivered twice; at most %d (one batch of each of the killed worker's %d shards) may be", repeats, 10*inFlight, inFlight)
	}
}

// leasesOwnedBy lists the unfinished leases a worker owns.
func leasesOwnedBy(t *testing.T, table, worker string) []string {
	t.Helper()
	var ids []string
	for _, l := range leasesOfTable(t, table) {
		if l.Owner == worker && !l.Finished() {
			ids = append(ids, l.ShardID)
		}
	}
	return ids
}

// TestProcessFrozenWorkerIsFenced is the third demand: a worker frozen with SIGSTOP past its
// leases' expiry and then resumed neither invokes nor moves a checkpoint for the shards another
// worker took meanwhile; it finds out at once, and later gets its share back cleanly.
func TestProcessFrozenWorkerIsFenced(t *testing.T) {
	const leaseDuration = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream, _ := newStream(t, "frozen", 4)
	table := uniqueName("frozen")
	dropTableAtEnd(t, table)
	dir := t.TempDir()
	ids := []string{"a", "b"}
	var procs []*esmProc
	for _, id := range ids {
		// Slow invocations, and a dump line when each starts: the freeze waits for one in flight.
		procs = append(procs, startESM(t, dir, id, stream, table, leaseDuration, "EXAMPLE_DELAY=300ms",
			"EXAMPLE_TRACE="+filepath.Join(dir, id+"-trace.jsonl"), "EXAMPLE_EVENT_DUMP="+filepath.Join(dir, id+"-events.jsonl")))
	}
	a, b := procs[0], procs[1]
	testkit.WaitFor(t, "two workers balanced on 4 shards", 30*time.Second, func() bool {
		o, n := ownersIfTable(t, table)
		return n == 4 && balanced(o, n, ids)
	})
	stopProducing := make(chan struct{})
	var written atomic.Int64
	prodErr := make(chan error, 1)
	var perKey map[string]int
	go func() {
		var err error
		perKey, err = produceSlowly(ctx, stream, 20, 20*time.Millisecond, stopProducing, &written)
		prodErr <- err
	}()
	testkit.WaitFor(t, "the worker to be frozen invoking", 30*time.Second, func() bool { return len(a.deliveries(t)) >= 20 })
	// An invocation started (its event dumped) and not yet returned (no trace line): freeze now.
	testkit.WaitFor(t, "an invocation of the worker to be frozen in flight", 30*time.Second, func() bool {
		return testkit.LineCount(t, filepath.Join(dir, "a-events.jsonl")) > testkit.LineCount(t, filepath.Join(dir, "a-trace.jsonl"))
	})

	frozeAt := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	aShards := leasesOwnedBy(t, table, "a") // frozen: nothing moves for a lease duration
	testkit.WaitFor(t, "the frozen worker's shards taken over", 20*time.Second, takenFrom(t, table, "a"))
	took := time.Since(frozeAt) // frozen past expiry: its leases are the other's now
	resumedAt := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("frozen for %s; its shards taken over %s after the freeze", resumedAt.Sub(frozeAt).Round(time.Millisecond), took.Round(time.Millisecond))

	// It learns it lost them, and then asks for its share back.
	testkit.WaitFor(t, "the resumed worker to notice", 10*time.Second, func() bool {
		for _, e := range a.events() {
			if e.msg == "lease lost" && e.at.After(resumedAt) {
				return true
			}
		}
		return false
	})
	testkit.WaitFor(t, "balanced again", 30*time.Second, func() bool { o, n := ownersNow(t, table); return balanced(o, n, ids) })
	close(stopProducing)
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	total := int(written.Load())
	testkit.WaitFor(t, "every record delivered", time.Minute, func() bool { return uniqueData(allDeliveries(t, procs)) >= total })
	a.stop(t)
	b.stop(t)

	checkExclusive(t, procs)
	// No checkpoint of the resumed worker for a shard between the other's take and its own
	// next take. The other's take-overs are its first takes of the frozen worker's shards after
	// the freeze (the table showed them all taken before the resume; a take's log line may be
	// stamped after the resume, so the resume does not bound them).
	takenByB := map[string]time.Time{}
	for _, e := range b.events() {
		if shard := e.attrs["shard_id"]; e.msg == "lease taken" && e.at.After(frozeAt) && slices.Contains(aShards, shard) && takenByB[shard].IsZero() {
			takenByB[shard] = e.at
		}
	}
	if len(takenByB) != len(aShards) {
		t.Fatalf("the other worker logged taking %d of the frozen worker's %d shards (%v), yet the table showed them all taken", len(takenByB), len(aShards), aShards)
	}
	// Where the other worker started each shard it took: a checkpoint the frozen worker had
	// sent before the freeze may land before the take and be logged only after the resume;
	// the take then read it.
	startedAt := map[string]string{}
	for _, e := range b.events() {
		if e.msg == "shard started" && e.at.After(frozeAt) && startedAt[e.attrs["shard_id"]] == "" {
			startedAt[e.attrs["shard_id"]] = e.attrs["position"]
		}
	}
	retaken := map[string]time.Time{}
	for _, e := range a.events() {
		shard := e.attrs["shard_id"]
		if _, ok := takenByB[shard]; !ok || !e.at.After(resumedAt) {
			continue
		}
		if e.msg == "lease taken" && retaken[shard].IsZero() {
			retaken[shard] = e.at
		}
		if e.msg == "checkpoint written" && retaken[shard].IsZero() && startedAt[shard] != "after "+e.attrs["checkpoint"] {
			t.Errorf("the resumed worker moved the checkpoint of %s (now the other's) at %s", shard, e.at.Format(time.RFC3339Nano))
		}
	}
	inFlight := 0
	for _, tr := range readTraces(t, filepath.Join(dir, "a-trace.jsonl")) {
		if tr.Start < frozeAt.UnixNano() && tr.End > frozeAt.UnixNano() {
			inFlight++
		}
	}
	if inFlight == 0 {
		t.Fatal("no invocation of the frozen worker was in flight at the freeze: the fencing of its checkpoint went untested")
	}
	t.Logf("invocations in flight at the freeze: %d (they completed after the resume; their checkpoints were fenced)", inFlight)

	got := allDeliveries(t, procs)
	lineage, err := local.Lineage(ctx, kin, stream)
	if err != nil {
		t.Fatal(err)
	}
	if bad := verify.Failed(verify.Deliveries(got, perKey, lineage)); bad != "" {
		t.Fatal(bad)
	}
}

func readTraces(t *testing.T, path string) []example.Trace {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []example.Trace
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var tr example.Trace
		if err := json.Unmarshal([]byte(line), &tr); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, tr)
	}
	return out
}

// TestProcessesBalance is the fourth demand: four workers started one after another on a
// 16-shard stream own four shards each within 30 s of the last start, and release every lease
// when they stop.
func TestProcessesBalance(t *testing.T) {
	stream, _ := newStream(t, "balance", 16)
	table := uniqueName("balance")
	dropTableAtEnd(t, table)
	dir := t.TempDir()
	var procs []*esmProc
	var ids []string
	var lastStart time.Time
	for i := range 4 {
		id := fmt.Sprintf("w%d", i)
		ids = append(ids, id)
		procs = append(procs, startESM(t, dir, id, stream, table, DefaultLeaseDuration))
		lastStart = time.Now()
		if i < 3 {
			testkit.WaitFor(t, id+" to own leases", 30*time.Second, func() bool { o, _ := ownersIfTable(t, table); return o[id] > 0 })
		}
	}
	testkit.WaitFor(t, "4 × 4 of 16 shards", 30*time.Second, func() bool {
		o, n := ownersIfTable(t, table)
		return n == 16 && o["w0"] == 4 && o["w1"] == 4 && o["w2"] == 4 && o["w3"] == 4
	})
	t.Logf("balanced %s after the last worker started", time.Since(lastStart).Round(time.Millisecond))
	handedOver := 0
	for _, p := range procs { // a lease handed over is logged without the taker as its previous owner
		for _, e := range p.events() {
			if e.msg == "lease taken" && e.attrs["reason"] == "handed over" {
				handedOver++
				if e.attrs["previous_owner"] == p.id {
					t.Errorf("%s logged a lease handed over to it with itself as previous_owner: %v", p.id, e.attrs)
				}
			}
		}
	}
	if handedOver == 0 {
		t.Error("no lease was handed over while the workers balanced")
	}
	// esm status reads the shared table while the workers run: every shard with its owner.
	st := exec.Command(esmBinary(t), "status", "--stream", stream, "--lease-table", table, "--json")
	st.Dir, st.Env = dir, processEnv()
	out, err := st.Output()
	if err != nil {
		t.Fatalf("esm status --lease-table: %v", err)
	}
	var rep struct {
		Shards []struct {
			ShardID string `json:"shardId"`
			Owner   string `json:"owner"`
		} `json:"shards"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, out)
	}
	perOwner := map[string]int{}
	for _, sh := range rep.Shards {
		perOwner[sh.Owner]++
	}
	if len(rep.Shards) != 16 || perOwner["w0"]+perOwner["w1"]+perOwner["w2"]+perOwner["w3"] != 16 {
		t.Fatalf("esm status shows owners %v for %d shards", perOwner, len(rep.Shards))
	}
	for _, p := range procs {
		p.stop(t)
	}
	for _, l := range leasesOfTable(t, table) {
		if l.Owner != "" || l.PendingOwner != "" {
			t.Errorf("after every worker stopped: %+v", l)
		}
	}
}
