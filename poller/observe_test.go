package poller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

type counting struct {
	mu                                                    sync.Mutex
	polled, filtered, invoked, failed, dropped, delivered int
	ages                                                  int
	errors, throttles, destinationFailures, invocations   int
	states                                                map[string]string
	blocked                                               []string // "shard true|false", in order
	ignored                                               int
}

func (c *counting) ShardBlocked(id string, b bool) {
	c.mu.Lock()
	c.blocked = append(c.blocked, fmt.Sprint(id, " ", b))
	c.mu.Unlock()
}
func (c *counting) BatchItemFailuresIgnored(string) { c.mu.Lock(); c.ignored++; c.mu.Unlock() }

// blockedCalls is a copy of the ShardBlocked calls so far.
func (c *counting) blockedCalls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.blocked)
}

func (c *counting) FunctionError(string) { c.mu.Lock(); c.errors++; c.mu.Unlock() }
func (c *counting) Throttled(string)     { c.mu.Lock(); c.throttles++; c.mu.Unlock() }
func (c *counting) DestinationDeliveryFailed(string) {
	c.mu.Lock()
	c.destinationFailures++
	c.mu.Unlock()
}

func (c *counting) snapshot() *counting {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &counting{polled: c.polled, filtered: c.filtered, invoked: c.invoked, failed: c.failed, dropped: c.dropped,
		delivered: c.delivered, ages: c.ages, errors: c.errors, throttles: c.throttles, destinationFailures: c.destinationFailures,
		invocations: c.invocations, ignored: c.ignored}
}

func (c *counting) RecordsPolled(_ string, n int)      { c.mu.Lock(); c.polled += n; c.mu.Unlock() }
func (c *counting) RecordsFilteredOut(_ string, n int) { c.mu.Lock(); c.filtered += n; c.mu.Unlock() }
func (c *counting) BatchInvoked(_ string, n int, _ time.Duration, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invocations++
	c.invoked += n
	if failed {
		c.failed += n
	}
}
func (c *counting) RecordsDropped(_ string, n int)    { c.mu.Lock(); c.dropped += n; c.mu.Unlock() }
func (c *counting) RecordsDelivered(_ string, n int)  { c.mu.Lock(); c.delivered += n; c.mu.Unlock() }
func (c *counting) IteratorAge(string, time.Duration) { c.mu.Lock(); c.ages++; c.mu.Unlock() }
func (c *counting) ShardState(id, state string)       { c.mu.Lock(); c.states[id] = state; c.mu.Unlock() }

// TestObserverCountsAddUp: every polled record ends as exactly one of handled (invoked minus
// failed invocations' records), filtered out, delivered to the destination or dropped.
func TestObserverCountsAddUp(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	data := []string{`{"ok":1}`, `{"ok":2}`, `{"skip":1}`, `{"poison":1}`, `{"ok":3}`, `{"skip":2}`, `{"ok":4}`}
	seqs := putN(f, len(data), func(i int) string { return data[i] })
	kids := f.Split("s", "shardId-000000000000")
	obs := &counting{states: map[string]string{}}
	h := func(_ context.Context, e events.KinesisEvent) (json.RawMessage, error) {
		for _, r := range e.Records {
			if string(r.Kinesis.Data) == `{"poison":1}` {
				return nil, errors.New("poison")
			}
		}
		return nil, nil
	}
	store, dest := NewMemoryStore(), &memDest{}
	p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, BatchSize: 2, MaximumRetryAttempts: intp(1),
		FilterPatterns: []string{`{"data":{"ok":[{"exists":true}]}}`, `{"data":{"poison":[{"exists":true}]}}`},
		PollInterval:   10 * time.Millisecond, MinPollSpacing: time.Millisecond}, store, inprocess.New(h), WithDestination(dest), WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	p.retryBase, p.retryMax = time.Millisecond, time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	testkit.WaitFor(t, "the parent finished", 5*time.Second, func() bool {
		pr, _ := store.Load(context.Background())
		return pr["shardId-000000000000"].Finished && pr["shardId-000000000000"].Checkpoint == seqs[6]
	})
	testkit.WaitFor(t, "a child reading", 5*time.Second, func() bool { obs.mu.Lock(); defer obs.mu.Unlock(); return obs.states[kids[0]] == StateReading })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	handled := obs.invoked - obs.failed
	if obs.polled != 7 || obs.filtered != 2 || handled != 4 || obs.delivered != 1 || obs.dropped != 0 {
		t.Fatalf("polled %d, filtered %d, handled %d, delivered %d, dropped %d", obs.polled, obs.filtered, handled, obs.delivered, obs.dropped)
	}
	if obs.polled != handled+obs.filtered+obs.delivered+obs.dropped {
		t.Fatal("counts do not add up")
	}
	if obs.ages == 0 || obs.states["shardId-000000000000"] != StateFinished || obs.states[kids[0]] != StateReleased {
		t.Fatalf("ages %d, states %v", obs.ages, obs.states)
	}
}

// TestFunctionMetricsCounted: throttles (never invocations) and function errors (not partial
// failures) reach the observer as Lambda's Throttles and Errors.
func TestFunctionMetricsCounted(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 1)
	seqs := putN(f, 2, func(i int) string { return fmt.Sprint(i) })
	calls := 0
	h := &scripted{decide: func(n int, e events.KinesisEvent) (json.RawMessage, error) {
		calls = n
		switch n {
		case 1:
			return nil, errors.New("first attempt fails")
		case 2: // a partial failure is not a function error
			return json.RawMessage(`{"batchItemFailures":[{"itemIdentifier":"` + e.Records[1].Kinesis.SequenceNumber + `"}]}`), nil
		}
		return nil, nil
	}}
	th := &throttler{Invoker: inprocess.New(h.handle)}
	th.n.Store(2)
	obs := &counting{states: map[string]string{}}
	store := NewMemoryStore()
	p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, BatchSize: 2, ReportBatchItemFailures: true,
		PollInterval: 10 * time.Millisecond, MinPollSpacing: time.Millisecond}, store, th, WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	stop := startPoller(t, p)
	waitCheckpoint(t, store, seqs[1])
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c := obs.snapshot()
	if calls != 3 || c.throttles != 2 || c.errors != 1 || c.failed != 4 {
		t.Fatalf("%d invocations, counts %+v; want 3 invocations, 2 throttles, 1 function error, 4 failed-invocation records", calls, c)
	}
}
