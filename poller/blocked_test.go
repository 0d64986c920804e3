package poller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

const shard0 = "shardId-000000000000"

// TestBlockedShardReported: a poison record retried forever blocks its shard. While it has failed
// for less than WithBlockedAfter by the poller's clock it is not reported, however often it was
// retried; once the clock passed the threshold the shard is reported blocked (the observer and a
// warning naming the shard and the function's error), and unblocked once the record goes through.
func TestBlockedShardReported(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 2, func(i int) string { return []string{"poison", "ok"}[i] })
	var healed atomic.Bool
	h := &scripted{decide: func(_ int, e events.KinesisEvent) (json.RawMessage, error) {
		if string(e.Records[0].Kinesis.Data) == "poison" && !healed.Load() {
			return nil, errors.New("cannot parse poison")
		}
		return nil, nil
	}}
	c := &clock{}
	c.set(time.Now())
	obs := &counting{states: map[string]string{}}
	var logs testkit.SyncBuffer
	fh := startFailureHarness(t, Config{BatchSize: 1}, f, arn, h, WithClock(c.now), WithObserver(obs),
		WithBlockedAfter(time.Minute), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))

	testkit.WaitFor(t, "the poison record retried", 5*time.Second, func() bool { return len(h.invocations()) >= 5 })
	if got := obs.blockedCalls(); len(got) != 0 || strings.Contains(logs.String(), "shard blocked") {
		t.Fatalf("reported blocked before the threshold passed: %q\n%s", got, logs.String())
	}
	c.advance(61 * time.Second)
	testkit.WaitFor(t, "the shard reported blocked", 5*time.Second, func() bool { return len(obs.blockedCalls()) == 1 })
	if got := obs.blockedCalls(); got[0] != shard0+" true" {
		t.Fatalf("ShardBlocked calls %q", got)
	}
	line := logLine(logs.String(), "shard blocked")
	for _, want := range []string{"level=WARN", "shard_id=" + shard0, "cannot parse poison", "cause=\"function error: "} {
		if !strings.Contains(line, want) {
			t.Errorf("blocked log line %q lacks %q", line, want)
		}
	}
	healed.Store(true)
	waitCheckpoint(t, fh.store, seqs[1])
	if err := fh.stop(); err != nil {
		t.Fatal(err)
	}
	if got := obs.blockedCalls(); !slices.Equal(got, []string{shard0 + " true", shard0 + " false"}) {
		t.Fatalf("ShardBlocked calls %q, want blocked then unblocked once", got)
	}
}

// TestBlockedOnDestination: a shard waiting on an unreachable on-failure destination is blocked
// too, and the cause says so.
func TestBlockedOnDestination(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 1, func(int) string { return "poison" })
	h := &scripted{decide: func(int, events.KinesisEvent) (json.RawMessage, error) { return nil, errors.New("poison") }}
	dest := &memDest{}
	dest.down.Store(true)
	c := &clock{}
	c.set(time.Now())
	obs := &counting{states: map[string]string{}}
	var logs testkit.SyncBuffer
	fh := startFailureHarness(t, Config{MaximumRetryAttempts: intp(0)}, f, arn, h, WithDestination(dest), WithClock(c.now),
		WithObserver(obs), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	testkit.WaitFor(t, "deliveries tried", 5*time.Second, func() bool { return dest.attempts.Load() >= 3 })
	if got := obs.blockedCalls(); len(got) != 0 {
		t.Fatalf("reported blocked before the threshold passed: %q", got)
	}
	c.advance(DefaultBlockedAfter)
	testkit.WaitFor(t, "the shard reported blocked", 5*time.Second, func() bool { return len(obs.blockedCalls()) == 1 })
	if line := logLine(logs.String(), "shard blocked"); !strings.Contains(line, "on-failure destination unreachable: destination unreachable") {
		t.Fatalf("blocked log line %q does not name the destination", line)
	}
	dest.down.Store(false)
	waitCheckpoint(t, fh.store, seqs[0])
	testkit.WaitFor(t, "the shard reported unblocked", 5*time.Second, func() bool { return len(obs.blockedCalls()) == 2 })
	if got := obs.blockedCalls(); got[1] != shard0+" false" {
		t.Fatalf("ShardBlocked calls %q", got)
	}
}

// logLine is the first line of logs containing msg, or "".
func logLine(logs, msg string) string {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, msg) {
			return line
		}
	}
	return ""
}

// TestIgnoredBatchItemFailures: without ReportBatchItemFailures, a response listing
// batchItemFailures is ignored, as Lambda ignores it (the checkpoint moves on), counted each time
// and logged once for the mapping; an empty list is not counted.
func TestIgnoredBatchItemFailures(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 2)
	var seqs []string
	for i, data := range []string{"fail", "fail", "empty", "fail"} {
		seq := f.PutToShard("s", []string{shard0, "shardId-000000000001"}[i%2], "k", []byte(data))
		seqs = append(seqs, seq)
	}
	h := &scripted{decide: func(_ int, e events.KinesisEvent) (json.RawMessage, error) {
		r := e.Records[0].Kinesis
		if string(r.Data) == "empty" {
			return json.RawMessage(`{"batchItemFailures":[]}`), nil
		}
		return json.RawMessage(`{"batchItemFailures":[{"itemIdentifier":"` + r.SequenceNumber + `"}]}`), nil
	}}
	obs := &counting{states: map[string]string{}}
	var logs testkit.SyncBuffer
	fh := startFailureHarness(t, Config{BatchSize: 1}, f, arn, h, WithObserver(obs), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	testkit.WaitFor(t, "every record handled", 5*time.Second, func() bool {
		pr, _ := fh.store.Load(context.Background())
		return pr[shard0].Checkpoint == seqs[2] && pr["shardId-000000000001"].Checkpoint == seqs[3]
	})
	if err := fh.stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(h.invocations()); n != 4 {
		t.Fatalf("%d invocations, want 4 (the ignored failures are not retried)", n)
	}
	if c := obs.snapshot(); c.ignored != 3 || c.failed != 0 {
		t.Fatalf("%d ignored responses counted, %d failed records; want 3 and 0", c.ignored, c.failed)
	}
	if n := strings.Count(logs.String(), "lacks ReportBatchItemFailures"); n != 1 {
		t.Fatalf("warned %d times, want once for the mapping:\n%s", n, logs.String())
	}
}

func TestListsItemFailures(t *testing.T) {
	for body, want := range map[string]bool{
		`{"batchItemFailures":[{"itemIdentifier":"1"}]}`: true,
		`{"batchItemFailures":[{}]}`:                     true,
		`{"batchItemFailures":[]}`:                       false,
		`{"batchItemFailures":null}`:                     false,
		`{"batchItemFailures":"1"}`:                      false,
		`[{"batchItemFailures":[1]}]`:                    false,
		`"batchItemFailures"`:                            false,
		`{"state":{"a":"1"}}`:                            false,
		``:                                               false,
	} {
		if got := listsItemFailures([]byte(body)); got != want {
			t.Errorf("listsItemFailures(%s) = %v, want %v", body, got, want)
		}
	}
}

// details records what a DetailObserver is told.
type details struct {
	counting
	mu          sync.Mutex
	parents     map[string][]string
	checkpoints map[string]string
	failing     []string // "shard first..last cause", "" when cleared
}

func (d *details) ShardLineage(id string, parents []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.parents[id] = parents
}

func (d *details) Checkpointed(id, seq string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.checkpoints[id] = seq
}

func (d *details) BatchFailing(id string, f BatchFailure) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f == (BatchFailure{}) {
		d.failing = append(d.failing, "")
		return
	}
	timed := !f.Since.IsZero() && !f.FailedAt.Before(f.Since)
	d.failing = append(d.failing, fmt.Sprintf("%s %s..%s attempts=%d timed=%t blocked=%t %s", id, f.First, f.Last, f.Attempts, timed, f.Blocked, f.Cause))
}

func (d *details) snapshotDetails() (map[string][]string, map[string]string, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.parents), maps.Clone(d.checkpoints), slices.Clone(d.failing)
}

// TestDetailObserver: a DetailObserver learns the lineage (a split's children with their
// parent), every checkpoint, and each failing batch with its cause, cleared once it is done.
func TestDetailObserver(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 2, func(i int) string { return []string{"poison", "ok"}[i] })
	kids := f.Split("s", shard0)
	h := &scripted{decide: func(n int, e events.KinesisEvent) (json.RawMessage, error) {
		if string(e.Records[0].Kinesis.Data) == "poison" && n == 1 {
			return nil, errors.New("first try fails")
		}
		return nil, nil
	}}
	d := &details{counting: counting{states: map[string]string{}}, parents: map[string][]string{}, checkpoints: map[string]string{}}
	startFailureHarness(t, Config{BatchSize: 1}, f, arn, h, WithObserver(d))
	testkit.WaitFor(t, "the children known and the parent checkpointed", 5*time.Second, func() bool {
		parents, cps, _ := d.snapshotDetails()
		return cps[shard0] == seqs[1] && len(parents[kids[0]]) == 1 && len(parents[kids[1]]) == 1
	})
	parents, _, failing := d.snapshotDetails()
	if parents[kids[0]][0] != shard0 || parents[kids[1]][0] != shard0 || len(parents[shard0]) != 0 {
		t.Fatalf("lineage %v", parents)
	}
	want := []string{shard0 + " " + seqs[0] + ".." + seqs[0] + ` attempts=1 timed=true blocked=false function error: {"errorMessage":"first try fails","errorType":"errorString"}`, ""}
	if !slices.Equal(failing, want) {
		t.Fatalf("failing batches %q, want %q", failing, want)
	}
}

// hangingInvoker's invocations wait for release (or their context), then succeed; started
// receives each one's start.
type hangingInvoker struct {
	started chan time.Time
	release chan struct{}
}

func (h *hangingInvoker) Invoke(ctx context.Context, _ []byte) (invoke.Response, error) {
	h.started <- time.Now()
	select {
	case <-h.release:
		return invoke.Response{StatusCode: 200}, nil
	case <-ctx.Done():
		return invoke.Response{}, ctx.Err()
	}
}

// TestBlockedWhileOneInvocationHangs (issue 40): one invocation that does not return blocks its
// shard, which is reported blocked when WithBlockedAfter has passed since it was sent (on the
// clock, not when the invocation ends), with a cause that says so, to the log and to a
// DetailObserver; once it returns, the shard is reported unblocked.
func TestBlockedWhileOneInvocationHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 15 * time.Second
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		_, seq := f.Put("s", "k", []byte("x"))
		inv := &hangingInvoker{started: make(chan time.Time, 1), release: make(chan struct{})}
		obs := &details{counting: counting{states: map[string]string{}}, parents: map[string][]string{}, checkpoints: map[string]string{}}
		var logs testkit.SyncBuffer
		store := NewMemoryStore()
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, ShardSyncInterval: time.Hour}, store, inv,
			WithObserver(obs), WithBlockedAfter(after), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		sent := <-inv.started
		time.Sleep(after - time.Millisecond)
		synctest.Wait()
		if got := obs.blockedCalls(); len(got) != 0 {
			t.Fatalf("reported blocked %s after the invocation was sent, before the threshold (%s): %q", time.Since(sent), after, got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := obs.blockedCalls(); !slices.Equal(got, []string{shard0 + " true"}) {
			t.Fatalf("ShardBlocked calls %q at %s after the hanging invocation was sent, want blocked within %s + 1 s", got, time.Since(sent), after)
		}
		if line := logLine(logs.String(), "shard blocked"); !strings.Contains(line, "an invocation has not returned") {
			t.Fatalf("blocked log line %q does not say the invocation has not returned", line)
		}
		if _, _, failing := obs.snapshotDetails(); len(failing) != 1 || !strings.HasSuffix(failing[0], "attempts=0 timed=false blocked=true an invocation has not returned") {
			t.Fatalf("a DetailObserver was told %q, want the hanging batch, blocked", failing)
		}
		close(inv.release)
		waitCheckpoint(t, store, seq)
		synctest.Wait()
		if got := obs.blockedCalls(); !slices.Equal(got, []string{shard0 + " true", shard0 + " false"}) {
			t.Fatalf("ShardBlocked calls %q after the invocation returned", got)
		}
		if _, _, failing := obs.snapshotDetails(); len(failing) != 2 || failing[1] != "" {
			t.Fatalf("a DetailObserver was told %q, want the hanging batch, then none", failing)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestBlockedShardStoppedIsNoRecovery (issue 40): a shard blocked on a batch that never went
// through is reported no longer blocked here when its reader stops (the gauge must not stay
// set on a worker that no longer reads it), but the log does not claim it recovered.
func TestBlockedShardStoppedIsNoRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fakekinesis.New()
		arn := f.CreateStream("s", 1)
		f.Put("s", "k", []byte("poison"))
		obs := &counting{states: map[string]string{}}
		var logs testkit.SyncBuffer
		p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, ShardSyncInterval: time.Hour}, NewMemoryStore(),
			inprocess.New(func() error { return errors.New("poison") }),
			WithObserver(obs), WithBlockedAfter(5*time.Second), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		cancel, done := runPoller(t, p)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := obs.blockedCalls(); !slices.Equal(got, []string{shard0 + " true"}) {
			t.Fatalf("ShardBlocked calls %q, want blocked", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := obs.blockedCalls(); !slices.Equal(got, []string{shard0 + " true", shard0 + " false"}) {
			t.Fatalf("ShardBlocked calls %q after the stop, want blocked, then not (no longer read here)", got)
		}
		if strings.Contains(logs.String(), "shard no longer blocked") || !strings.Contains(logs.String(), "shard still blocked when its reader stopped") {
			t.Fatalf("the stop of a blocked shard was logged as a recovery:\n%s", logs.String())
		}
	})
}
