package lease

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/internal/testbed/verify"
)

// putLog remembers when each record's put started and returned: a record whose put returned
// before a time arrived before it, one whose put started after it arrived after it.
type putLog struct {
	mu         sync.Mutex
	start, end map[string]time.Time
	perKey     map[string]int
}

// produceLogged writes records over keys, one every `every`, until stop is closed.
func produceLogged(ctx context.Context, stream string, keys int, every time.Duration, stop <-chan struct{}, pl *putLog) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		k := fmt.Sprintf("key-%d", n%keys)
		pl.mu.Lock()
		data := fmt.Sprintf("%s:%d", k, pl.perKey[k])
		pl.mu.Unlock()
		began := time.Now()
		if _, err := local.PutRecords(ctx, kin, stream, []local.Record{{PartitionKey: k, Data: []byte(data)}}); err != nil {
			return err
		}
		pl.mu.Lock()
		pl.start[data], pl.end[data] = began, time.Now()
		pl.perKey[k]++
		pl.mu.Unlock()
	}
}

func (pl *putLog) written() int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return len(pl.end)
}

// TestProcessRewindWindow is issue 43's first demand on real processes: two esm workers on a
// lease table read a stream whose records are put over time and which is split; while records
// flow, "esm rewind --from 1h --until T" replays every record that arrived in the hour before
// T. Every record of the window is invoked again, in order per key, parents' replay before
// their children's; no two invocations of a shard overlap; records after T that were handled
// before the rewind are not invoked again; and the mapping goes on after it.
func TestProcessRewindWindow(t *testing.T) {
	const leaseDuration = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	stream, _ := newStream(t, "rewind", 2)
	table := uniqueName("rewind")
	dir := t.TempDir()
	procs := []*esmProc{
		startESM(t, dir, "w0", stream, table, leaseDuration, "EXAMPLE_DELAY=2ms"),
		startESM(t, dir, "w1", stream, table, leaseDuration, "EXAMPLE_DELAY=2ms"),
	}
	dropTableAtEnd(t, table)
	testkit.WaitFor(t, "two workers balanced on 2 shards", 30*time.Second, func() bool {
		o, n := ownersIfTable(t, table)
		return n == 2 && balanced(o, n, []string{"w0", "w1"})
	})
	pl := &putLog{start: map[string]time.Time{}, end: map[string]time.Time{}, perKey: map[string]int{}}
	stop := make(chan struct{})
	prodErr := make(chan error, 1)
	go func() { prodErr <- produceLogged(ctx, stream, 20, 5*time.Millisecond, stop, pl) }()

	testkit.WaitFor(t, "300 records written", time.Minute, func() bool { return pl.written() >= 300 })
	open, err := local.OpenShards(ctx, kin, stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := local.SplitInHalf(ctx, kin, stream, *open[0].ShardId); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "600 records written", time.Minute, func() bool { return pl.written() >= 600 })
	until := time.Now()
	testkit.WaitFor(t, "900 records written, and delivered", time.Minute, func() bool {
		return pl.written() >= 900 && uniqueData(allDeliveries(t, procs)) >= 800
	})

	asked := time.Now()
	cmd := exec.CommandContext(ctx, esmBinary(t), "rewind", "--stream", stream, "--lease-table", table,
		"--from", "1h", "--until", until.UTC().Format(time.RFC3339Nano), "--lease-duration", leaseDuration.String(), "--wait", "1m")
	cmd.Env = processEnv()
	out, err := cmd.CombinedOutput()
	applied := time.Now()
	if err != nil {
		t.Fatalf("esm rewind: %v\n%s", err, out)
	}
	t.Logf("esm rewind (%s):\n%s", applied.Sub(asked).Round(time.Millisecond), out)

	testkit.WaitFor(t, "records written after the rewind", time.Minute, func() bool { return pl.written() >= 1300 })
	close(stop)
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	total := pl.written()
	testkit.WaitFor(t, "every record delivered", 2*time.Minute, func() bool { return uniqueData(allDeliveries(t, procs)) >= total })
	// The window's records: delivered again after the rewind asked for it.
	inWindow := func(data string) bool { return pl.end[data].Before(until) }
	testkit.WaitFor(t, "every record of the window invoked again", 2*time.Minute, func() bool {
		n := 0
		for _, d := range allDeliveries(t, procs) {
			if inWindow(d.Data) && d.ReceivedAt >= asked.UnixMilli() {
				n++
			}
		}
		want := 0
		for data := range pl.end {
			if inWindow(data) {
				want++
			}
		}
		return n >= want
	})
	for _, p := range procs {
		p.stop(t)
	}
	got := allDeliveries(t, procs)
	lineage, err := local.Lineage(ctx, kin, stream)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadRewind(ctx, ddb, table)
	if err != nil || st.State != RewindApplied {
		t.Fatalf("rewind state %+v, %v; want applied", st, err)
	}
	// Every record delivered, first deliveries in order per key; lineage held before the
	// rewind, and again from its application on (the replay's parents before their children).
	var before, after []example.Delivery
	for _, d := range got {
		if d.InvokedAt < st.DoneAt.UnixNano() {
			before = append(before, d)
		} else {
			after = append(after, d)
		}
	}
	all := verify.Deliveries(got, pl.perKey, lineage)
	if bad := verify.Failed(append(all[:2], verify.Deliveries(before, nil, lineage)[2], verify.Deliveries(after, nil, lineage)[2])); bad != "" {
		t.Fatal(bad)
	}
	checkExclusive(t, procs)
	checkNoOverlap(t, got)
	checkReplay(t, got, pl, until, asked)
}

// checkNoOverlap: no two invocations of one shard ran at once (the old position's and the
// new's included).
func checkNoOverlap(t *testing.T, got []example.Delivery) {
	t.Helper()
	type span struct{ from, to int64 }
	byShard := map[string]map[string]span{}
	for _, d := range got {
		if byShard[d.ShardID] == nil {
			byShard[d.ShardID] = map[string]span{}
		}
		byShard[d.ShardID][d.RequestID] = span{d.InvokedAt, d.DoneAt}
	}
	for shard, inv := range byShard {
		spans := slices.Collect(func(yield func(span) bool) {
			for _, s := range inv {
				if !yield(s) {
					return
				}
			}
		})
		slices.SortFunc(spans, func(a, b span) int { return int(a.from - b.from) })
		for i := 1; i < len(spans); i++ {
			if spans[i].from < spans[i-1].to {
				t.Fatalf("shard %s: an invocation started at %d while another ran until %d", shard, spans[i].from, spans[i-1].to)
			}
		}
	}
}

// checkReplay judges the replay: every record that arrived before until was invoked again
// after the rewind was asked for, each key's in order and once; a record put after until was
// invoked once in all.
func checkReplay(t *testing.T, got []example.Delivery, pl *putLog, until, asked time.Time) {
	t.Helper()
	replayed := map[string][]int{} // key -> record numbers replayed, in invocation order
	count := map[string]int{}
	for _, d := range got {
		count[d.Data]++
		if d.ReceivedAt < asked.UnixMilli() || !pl.end[d.Data].Before(until) {
			continue
		}
		k, n, _ := strings.Cut(d.Data, ":")
		i, _ := strconv.Atoi(n)
		replayed[k] = append(replayed[k], i)
	}
	window, after := 0, 0
	for data, end := range pl.end {
		switch {
		case end.Before(until):
			window++
		case pl.start[data].After(until) && count[data] != 1:
			t.Errorf("record %s, put after the window's end, invoked %d times; want once", data, count[data])
		case pl.start[data].After(until):
			after++
		}
	}
	n := 0
	for k, seq := range replayed {
		for i, x := range seq {
			if x != i {
				t.Fatalf("key %s replayed %v: want 0, 1, 2, ... once each, in order", k, seq)
			}
		}
		n += len(seq)
	}
	if n != window {
		t.Fatalf("%d records replayed, want the window's %d", n, window)
	}
	t.Logf("window: %d records replayed in order per key; %d records put after its end, each invoked once", window, after)
}
