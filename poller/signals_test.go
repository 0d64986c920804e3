package poller

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
)

// ages records the IteratorAge values told, in order.
type ages struct {
	NopObserver
	mu   sync.Mutex
	told []time.Duration
}

func (a *ages) IteratorAge(_ string, age time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.told = append(a.told, age)
}

// TestIteratorAgeWhileSlotsWork: with ParallelizationFactor > 1, records handed to the slots
// count in the shard's age until a slot sends them: a backlog 30 s old is reported 30 s old (or
// more) until the shard caught up, then 0, with no dip to 0 between a dispatch and the slots'
// sends.
func TestIteratorAgeWhileSlotsWork(t *testing.T) {
	for _, pf := range []int{1, 4} {
		t.Run(fmt.Sprint("pf=", pf), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fakekinesis.New()
				arn := f.CreateStream("s", 1)
				for i := range 40 {
					f.Put("s", fmt.Sprint("k", i), []byte("x"))
				}
				time.Sleep(30 * time.Second)
				obs := &ages{}
				p, err := New(kinesisSource(f, arn), Config{StartingPosition: TrimHorizon, BatchSize: 5, ParallelizationFactor: pf,
					PollInterval: time.Second, ShardSyncInterval: time.Hour}, NewMemoryStore(), &timedInvoker{d: 100 * time.Millisecond}, WithObserver(obs))
				if err != nil {
					t.Fatal(err)
				}
				cancel, done := runPoller(t, p)
				time.Sleep(10 * time.Second)
				synctest.Wait()
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				obs.mu.Lock()
				defer obs.mu.Unlock()
				last := len(obs.told) - 1
				if last < 1 || obs.told[last] != 0 {
					t.Fatalf("ages told %v: want the backlog's, then 0", obs.told)
				}
				for i, age := range obs.told[:last] {
					if age < 30*time.Second {
						t.Fatalf("age %d of %d told is %s while the backlog was still handled: %v", i, last+1, age, obs.told)
					}
				}
			})
		})
	}
}
