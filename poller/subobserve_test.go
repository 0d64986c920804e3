package poller

import (
	"sync"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// subRecorder records what a SubscriptionObserver is told.
type subRecorder struct {
	NopObserver
	mu                             sync.Mutex
	readBy                         map[string][]string
	first, renewals, inUse, events int
}

func (s *subRecorder) ShardReadBy(shardID, mode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readBy == nil {
		s.readBy = map[string][]string{}
	}
	s.readBy[shardID] = append(s.readBy[shardID], mode)
}

func (s *subRecorder) Subscribed(_ string, _ time.Time, renewal bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if renewal {
		s.renewals++
	} else {
		s.first++
	}
}

func (s *subRecorder) SubscriptionInUse(string) { s.mu.Lock(); s.inUse++; s.mu.Unlock() }

func (s *subRecorder) SubscriptionEvent(string, time.Time) { s.mu.Lock(); s.events++; s.mu.Unlock() }

func (s *subRecorder) snapshot() (readBy map[string][]string, first, renewals, inUse, events int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	readBy = map[string][]string{}
	for k, v := range s.readBy {
		readBy[k] = append([]string(nil), v...)
	}
	return readBy, s.first, s.renewals, s.inUse, s.events
}

// TestSubscriptionsObserved: the observer sees each shard read by subscription, its renewals
// (the subscription's lifetime ends every 100 ms), ResourceInUse refusals (a renewal within the
// fake's reuse window) and the events, for the parent and for the children of a split.
func TestSubscriptionsObserved(t *testing.T) {
	h, subs := newEFOHarness(t, 1, fakekinesis.WithSubscriptionTiming(100*time.Millisecond, 150*time.Millisecond))
	rec := &subRecorder{}
	h.opts = append(h.opts, WithObserver(rec))
	h.cfg.ShardSyncInterval = 200 * time.Millisecond
	counters := map[string]int{}
	h.start()
	h.putPaced(3, 60, 10*time.Millisecond, counters)
	testkit.WaitFor(t, "renewals and refusals", 10*time.Second, func() bool {
		_, _, renewals, inUse, _ := rec.snapshot()
		return renewals >= 2 && inUse >= 1
	})
	kids := h.fake.Split("s", "shardId-000000000000")
	h.put(3, 30, counters)
	testkit.WaitFor(t, "all 90 records", 10*time.Second, func() bool { return len(h.rec.deliveries()) >= 90 })
	checkDelivered(t, h.rec.deliveries(), counters)
	readBy, first, renewals, inUse, events := rec.snapshot()
	_, refused := subs.count()
	if inUse != refused || events == 0 || first == 0 {
		t.Fatalf("observer saw %d first subscriptions, %d renewals, %d refusals (the fake refused %d), %d events", first, renewals, inUse, refused, events)
	}
	parent := readBy["shardId-000000000000"]
	if len(parent) == 0 || parent[0] != ReadBySubscription {
		t.Fatalf("parent read by %v, want subscription first", parent)
	}
	for _, k := range kids {
		if m := readBy[k]; len(m) == 0 || m[0] != ReadBySubscription {
			t.Fatalf("child %s read by %v, want subscription", k, m)
		}
	}
	t.Logf("parent read by %v; %d subscriptions, %d renewals, %d refused in use, %d events", parent, first, renewals, inUse, events)
}
