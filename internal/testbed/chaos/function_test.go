package chaos

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAwaitSlowWaitsForALongInvocation: AwaitSlow returns the worker of the first invocation
// one of the workers it watches started while SlowFor applied (a fault dealt to it then lands
// mid-invocation), not another worker's, and gives up after its limit when none starts.
func TestAwaitSlowWaitsForALongInvocation(t *testing.T) {
	f, err := NewFunctionServer(1, 2*time.Second, SourceKinesis)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	invoke := func(worker string) {
		req, err := http.NewRequest(http.MethodPost, f.URL()+"/2015-03-31/functions/f/invocations", strings.NewReader(`{"Records":[]}`))
		if err != nil {
			t.Error(err)
			return
		}
		req.Header.Set(workerHeader, worker)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}
	if _, ok := f.AwaitSlow(ctx, []string{"w1"}, 100*time.Millisecond); ok {
		t.Fatal("AwaitSlow reported a long invocation before any started")
	}
	f.SlowFor("w1", time.Second)
	done := make(chan struct{})
	go func() { invoke("w2"); close(done) }()
	if _, ok := f.AwaitSlow(ctx, []string{"w1", "w3"}, 300*time.Millisecond); ok {
		t.Fatal("AwaitSlow took another worker's invocation for w1's or w3's")
	}
	<-done
	long := make(chan struct{})
	go func() { invoke("w1"); close(long) }()
	defer func() { <-long }() // before Close
	if w, ok := f.AwaitSlow(ctx, []string{"w3", "w1"}, 5*time.Second); !ok || w != "w1" {
		t.Fatalf("AwaitSlow returned %q, %v: want w1's long invocation", w, ok)
	}
	if f.InFlight() != 1 {
		t.Fatalf("%d invocations in flight when AwaitSlow returned, want w1's", f.InFlight())
	}
}
