package poller

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
)

// gateWorker is a memWorker that is also an InvocationGate: it counts the invocations admitted
// and not yet ended, as the lease package's horizon does.
type gateWorker struct {
	*memWorker
	mu                    sync.Mutex
	open, admitted, ended int
}

func (g *gateWorker) GateInvocations() {}

func (g *gateWorker) StartInvocation(_ context.Context, shardID string) (InvocationTicket, bool) {
	if !g.Held(shardID) {
		return nil, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open++
	g.admitted++
	return &gateTicket{g: g}, true
}

type gateTicket struct{ g *gateWorker }

func (t *gateTicket) Recheck() bool { return true }

func (t *gateTicket) End(ended bool) {
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	t.g.open--
	if ended {
		t.g.ended++
	}
}

func (g *gateWorker) counts() (open, admitted, ended int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open, g.admitted, g.ended
}

// TestEveryInvocationGoesThroughTheGate: with a Coordinator that is an InvocationGate, every
// invocation is admitted by it before it is sent and reported to it once it returned, the
// final invocation of a tumbling window too (the lease package's horizon must cover each: an
// invocation it did not know of could still run after a dead worker's shards were taken).
func TestEveryInvocationGoesThroughTheGate(t *testing.T) {
	var c clock
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c.set(t0)
	f := fakekinesis.New(fakekinesis.WithClock(c.now))
	arn := f.CreateStream("s", 1)
	table := newLeaseTable()
	g := &gateWorker{memWorker: &memWorker{t: table, id: "A"}}
	var mu sync.Mutex
	var sent, finals, unadmitted int
	inv := invoke.InvokerFunc(func(_ context.Context, payload []byte) (invoke.Response, error) {
		open, _, _ := g.counts()
		mu.Lock()
		defer mu.Unlock()
		sent++
		if open < 1 {
			unadmitted++
		}
		if bytes.Contains(payload, []byte(`"isFinalInvokeForWindow":true`)) {
			finals++
		}
		return invoke.Response{StatusCode: 200, Payload: []byte(`{"state":{}}`)}, nil
	})
	f.Put("s", "k", []byte("1"))
	startWorkerWith(t, f, arn, g.memWorker, inv, []Option{WithCoordinator(g), WithClock(c.now)}, func(cfg *Config) { cfg.TumblingWindow = time.Minute })
	testkit.WaitFor(t, "the window's batch", 5*time.Second, func() bool { _, a, _ := g.counts(); return a >= 1 })
	c.set(t0.Add(3 * time.Minute)) // the window is over: its final invocation comes
	testkit.WaitFor(t, "the window's final invocation", 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return finals >= 1 })
	testkit.WaitFor(t, "every invocation to end", 5*time.Second, func() bool { open, _, _ := g.counts(); return open == 0 })
	_, admitted, ended := g.counts()
	mu.Lock()
	defer mu.Unlock()
	if unadmitted > 0 || admitted != sent || ended != sent {
		t.Fatalf("%d invocations sent (%d final), %d without an admission; %d admitted, %d reported ended", sent, finals, unadmitted, admitted, ended)
	}
}
