package metrics

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// recorder is an observer that records every call as a line.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

func (r *recorder) RecordsPolled(s string, n int)      { r.add("polled %s %d", s, n) }
func (r *recorder) RecordsFilteredOut(s string, n int) { r.add("filtered %s %d", s, n) }
func (r *recorder) BatchInvoked(s string, n int, d time.Duration, failed bool) {
	r.add("invoked %s %d %v %v", s, n, d, failed)
}
func (r *recorder) RecordsDropped(s string, n int)          { r.add("dropped %s %d", s, n) }
func (r *recorder) RecordsDelivered(s string, n int)        { r.add("delivered %s %d", s, n) }
func (r *recorder) IteratorAge(s string, age time.Duration) { r.add("age %s %v", s, age) }
func (r *recorder) ShardState(s, state string)              { r.add("state %s %s", s, state) }
func (r *recorder) FunctionError(s string)                  { r.add("error %s", s) }
func (r *recorder) Throttled(s string)                      { r.add("throttled %s", s) }
func (r *recorder) DestinationDeliveryFailed(s string)      { r.add("destination failed %s", s) }
func (r *recorder) ShardBlocked(s string, blocked bool)     { r.add("blocked %s %v", s, blocked) }
func (r *recorder) BatchItemFailuresIgnored(s string)       { r.add("ignored %s", s) }

func TestTeeFansOut(t *testing.T) {
	a, b := &recorder{}, &recorder{}
	o := Tee(a, nil, b)
	o.RecordsPolled("s", 3)
	o.RecordsFilteredOut("s", 1)
	o.BatchInvoked("s", 2, time.Second, true)
	o.RecordsDropped("s", 1)
	o.RecordsDelivered("s", 1)
	o.IteratorAge("s", time.Minute)
	o.ShardState("s", poller.StateReading)
	o.FunctionError("s")
	o.Throttled("s")
	o.DestinationDeliveryFailed("s")
	o.ShardBlocked("s", true)
	o.BatchItemFailuresIgnored("s")
	want := []string{
		"polled s 3", "filtered s 1", "invoked s 2 1s true", "dropped s 1", "delivered s 1",
		"age s 1m0s", "state s reading", "error s", "throttled s", "destination failed s",
		"blocked s true", "ignored s",
	}
	for name, r := range map[string]*recorder{"first": a, "second": b} {
		if !slices.Equal(r.calls, want) {
			t.Errorf("%s observer got %q, want %q", name, r.calls, want)
		}
	}
}

func TestTeeDegenerate(t *testing.T) {
	if _, ok := Tee().(poller.NopObserver); !ok {
		t.Error("Tee() is not a NopObserver")
	}
	if _, ok := Tee(nil, nil).(poller.NopObserver); !ok {
		t.Error("Tee(nil, nil) is not a NopObserver")
	}
	r := &recorder{}
	if got := Tee(nil, r); got != poller.Observer(r) {
		t.Errorf("Tee(nil, r) = %T, want r itself", got)
	}
}
