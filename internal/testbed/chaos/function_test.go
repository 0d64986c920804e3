package chaos

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAwaitSlowWaitsForALongInvocation: AwaitSlow returns once an invocation the worker started
// while SlowFor applied runs (the fault then lands mid-invocation), not for another worker's,
// and gives up after its limit when none starts.
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
	if f.AwaitSlow(ctx, "w1", 100*time.Millisecond) {
		t.Fatal("AwaitSlow reported a long invocation before any started")
	}
	f.SlowFor("w1", time.Second)
	done := make(chan struct{})
	go func() { invoke("w2"); close(done) }()
	if f.AwaitSlow(ctx, "w1", 300*time.Millisecond) {
		t.Fatal("AwaitSlow took another worker's invocation for w1's")
	}
	<-done
	long := make(chan struct{})
	go func() { invoke("w1"); close(long) }()
	defer func() { <-long }() // before Close
	if !f.AwaitSlow(ctx, "w1", 5*time.Second) {
		t.Fatal("AwaitSlow did not see w1's long invocation")
	}
	if f.InFlight() != 1 {
		t.Fatalf("%d invocations in flight when AwaitSlow returned, want w1's", f.InFlight())
	}
}
