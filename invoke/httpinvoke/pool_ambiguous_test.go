package httpinvoke

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// TestNoAnswerIsNotRetriedOnAnotherEndpoint is the audit's suspicion S2: an invocation with no
// answer within the function timeout plus the margin holds its endpoint back, and the poller's
// retry of the batch used to take the other, free endpoint at once, overlapping the first
// wherever the endpoint's own timeout is longer than esm's. The failure is now ambiguous: the
// retry waits for the invocation bound since the send, on whichever endpoint. Here the first
// endpoint runs the invocation for 1.5 s (less than the bound, 2 s: the endpoint-timeout rule)
// while the pool gives up after 300 ms. Fails with "no answer" classified as ErrUnavailable.
func TestNoAnswerIsNotRetriedOnAnotherEndpoint(t *testing.T) {
	var mu sync.Mutex
	var runs [][2]time.Time
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		first := len(runs) == 0
		runFor := 50 * time.Millisecond
		if first {
			runFor = 1500 * time.Millisecond // the endpoint's own timeout is longer than esm's
		}
		runs = append(runs, [2]time.Time{time.Now(), time.Now().Add(runFor)})
		mu.Unlock()
		time.Sleep(runFor)
		_, _ = w.Write([]byte(`{}`))
	})
	a, b := httptest.NewServer(handler), httptest.NewServer(handler)
	defer a.Close()
	defer b.Close()
	pool := newHTTP(t, []string{a.URL, b.URL}, WithFunctionTimeout(200*time.Millisecond))
	pool.margin = 100 * time.Millisecond

	fk := fakekinesis.New()
	arn := fk.CreateStream("s", 1)
	fk.Put("s", "k", []byte(`{}`))
	cfg := poller.Config{StartingPosition: poller.TrimHorizon, PollInterval: 50 * time.Millisecond}
	p, err := poller.New(kinesissrc.MustNew(fk, arn), cfg, poller.NewMemoryStore(), pool, poller.WithInvocationBound(2*time.Second),
		poller.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	_ = p.Run(ctx)

	mu.Lock()
	defer mu.Unlock()
	if len(runs) < 2 {
		t.Fatalf("%d invocations, want the one without an answer and its retry", len(runs))
	}
	for i, x := range runs {
		for _, y := range runs[i+1:] {
			if x[0].Before(y[1]) && y[0].Before(x[1]) {
				t.Errorf("invocations overlapped: %s", fmt.Sprint(x, y))
			}
		}
	}
}
