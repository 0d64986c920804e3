package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/poller"
)

// fakeClock is a monotonic clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logBuffer collects a test's log lines and prints them if the test fails.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testLogger(t testing.TB) (*slog.Logger, *logBuffer) {
	t.Helper()
	buf := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// newWorker is a Dynamo with a fixed random source, no pause between hand-over requests and, when
// clock is set, a fake clock.
func newWorker(t *testing.T, table, id string, clock *fakeClock, opts ...DynamoOption) *Dynamo {
	t.Helper()
	log, _ := testLogger(t)
	base := []DynamoOption{withRand(rand.New(rand.NewPCG(1, uint64(len(id))))), withRequestJitter(0), WithLogger(log)}
	if clock != nil {
		base = append(base, WithClock(clock.Now))
	}
	d, err := NewDynamo(ddb, table, id, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func shardIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("shardId-%012d", i)
	}
	return out
}

func infos(ids []string) []poller.ShardInfo {
	out := make([]poller.ShardInfo, len(ids))
	for i, id := range ids {
		out[i] = poller.ShardInfo{ShardID: id, Initial: poller.ShardProgress{Start: poller.TrimHorizon}}
	}
	return out
}

func leasesOf(t testing.TB, table string) map[string]Lease {
	t.Helper()
	ls, err := ListLeases(context.Background(), ddb, table)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Lease{}
	for _, l := range ls {
		out[l.ShardID] = l
	}
	return out
}

func rawItem(t *testing.T, table, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := ddb.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, Key: key(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func claim(t *testing.T, d *Dynamo, candidates []string) []string {
	t.Helper()
	held, err := d.Claim(context.Background(), candidates)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(held)
	return held
}

func owners(ls map[string]Lease) map[string]int {
	out := map[string]int{}
	for _, l := range ls {
		if l.Owner != "" {
			out[l.Owner]++
		}
	}
	return out
}

func TestEnsureTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	missing := uniqueName("missing")
	err := EnsureTable(ctx, ddb, missing, false)
	if !errors.Is(err, ErrTableNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("check of a missing table: %v, want ErrTableNotFound naming it", err)
	}

	created := uniqueName("created")
	if err := EnsureTable(ctx, ddb, created, true); err != nil {
		t.Fatal(err)
	}
	dropTableAtEnd(t, created)
	out, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &created})
	if err != nil {
		t.Fatal(err)
	}
	if bm := out.Table.BillingModeSummary; bm == nil || bm.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing mode %+v, want PAY_PER_REQUEST", bm)
	}
	if err := EnsureTable(ctx, ddb, created, false); err != nil {
		t.Fatalf("check of the created table: %v", err)
	}
	if err := EnsureTable(ctx, ddb, created, true); err != nil {
		t.Fatalf("second create: %v", err)
	}

	for name, schema := range map[string]struct {
		keys  []types.KeySchemaElement
		attrs []types.AttributeDefinition
	}{
		"other-hash": {
			[]types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			[]types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		},
		"numeric": {
			[]types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
			[]types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeN}},
		},
		"sort-key": {
			[]types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
			[]types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}, {AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			table := uniqueName(name)
			if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: &table, KeySchema: schema.keys,
				AttributeDefinitions: schema.attrs, BillingMode: types.BillingModePayPerRequest}); err != nil {
				t.Fatal(err)
			}
			dropTableAtEnd(t, table)
			for _, create := range []bool{false, true} {
				err := EnsureTable(ctx, ddb, table, create)
				if !errors.Is(err, ErrTableSchema) || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), "leaseKey") {
					t.Fatalf("create=%v: %v, want ErrTableSchema naming the table and the key", create, err)
				}
			}
		})
	}
}

func TestNewDynamoRejectsBadArguments(t *testing.T) {
	for name, call := range map[string]func() (*Dynamo, error){
		"no client":      func() (*Dynamo, error) { return NewDynamo(nil, "t", "w") },
		"no table":       func() (*Dynamo, error) { return NewDynamo(ddb, "", "w") },
		"no worker":      func() (*Dynamo, error) { return NewDynamo(ddb, "t", "") },
		"zero duration":  func() (*Dynamo, error) { return NewDynamo(ddb, "t", "w", WithLeaseDuration(0)) },
		"negative moves": func() (*Dynamo, error) { return NewDynamo(ddb, "t", "w", WithMaxMovesPerCycle(-1)) },
	} {
		if _, err := call(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestRegisterRace registers the same shards from 20 workers at once: one lease each, created
// once, with parents, children and hash range.
func TestRegisterRace(t *testing.T) {
	table := newTable(t)
	shards := []poller.ShardInfo{
		{ShardID: "shardId-000000000000", StartingHashKey: "0", EndingHashKey: "99", Initial: poller.ShardProgress{Start: poller.Latest}},
		{ShardID: "shardId-000000000001", StartingHashKey: "100", EndingHashKey: "199", Initial: poller.ShardProgress{Start: poller.Latest}},
		{ShardID: "shardId-000000000002", Parents: []string{"shardId-000000000000"}, StartingHashKey: "0", EndingHashKey: "49"},
		{ShardID: "shardId-000000000003", Parents: []string{"shardId-000000000000"}, StartingHashKey: "50", EndingHashKey: "99"},
		{ShardID: "shardId-000000000004", Parents: []string{"shardId-000000000003", "shardId-000000000001"}, StartingHashKey: "50", EndingHashKey: "199"},
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		d := newWorker(t, table, fmt.Sprintf("w%d", i), nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- d.Register(context.Background(), shards)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// A later register, as the periodic sync does, finds the children it must record.
	if err := newWorker(t, table, "late", nil).Register(context.Background(), shards); err != nil {
		t.Fatal(err)
	}
	ls := leasesOf(t, table)
	if len(ls) != len(shards) {
		t.Fatalf("%d leases for %d shards", len(ls), len(shards))
	}
	wantChildren := map[string][]string{
		"shardId-000000000000": {"shardId-000000000002", "shardId-000000000003"},
		"shardId-000000000001": {"shardId-000000000004"},
		"shardId-000000000003": {"shardId-000000000004"},
	}
	for _, si := range shards {
		l := ls[si.ShardID]
		want := si.Parents
		slices.Sort(want)
		if l.Owner != "" || l.Counter != 0 || !slices.Equal(l.Parents, want) || !slices.Equal(l.Children, wantChildren[si.ShardID]) ||
			l.StartingHashKey != si.StartingHashKey || l.EndingHashKey != si.EndingHashKey || l.Progress.Start != si.Initial.Start {
			t.Errorf("lease %+v, registered as %+v, children %v", l, si, wantChildren[si.ShardID])
		}
	}
	if _, ok := rawItem(t, table, "shardId-000000000000")[attrParents]; ok {
		t.Error("a shard without parents has a parentShardId attribute")
	}
}

// TestRegisterLeavesExistingLeases: registering a shard whose lease exists changes nothing but
// adds the parents and hash range it lacked.
func TestRegisterLeavesExistingLeases(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	w := newWorker(t, table, "w", nil)
	id := "shardId-000000000007"
	if err := w.Register(ctx, []poller.ShardInfo{{ShardID: id, Initial: poller.ShardProgress{Start: poller.Latest}}}); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, w, []string{id}); len(got) != 1 {
		t.Fatalf("claimed %v", got)
	}
	if err := w.Save(ctx, map[string]poller.ShardProgress{id: {Checkpoint: "42", Start: poller.Latest}}); err != nil {
		t.Fatal(err)
	}
	before := leasesOf(t, table)[id]
	other := newWorker(t, table, "other", nil)
	if err := other.Register(ctx, []poller.ShardInfo{{ShardID: id, Parents: []string{"shardId-000000000001"}, StartingHashKey: "5", EndingHashKey: "9",
		Initial: poller.ShardProgress{Start: poller.TrimHorizon}}}); err != nil {
		t.Fatal(err)
	}
	after := leasesOf(t, table)[id]
	if after.Owner != "w" || after.Counter != before.Counter || after.Progress.Checkpoint != "42" || after.Progress.Start != poller.Latest {
		t.Fatalf("register changed the lease: %+v → %+v", before, after)
	}
	if !slices.Equal(after.Parents, []string{"shardId-000000000001"}) || after.StartingHashKey != "5" || after.EndingHashKey != "9" {
		t.Fatalf("parents and hash range not added: %+v", after)
	}
	if !w.Held(id) {
		t.Fatal("the owner lost the lease to a register")
	}
}

// TestProgressRoundTrip saves every shape of ShardProgress, through Register and through Save,
// and loads it back unchanged, with KCL's checkpoint attribute.
func TestProgressRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	cases := []struct {
		pr         poller.ShardProgress
		checkpoint string
	}{
		{poller.ShardProgress{}, "TRIM_HORIZON"},
		{poller.ShardProgress{Start: poller.TrimHorizon, UpdatedAt: at}, "TRIM_HORIZON"},
		{poller.ShardProgress{Start: poller.Latest, UpdatedAt: at}, "LATEST"},
		{poller.ShardProgress{Start: poller.Latest, StartTimestamp: at.Truncate(time.Millisecond), UpdatedAt: at}, "LATEST"},
		{poller.ShardProgress{Start: poller.AtTimestamp, UpdatedAt: at}, "AT_TIMESTAMP"},
		{poller.ShardProgress{Checkpoint: "49590338271490256608559692538361571095921575989136588898", UpdatedAt: at}, "49590338271490256608559692538361571095921575989136588898"},
		{poller.ShardProgress{Checkpoint: "17", Start: poller.Latest, UpdatedAt: at}, "17"},
		{poller.ShardProgress{Finished: true, UpdatedAt: at}, "SHARD_END"},
		{poller.ShardProgress{Finished: true, Checkpoint: "9", UpdatedAt: at}, "SHARD_END"},
		{poller.ShardProgress{Finished: true, Checkpoint: "9", Start: poller.AtTimestamp, UpdatedAt: at}, "SHARD_END"},
		{poller.ShardProgress{Checkpoint: "21", UpdatedAt: at, Window: &poller.WindowState{Start: at.Truncate(time.Minute), State: map[string]string{"sum": "42", "n": "3"}}}, "21"},
		{poller.ShardProgress{Start: poller.Latest, UpdatedAt: at, Window: &poller.WindowState{Start: at.Truncate(time.Minute)}}, "LATEST"},
	}
	table := newTable(t)
	ctx := context.Background()
	w := newWorker(t, table, "w", nil)
	var regs []poller.ShardInfo
	var ids []string
	for i, c := range cases {
		regs = append(regs, poller.ShardInfo{ShardID: fmt.Sprintf("reg-%d", i), Initial: c.pr})
		ids = append(ids, fmt.Sprintf("save-%d", i))
	}
	if err := w.Register(ctx, append(regs, infos(ids)...)); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, w, ids); len(got) != len(ids) {
		t.Fatalf("claimed %v", got)
	}
	// Save each shape twice, from a different one first, so that every attribute is both set
	// and removed.
	for i, c := range cases {
		prev := cases[(i+1)%len(cases)].pr
		if err := w.Save(ctx, map[string]poller.ShardProgress{ids[i]: prev}); err != nil {
			t.Fatal(err)
		}
		if err := w.Save(ctx, map[string]poller.ShardProgress{ids[i]: c.pr}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := w.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b poller.ShardProgress) bool {
		sameWindow := a.Window == nil && b.Window == nil ||
			a.Window != nil && b.Window != nil && a.Window.Start.Equal(b.Window.Start) && maps.Equal(a.Window.State, b.Window.State)
		return a.Checkpoint == b.Checkpoint && a.Finished == b.Finished && a.Start == b.Start && a.UpdatedAt.Equal(b.UpdatedAt) && sameWindow
	}
	for i, c := range cases {
		for _, id := range []string{regs[i].ShardID, ids[i]} {
			if !same(got[id], c.pr) {
				t.Errorf("%s: loaded %+v, want %+v", id, got[id], c.pr)
			}
			if cp := rawItem(t, table, id)[attrCheckpoint].(*types.AttributeValueMemberS).Value; cp != c.checkpoint {
				t.Errorf("%s: checkpoint attribute %q, want %q", id, cp, c.checkpoint)
			}
		}
		raw := rawItem(t, table, ids[i])
		if n := raw[attrOwnerSwitches].(*types.AttributeValueMemberN).Value; n != "0" {
			t.Errorf("%s: ownerSwitchesSinceCheckpoint %s after a checkpoint", ids[i], n)
		}
		if n := raw[attrSubSequence].(*types.AttributeValueMemberN).Value; n != "0" {
			t.Errorf("%s: checkpointSubSequenceNumber %s", ids[i], n)
		}
	}
}

// TestProgressOfKCLItems reads the start of a lease KCL wrote (no startingPosition) from its
// checkpoint sentinel.
func TestProgressOfKCLItems(t *testing.T) {
	for _, c := range []struct {
		checkpoint string
		want       poller.ShardProgress
	}{
		{"TRIM_HORIZON", poller.ShardProgress{}},
		{"LATEST", poller.ShardProgress{Start: poller.Latest}},
		{"AT_TIMESTAMP", poller.ShardProgress{Start: poller.AtTimestamp}},
		{"SHARD_END", poller.ShardProgress{Finished: true}},
		{"123", poller.ShardProgress{Checkpoint: "123"}},
	} {
		if got := progressOf(c.checkpoint, "", "", time.Time{}); got != c.want {
			t.Errorf("checkpoint %s: %+v, want %+v", c.checkpoint, got, c.want)
		}
	}
}

// TestTakeRenewExpiry follows two leases through take, renewal and expiry on a fake clock, and
// checks that the worker that lost them is fenced off.
func TestTakeRenewExpiry(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	clock := newFakeClock()
	ids := shardIDs(2)
	w1 := newWorker(t, table, "w1", clock, WithMaxMovesPerCycle(0))
	w2 := newWorker(t, table, "w2", clock, WithMaxMovesPerCycle(0))
	if err := w1.Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, w1, ids); !slices.Equal(got, ids) {
		t.Fatalf("w1 claimed %v of unowned leases, want all", got)
	}
	for _, l := range leasesOf(t, table) {
		if l.Owner != "w1" || l.Counter != 1 {
			t.Fatalf("after take: %+v", l)
		}
	}
	if got := claim(t, w2, ids); len(got) != 0 {
		t.Fatalf("w2 took %v of live leases", got)
	}

	// Held lasts LeaseDuration − LeaseDuration/5 after the last write was sent.
	clock.Advance(8*time.Second - time.Millisecond)
	if !w1.Held(ids[0]) {
		t.Fatal("Held false before the safety limit")
	}
	clock.Advance(time.Millisecond)
	if w1.Held(ids[0]) {
		t.Fatal("Held true at the safety limit")
	}
	w1.renewAll(ctx) // late, but nobody took the leases: the renewal succeeds
	if !w1.Held(ids[0]) || !w1.Held(ids[1]) {
		t.Fatal("Held false after a renewal")
	}
	for _, l := range leasesOf(t, table) {
		if l.Counter != 2 {
			t.Fatalf("after renewal: %+v", l)
		}
	}
	w1.renewAll(ctx) // just renewed: no write
	if c := leasesOf(t, table)[ids[0]].Counter; c != 2 {
		t.Fatalf("a renewal right after another wrote: counter %d", c)
	}

	// w2 saw counter 1 at t0 and counter 2 now: expiry counts from now.
	if got := claim(t, w2, ids); len(got) != 0 {
		t.Fatalf("w2 took %v", got)
	}
	clock.Advance(10*time.Second - time.Millisecond)
	if got := claim(t, w2, ids); len(got) != 0 {
		t.Fatalf("w2 took %v before expiry", got)
	}
	clock.Advance(time.Millisecond)
	if w1.Held(ids[0]) {
		t.Fatal("w1 still holds a lease it did not renew for a lease duration")
	}
	if got := claim(t, w2, ids); !slices.Equal(got, ids) {
		t.Fatalf("w2 claimed %v of expired leases, want all", got)
	}
	for _, l := range leasesOf(t, table) {
		if l.Owner != "w2" || l.Counter != 3 || l.OwnerSwitchesSinceCheckpoint != 1 {
			t.Fatalf("after takeover: %+v", l)
		}
	}

	// w1 is fenced: its checkpoint fails with ErrLeaseLost and changes nothing.
	err := w1.Save(ctx, map[string]poller.ShardProgress{ids[0]: {Checkpoint: "99"}})
	if !errors.Is(err, poller.ErrLeaseLost) {
		t.Fatalf("fenced save: %v, want ErrLeaseLost", err)
	}
	if w1.Held(ids[0]) {
		t.Fatal("Held true after a fenced save")
	}
	w1.renewAll(ctx)
	if w1.Held(ids[1]) {
		t.Fatal("Held true after a fenced renewal")
	}
	l := leasesOf(t, table)[ids[0]]
	if l.Owner != "w2" || l.Progress.Checkpoint != "" || l.Counter != 3 {
		t.Fatalf("the fenced worker changed the lease: %+v", l)
	}
	if got := claim(t, w1, ids); len(got) != 0 {
		t.Fatalf("w1 claims %v of w2's leases", got)
	}
	if err := w1.Release(ctx, ids[0]); err != nil {
		t.Fatalf("release of a lost lease: %v", err)
	}
	if l := leasesOf(t, table)[ids[0]]; l.Owner != "w2" || l.Counter != 3 {
		t.Fatalf("release of a lost lease changed it: %+v", l)
	}
	// w2's checkpoint goes through and resets the owner switches.
	if err := w2.Save(ctx, map[string]poller.ShardProgress{ids[0]: {Checkpoint: "100"}}); err != nil {
		t.Fatal(err)
	}
	if l := leasesOf(t, table)[ids[0]]; l.Progress.Checkpoint != "100" || l.OwnerSwitchesSinceCheckpoint != 0 || l.Counter != 4 {
		t.Fatalf("after w2's checkpoint: %+v", l)
	}
}

// TestFrozenWorkerIsFenced: a worker whose clock jumps past the lease duration (it was stopped)
// finds Held false at once, and once another worker took its lease its writes fail.
func TestFrozenWorkerIsFenced(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	c1, c2 := newFakeClock(), newFakeClock() // separate clocks: w1 is frozen, w2 lives on
	ids := shardIDs(1)
	w1 := newWorker(t, table, "w1", c1)
	w2 := newWorker(t, table, "w2", c2)
	if err := w1.Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	claim(t, w1, ids)
	claim(t, w2, ids) // w2 first sees the counter
	c2.Advance(10 * time.Second)
	if got := claim(t, w2, ids); !slices.Equal(got, ids) {
		t.Fatalf("w2 claimed %v", got)
	}
	c1.Advance(12 * time.Second) // w1 resumes
	if w1.Held(ids[0]) {
		t.Fatal("a resumed worker still believes it holds the lease")
	}
	if err := w1.Save(ctx, map[string]poller.ShardProgress{ids[0]: {Checkpoint: "5"}}); !errors.Is(err, poller.ErrLeaseLost) {
		t.Fatalf("save after resume: %v, want ErrLeaseLost", err)
	}
}

// TestCooperativeHandOver: a worker below its share asks the most loaded one for leases; the
// owner keeps each until its reader stopped and then gives it to the asker, who adopts it.
func TestCooperativeHandOver(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	clock := newFakeClock()
	ids := shardIDs(4)
	w1 := newWorker(t, table, "w1", clock)
	w2 := newWorker(t, table, "w2", clock)
	if err := w1.Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, w1, ids); len(got) != 4 {
		t.Fatalf("w1 claimed %v", got)
	}
	if got := claim(t, w2, ids); len(got) != 0 {
		t.Fatalf("w2 claimed %v at once", got)
	}
	var asked []string
	for id, l := range leasesOf(t, table) {
		if l.Owner != "w1" || l.Counter != 1 {
			t.Fatalf("the request moved the lease: %+v", l)
		}
		if l.PendingOwner == "w2" {
			asked = append(asked, id)
		}
	}
	slices.Sort(asked)
	if len(asked) != 2 {
		t.Fatalf("w2 asked for %v, want two leases (its share, within two moves)", asked)
	}
	// w2 counts the requests as its own: it asks for nothing more.
	claim(t, w2, ids)
	if n := len(pendingFor(t, table, "w2")); n != 2 {
		t.Fatalf("%d requests after a second claim", n)
	}

	// w1 leaves the asked shards out but still holds them: its batch in flight may checkpoint.
	got := claim(t, w1, ids)
	if want := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return slices.Contains(asked, id) }); !slices.Equal(got, want) {
		t.Fatalf("w1 claimed %v, want %v", got, want)
	}
	if !w1.Held(asked[0]) {
		t.Fatal("w1 dropped a lease before its reader stopped")
	}
	if err := w1.Save(ctx, map[string]poller.ShardProgress{asked[0]: {Checkpoint: "7"}}); err != nil {
		t.Fatalf("checkpoint during the hand-over: %v", err)
	}
	for _, id := range asked {
		if err := w1.Release(ctx, id); err != nil {
			t.Fatal(err)
		}
		if w1.Held(id) {
			t.Fatal("Held after release")
		}
	}
	for _, id := range asked {
		l := leasesOf(t, table)[id]
		if l.Owner != "" || l.PendingOwner != "w2" || l.OwnerSwitchesSinceCheckpoint != 1 {
			t.Fatalf("after the hand-over: %+v, want unowned and reserved for w2", l)
		}
	}
	if got := claim(t, w1, ids); len(got) != 2 || slices.Contains(got, asked[0]) || slices.Contains(got, asked[1]) {
		t.Fatalf("w1 claimed %v, taking back leases reserved for w2", got)
	}
	if got := claim(t, w2, ids); !slices.Equal(got, asked) {
		t.Fatalf("w2 claimed %v, want %v", got, asked)
	}
	if l := leasesOf(t, table)[asked[0]]; l.Progress.Checkpoint != "7" || l.Owner != "w2" || l.PendingOwner != "" {
		t.Fatalf("after w2 took the lease: %+v", l)
	}
	// Balanced: nobody asks for more.
	claim(t, w1, ids)
	claim(t, w2, ids)
	if o := owners(leasesOf(t, table)); o["w1"] != 2 || o["w2"] != 2 {
		t.Fatalf("owners %v", o)
	}
	if p := pendingFor(t, table, "w1"); len(p) != 0 {
		t.Fatalf("w1 asks for %v when balanced", p)
	}
}

func pendingFor(t *testing.T, table, worker string) []string {
	var out []string
	for id, l := range leasesOf(t, table) {
		if l.PendingOwner == worker {
			out = append(out, id)
		}
	}
	return out
}

// faultyAPI fails UpdateItem calls while fail is set, as an unreachable DynamoDB would.
type faultyAPI struct {
	DynamoAPI
	fail atomic.Bool
}

func (f *faultyAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if f.fail.Load() {
		return nil, errors.New("connection refused")
	}
	return f.DynamoAPI.UpdateItem(ctx, in, optFns...)
}

// TestHandOverAfterFailedRelease: when the release that ends a hand-over fails, the owner's next
// Claim hands the lease over itself (no reader will call Release again).
func TestHandOverAfterFailedRelease(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	ids := shardIDs(2)
	api := &faultyAPI{DynamoAPI: ddb}
	log, _ := testLogger(t)
	w1, err := NewDynamo(api, table, "w1", WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	w2 := newWorker(t, table, "w2", nil, WithMaxMovesPerCycle(1))
	if err := w1.Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	claim(t, w1, ids)
	claim(t, w2, ids)
	asked := pendingFor(t, table, "w2")
	if len(asked) != 1 {
		t.Fatalf("asked %v", asked)
	}
	if got := claim(t, w1, ids); slices.Contains(got, asked[0]) || len(got) != 1 {
		t.Fatalf("w1 claimed %v while %s is asked for", got, asked[0])
	}
	api.fail.Store(true)
	if err := w1.Release(ctx, asked[0]); err == nil {
		t.Fatal("release succeeded without DynamoDB")
	}
	api.fail.Store(false)
	if !w1.Held(asked[0]) {
		t.Fatal("a lease whose release failed is no longer held")
	}
	claim(t, w1, ids)
	if l := leasesOf(t, table)[asked[0]]; l.Owner != "" || l.PendingOwner != "w2" || w1.Held(asked[0]) {
		t.Fatalf("not handed over by the next claim: %+v", l)
	}
}

// TestReservationForDeadRequester: a lease handed over to a worker that never takes it is
// reserved for it for a lease duration, then free for anyone; the requester never counts as
// alive meanwhile.
func TestReservationForDeadRequester(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	clock := newFakeClock()
	ids := shardIDs(2)
	w1 := newWorker(t, table, "w1", clock)
	w2 := newWorker(t, table, "w2", clock)
	w3 := newWorker(t, table, "w3", clock, WithMaxMovesPerCycle(0))
	if err := w1.Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	claim(t, w1, ids)
	claim(t, w2, ids) // asks for one, then dies
	asked := pendingFor(t, table, "w2")
	claim(t, w1, ids)
	if err := w1.Release(ctx, asked[0]); err != nil {
		t.Fatal(err)
	}
	claim(t, w3, ids) // first sees the reservation
	clock.Advance(10*time.Second - time.Millisecond)
	w1.renewAll(ctx)
	if got := claim(t, w3, ids); len(got) != 0 {
		t.Fatalf("w3 took %v while it was reserved for w2", got)
	}
	clock.Advance(time.Millisecond)
	if got := claim(t, w3, ids); !slices.Equal(got, asked) {
		t.Fatalf("w3 claimed %v, want the expired reservation %v", got, asked)
	}
	if l := leasesOf(t, table)[asked[0]]; l.Owner != "w3" || l.PendingOwner != "" {
		t.Fatalf("%+v", l)
	}
}

// TestHandOverToSilentOwner: an owner that never answers a request loses the lease by expiry,
// and the taker clears the request.
func TestHandOverToSilentOwner(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	clock := newFakeClock()
	ids := shardIDs(2)
	w1 := newWorker(t, table, "w1", clock)
	w2 := newWorker(t, table, "w2", clock)
	if err := w1.Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	claim(t, w1, ids)
	claim(t, w2, ids)
	if len(pendingFor(t, table, "w2")) != 1 {
		t.Fatal("no hand-over requested")
	}
	clock.Advance(10 * time.Second) // w1 is gone
	if got := claim(t, w2, ids); !slices.Equal(got, ids) {
		t.Fatalf("w2 claimed %v", got)
	}
	for _, l := range leasesOf(t, table) {
		if l.Owner != "w2" || l.PendingOwner != "" {
			t.Fatalf("%+v", l)
		}
	}
}

// TestStuckReaderHandsOverByForce: an owner whose reader does not stop within three lease
// durations of a request hands the lease over anyway.
func TestStuckReaderHandsOverByForce(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	clock := newFakeClock()
	ids := shardIDs(2)
	w1 := newWorker(t, table, "w1", clock)
	w2 := newWorker(t, table, "w2", clock)
	if err := w1.Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	claim(t, w1, ids)
	claim(t, w2, ids)
	asked := pendingFor(t, table, "w2")
	claim(t, w1, ids) // notes the request
	for range 3 {
		clock.Advance(10 * time.Second)
		w1.renewAll(ctx)
		if len(asked) != 1 || leasesOf(t, table)[asked[0]].Owner != "w1" {
			t.Fatalf("asked %v; handed over before the deadline: %+v", asked, leasesOf(t, table))
		}
		claim(t, w1, ids)
	}
	if l := leasesOf(t, table)[asked[0]]; l.Owner != "" || l.PendingOwner != "w2" {
		t.Fatalf("not handed over after three lease durations: %+v", l)
	}
	if err := w1.Save(ctx, map[string]poller.ShardProgress{asked[0]: {Checkpoint: "1"}}); !errors.Is(err, poller.ErrLeaseLost) {
		t.Fatalf("the stuck reader's checkpoint: %v, want ErrLeaseLost", err)
	}
}

// TestReleaseOnShutdown: when Run's context ends, every lease still held is released; releasing
// again, or releasing a lease never held, does nothing.
func TestReleaseOnShutdown(t *testing.T) {
	table := newTable(t)
	ids := shardIDs(3)
	w := newWorker(t, table, "w", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	if err := w.Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	claim(t, w, ids)
	if err := w.Release(context.Background(), ids[0]); err != nil { // a reader stopped
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, l := range leasesOf(t, table) {
		if l.Owner != "" || l.Counter != 2 {
			t.Fatalf("after shutdown: %+v", l)
		}
	}
	for _, id := range ids {
		if err := w.Release(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Release(context.Background(), "shardId-999"); err != nil {
		t.Fatal(err)
	}
	if l := leasesOf(t, table)[ids[0]]; l.Counter != 2 {
		t.Fatalf("double release wrote: %+v", l)
	}
	if err := w.Run(context.Background()); err == nil {
		t.Fatal("second Run accepted")
	}
}

// TestStoppingWorkerWithdraws: a worker that stops takes back its hand-over requests, and
// releases the leases already handed to it, so that nobody waits for them to expire.
func TestStoppingWorkerWithdraws(t *testing.T) {
	table := newTable(t)
	ids := shardIDs(4)
	ctx := context.Background()
	w1 := newWorker(t, table, "w1", nil)
	w2 := newWorker(t, table, "w2", nil)
	if err := w1.Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	claim(t, w1, ids)
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w2.Run(run) }()
	claim(t, w2, ids)
	asked := pendingFor(t, table, "w2")
	if len(asked) != 2 {
		t.Fatalf("asked for %v", asked)
	}
	claim(t, w1, ids)                                 // notes the requests
	if err := w1.Release(ctx, asked[0]); err != nil { // its reader stopped: handed over
		t.Fatal(err)
	}
	if l := leasesOf(t, table)[asked[0]]; l.Owner != "" || l.PendingOwner != "w2" {
		t.Fatalf("not handed over: %+v", l)
	}
	stop() // w2 stops before its next Claim
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ls := leasesOf(t, table)
	if l := ls[asked[0]]; l.Owner != "" || l.PendingOwner != "" {
		t.Fatalf("the lease handed to the stopped worker: %+v", l)
	}
	if l := ls[asked[1]]; l.Owner != "w1" || l.PendingOwner != "" {
		t.Fatalf("the request of the stopped worker: %+v", l)
	}
	// w1's reader stops after the request was withdrawn: the lease is released, not handed to
	// a worker that is gone.
	if err := w1.Release(ctx, asked[1]); err != nil {
		t.Fatal(err)
	}
	if l := leasesOf(t, table)[asked[1]]; l.Owner != "" {
		t.Fatalf("handed to a stopped worker: %+v", l)
	}
}

// TestReleaseNonCandidates: a held lease whose shard is no longer a candidate (finished here, or
// trimmed) is released by the next Claim.
func TestReleaseNonCandidates(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	ids := shardIDs(2)
	w := newWorker(t, table, "w", nil)
	if err := w.Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	claim(t, w, ids)
	if err := w.Save(ctx, map[string]poller.ShardProgress{ids[0]: {Finished: true, Checkpoint: "3"}}); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, w, ids[1:]); !slices.Equal(got, ids[1:]) {
		t.Fatalf("claimed %v", got)
	}
	l := leasesOf(t, table)[ids[0]]
	if l.Owner != "" || !l.Finished() || l.Progress.Checkpoint != "3" {
		t.Fatalf("finished lease: %+v", l)
	}
	// A finished lease is never taken again, even when offered.
	if got := claim(t, w, ids); !slices.Equal(got, ids[1:]) {
		t.Fatalf("claimed %v", got)
	}
}

// TestRestartedWorkerAdoptsItsLeases: a worker restarted under the same id adopts at once the
// leases the table says it owns.
func TestRestartedWorkerAdoptsItsLeases(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	ids := shardIDs(2)
	old := newWorker(t, table, "w", nil)
	if err := old.Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	claim(t, old, ids)
	restarted := newWorker(t, table, "w", nil)
	if got := claim(t, restarted, ids); !slices.Equal(got, ids) {
		t.Fatalf("claimed %v", got)
	}
	if err := old.Save(ctx, map[string]poller.ShardProgress{ids[0]: {Checkpoint: "1"}}); !errors.Is(err, poller.ErrLeaseLost) {
		t.Fatalf("the previous incarnation's save: %v", err)
	}
}

// TestColdStartBalances: workers starting together on unowned leases reach their share within a
// few claims, and stay there.
func TestColdStartBalances(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	ids := shardIDs(16)
	var ws []*Dynamo
	for i := range 4 {
		ws = append(ws, newWorker(t, table, fmt.Sprintf("w%d", i), nil, withRand(rand.New(rand.NewPCG(uint64(i), 7)))))
	}
	if err := ws[0].Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	rounds := 0
	for ; rounds < 20; rounds++ {
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				held, err := w.Claim(ctx, ids)
				if err != nil {
					t.Error(err)
				}
				for _, id := range shardIDs(16) { // readers of shards handed over stop at once
					if w.Held(id) && !slices.Contains(held, id) {
						if err := w.Release(ctx, id); err != nil {
							t.Error(err)
						}
					}
				}
			}()
		}
		wg.Wait()
		o := owners(leasesOf(t, table))
		if o["w0"] == 4 && o["w1"] == 4 && o["w2"] == 4 && o["w3"] == 4 {
			break
		}
	}
	if rounds == 20 {
		t.Fatalf("not balanced after 20 rounds: %v", owners(leasesOf(t, table)))
	}
	t.Logf("balanced after %d rounds of concurrent claims", rounds+1)
	before := leasesOf(t, table)
	for _, w := range ws {
		claim(t, w, ids)
	}
	for id, l := range leasesOf(t, table) {
		if l.Owner != before[id].Owner || l.PendingOwner != "" {
			t.Fatalf("a balanced table moved: %+v → %+v", before[id], l)
		}
	}
}
