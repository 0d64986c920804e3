package poller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/source"
)

// windowFinals is a windowed handler that counts and sums the records of each window in its
// state and notes every final invocation, in order, as "start n=N sum=S".
type windowFinals struct {
	mu     sync.Mutex
	finals []string
}

func (h *windowFinals) handle(_ context.Context, e events.KinesisTimeWindowEvent) (events.KinesisTimeWindowEventResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, _ := strconv.Atoi(e.State["n"])
	sum, _ := strconv.Atoi(e.State["sum"])
	for _, r := range e.Records {
		v, _ := strconv.Atoi(string(r.Kinesis.Data))
		n, sum = n+1, sum+v
	}
	if e.IsFinalInvokeForWindow {
		h.finals = append(h.finals, fmt.Sprintf("%s n=%d sum=%d", e.Window.Start.UTC().Format("15:04"), n, sum))
	}
	state := map[string]string{"n": strconv.Itoa(n), "sum": strconv.Itoa(sum)}
	return events.KinesisTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: state}}, nil
}

func (h *windowFinals) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.finals)
}

// TestRewindMidWindowStartsWindowsAfresh: a rewind is the mapping created again at the new
// position as far as tumbling windows go. The window open when the shard stopped is dropped
// without a final invocation, and the replay aggregates its windows from empty state: the first
// one from the rewind's position on (partial), then each as the records come. It fails when
// the rewind keeps the old window (its state leaks into the replay, or the old window is closed
// with a final invocation at the replay's start).
func TestRewindMidWindowStartsWindowsAfresh(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	sum := func(from, to, base int) int { // base+from + … + base+to-1
		s := 0
		for i := from; i < to; i++ {
			s += base + i
		}
		return s
	}
	for _, tc := range []struct {
		name string
		q    RewindRequest
		want []string // final invocations after the rewind
	}{
		{
			// Replay [12:00:15, 12:01:10): 12:00 from its 15th record, 12:01 its first 10 (the
			// other 10 were handled before the rewind and are not invoked again), then 12:02.
			name: "replay window",
			q:    RewindRequest{Timestamp: t0.Add(15 * time.Second), Until: t0.Add(70 * time.Second)},
			want: []string{
				fmt.Sprintf("12:00 n=15 sum=%d", sum(15, 30, 0)),
				fmt.Sprintf("12:01 n=10 sum=%d", sum(0, 10, 100)),
				fmt.Sprintf("12:02 n=5 sum=%d", sum(0, 5, 1000)),
			},
		},
		{
			// Move to 12:01:05, inside the window that was open: it starts again empty there.
			name: "move into the open window",
			q:    RewindRequest{Timestamp: t0.Add(65 * time.Second)},
			want: []string{
				fmt.Sprintf("12:01 n=15 sum=%d", sum(5, 20, 100)),
				fmt.Sprintf("12:02 n=5 sum=%d", sum(0, 5, 1000)),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c clock
			f := fakekinesis.New(fakekinesis.WithClock(c.now))
			arn := f.CreateStream("s", 1)
			put := func(at time.Time, n int) {
				c.set(at)
				f.Put("s", "k", []byte(strconv.Itoa(n)))
			}
			for i := range 30 { // window 12:00: 0…29
				put(t0.Add(time.Duration(i)*time.Second), i)
			}
			for i := range 20 { // window 12:01: 100…119
				put(t0.Add(time.Minute+time.Duration(i)*time.Second), 100+i)
			}
			c.set(t0.Add(80 * time.Second)) // 12:01 still open
			store := NewMemoryStore()
			h := &windowFinals{}
			run := func() func() {
				p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, BatchSize: 7, TumblingWindow: time.Minute,
					PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond}, store, inprocess.New(h.handle), WithClock(c.now))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- p.Run(ctx) }()
				return func() { cancel(); <-done }
			}
			stop := run()
			const shard = "shardId-000000000000"
			testkit.WaitFor(t, "window 12:01 open with its 20 records", 5*time.Second, func() bool {
				pr, _ := store.Load(context.Background())
				w := pr[shard].Window
				return w != nil && w.Start.Equal(t0.Add(time.Minute)) && w.State["n"] == "20"
			})
			stop()
			if got, want := h.got(), []string{fmt.Sprintf("12:00 n=30 sum=%d", sum(0, 30, 0))}; !slices.Equal(got, want) {
				t.Fatalf("before the rewind: finals %q, want %q", got, want)
			}
			// The rewind as esm applies it on a state file: planned from the stored progress.
			stored, err := store.Load(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			plan := PlanRewind(tc.q, []source.Shard{{ID: shard}}, stored, 1)
			if err := store.Save(context.Background(), plan.Progress); err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			h.finals = nil
			h.mu.Unlock()
			stop = run()
			defer stop()
			for i := range 5 { // window 12:02 closes 12:01
				put(t0.Add(2*time.Minute+time.Duration(i)*time.Second), 1000+i)
			}
			c.set(t0.Add(4 * time.Minute)) // 12:02 is over and idle: it closes too
			testkit.WaitFor(t, "the replay's windows closed", 5*time.Second, func() bool { return len(h.got()) >= len(tc.want) })
			if got := h.got(); !slices.Equal(got, tc.want) {
				t.Fatalf("after the rewind: finals %q, want %q", got, tc.want)
			}
		})
	}
}
