package invoke

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// gate is an Invoker whose invocations each wait for the test to release them.
type gate struct {
	entered chan struct{}
	release chan struct{}

	mu                    sync.Mutex
	calls, inFlight, peak int
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) Invoke(ctx context.Context, _ []byte) (Response, error) {
	g.mu.Lock()
	g.calls++
	g.inFlight++
	g.peak = max(g.peak, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return Response{StatusCode: 200}, nil
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
}

func (g *gate) stats() (calls, inFlight, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls, g.inFlight, g.peak
}

func TestLimitCapsInvocationsInFlight(t *testing.T) {
	const n, callers = 2, 7
	g := newGate()
	inv := Limit(g, n)
	errs := make(chan error, callers)
	for range callers {
		go func() {
			_, err := inv.Invoke(context.Background(), nil)
			errs <- err
		}()
	}
	for range n {
		<-g.entered
	}
	if _, inFlight, _ := g.stats(); inFlight != n {
		t.Fatalf("%d in flight, want the limit %d", inFlight, n)
	}
	// Each release lets exactly one waiting caller in.
	for finished := 0; finished < callers; finished++ {
		g.release <- struct{}{}
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if waiting := callers - finished - n; waiting > 0 {
			<-g.entered
		}
	}
	calls, _, peak := g.stats()
	if calls != callers || peak != n {
		t.Fatalf("%d calls, at most %d at once; want %d calls, at most %d", calls, peak, callers, n)
	}
}

func TestLimitWaitHonoursContext(t *testing.T) {
	g := newGate()
	inv := Limit(g, 1)
	first := make(chan error, 1)
	go func() {
		_, err := inv.Invoke(context.Background(), nil)
		first <- err
	}()
	<-g.entered

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := inv.Invoke(ctx, nil)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrThrottled) {
		t.Fatalf("err %v: want the context's deadline", err)
	}
	if calls, _, _ := g.stats(); calls != 1 {
		t.Fatalf("%d calls: a caller that gave up waiting must not invoke", calls)
	}
	g.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := inv.Invoke(cancelled, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v with a free slot and a cancelled context: want context.Canceled", err)
	}
}

func TestLimitZeroIsThrottled(t *testing.T) {
	called := false
	inv := Limit(InvokerFunc(func(context.Context, []byte) (Response, error) {
		called = true
		return Response{}, nil
	}), 0)
	if _, err := inv.Invoke(context.Background(), nil); !errors.Is(err, ErrThrottled) || called {
		t.Fatalf("err %v, called %v: reserved concurrency 0 throttles every invocation", err, called)
	}
}

func TestLimitNegativeIsUnlimited(t *testing.T) {
	g := newGate()
	if inv := Limit(g, -1); inv != Invoker(g) {
		t.Fatalf("Limit(inv, -1) = %T, want inv itself", inv)
	}
}

// An invocation that waited for a slot is not started when the start check says no: the
// poller's lease may have ended during the wait.
func TestLimitAsksTheStartCheckAfterTheWait(t *testing.T) {
	g := newGate()
	inv := Limit(g, 1)
	first := make(chan error, 1)
	go func() { _, err := inv.Invoke(context.Background(), nil); first <- err }()
	<-g.entered
	var mu sync.Mutex
	allowed := true
	check := func() bool { mu.Lock(); defer mu.Unlock(); return allowed }
	second := make(chan error, 1)
	go func() { _, err := inv.Invoke(WithStartCheck(context.Background(), check), nil); second <- err }()
	mu.Lock()
	allowed = false
	mu.Unlock()
	g.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-second:
		if !errors.Is(err, ErrNotStarted) || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err %v; want ErrNotStarted", err)
		}
	case <-g.entered:
		g.release <- struct{}{}
		t.Fatalf("the invocation that waited reached the function after its start check said no (%v)", <-second)
	}
}
