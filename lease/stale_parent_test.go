package lease

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
)

// pollerDriver runs a worker's heartbeat and claim cycles as the poller does: every
// ClaimInterval a Load, then a Claim of the current candidates; a shard the Claim stops
// returning is released (the poller stops its reader and calls Release).
type pollerDriver struct {
	mu     sync.Mutex
	cand   []string
	held   map[string]bool
	claims int
	paused bool // heartbeat only: no Load, no Claim
}

func drivePoller(t *testing.T, d *Dynamo, candidates []string, paused bool) (*pollerDriver, func()) {
	t.Helper()
	p := &pollerDriver{cand: candidates, held: map[string]bool{}, paused: paused}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = d.Run(ctx) }()
	go func() {
		defer wg.Done()
		tk := time.NewTicker(d.ClaimInterval())
		defer tk.Stop()
		for {
			p.mu.Lock()
			paused := p.paused
			p.mu.Unlock()
			if paused {
				// heartbeat only
			} else if _, err := d.Load(ctx); err == nil {
				p.mu.Lock()
				cand := slices.Clone(p.cand)
				p.mu.Unlock()
				if got, err := d.Claim(ctx, cand); err == nil {
					p.mu.Lock()
					now := map[string]bool{}
					for _, id := range got {
						now[id] = true
					}
					var stopped []string
					for id := range p.held {
						if !now[id] {
							stopped = append(stopped, id)
						}
					}
					p.held = now
					p.claims++
					p.mu.Unlock()
					for _, id := range stopped {
						_ = d.Release(ctx, id)
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	return p, func() { cancel(); wg.Wait() }
}

func (p *pollerDriver) setCandidates(c []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cand = c
}

func (p *pollerDriver) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
}

func (p *pollerDriver) holds(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[id]
}

func (p *pollerDriver) claimCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.claims
}

// TestChildWaitsForParentTakenSinceLastSeen: a worker that last saw a parent's lease handed
// over (a lease nobody reads) must not take that for the parent's state when the poller offers
// the child (the parent was trimmed from the listing): the parent's new owner may be reading
// its last batch. The parent is read again before the child is taken. (Simulation LEASES=1
// seed 60: children invoked 0.13 s before their trimmed parent's last invocation ended, by a
// worker whose cached copy of the parent named an owner that had died since.)
func TestChildWaitsForParentTakenSinceLastSeen(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	parent, child := "shardId-000000000000", "shardId-000000000001"
	// Worker ids for which the placement over both gives the parent and the child to b: c
	// hands the parent over, and the child is not placed on c (c reads the parents of the
	// children placed on it every cycle anyway).
	cID, bID := "c", ""
	for i := 0; bID == ""; i++ {
		id := fmt.Sprintf("b%d", i)
		ms := []string{id, cID}
		if assign([]string{parent}, ms).owner[parent] == id && assign([]string{child}, ms).owner[child] == id {
			bID = id
		}
	}
	newWorker := func(id string) *Dynamo {
		log, _ := testLogger(t)
		d, err := NewDynamo(ddb, table, id, WithLeaseDuration(2*time.Second), WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	c := newWorker(cID)
	if err := c.Register(ctx, infos([]string{parent})); err != nil {
		t.Fatal(err)
	}
	pc, stopC := drivePoller(t, c, []string{parent}, false)
	defer stopC()
	testkit.WaitFor(t, "c holds the parent", 10*time.Second, func() bool { return pc.holds(parent) })

	// b joins (heartbeat only, no claim cycles yet): c hands the parent over to it, and reads
	// the lease in that state (handed over, read by nobody) at its next cycles.
	b := newWorker(bID)
	if err := b.Register(ctx, infos([]string{parent})); err != nil {
		t.Fatal(err)
	}
	pb, stopB := drivePoller(t, b, []string{parent}, true)
	defer stopB()
	testkit.WaitFor(t, "c hands the parent over", 15*time.Second, func() bool {
		l := leasesOf(t, table)[parent]
		return !pc.holds(parent) && l.Owner == bID && l.HandedOver
	})
	from := pc.claimCount()
	testkit.WaitFor(t, "c ran claim cycles since", 10*time.Second, func() bool { return pc.claimCount() >= from+3 })
	// b takes it up and reads it.
	pb.resume()
	testkit.WaitFor(t, "b reads the parent", 10*time.Second, func() bool { return pb.holds(parent) })
	if l := leasesOf(t, table)[parent]; l.Owner != bID || l.HandedOver {
		t.Fatalf("parent lease %+v, want taken up by %s", l, bID)
	}

	// The parent is trimmed from c's listing: c's poller counts it finished and offers the
	// child. b still reads the parent.
	if err := c.Register(ctx, []poller.ShardInfo{{ShardID: child, Parents: []string{parent}, Initial: poller.ShardProgress{Start: poller.TrimHorizon}}}); err != nil {
		t.Fatal(err)
	}
	pc.setCandidates([]string{child})
	from = pc.claimCount()
	testkit.WaitFor(t, "c ran claim cycles offering the child", 10*time.Second, func() bool { return pc.claimCount() >= from+8 })
	if l, ok := leasesOf(t, table)[child]; ok || c.Held(child) {
		t.Fatalf("child taken (%+v) while its parent is read by live worker %s", l, bID)
	}

	// b finishes the parent: c takes the child.
	if err := b.Save(ctx, map[string]poller.ShardProgress{parent: {Finished: true}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "c takes the child once the parent is finished", 10*time.Second, func() bool { return pc.holds(child) })
}

// TestLeaseNotAskedForIsNotTaken: a shard the poller stops offering (trimmed from its listing
// while being read) is released when its reader stops, and not taken again although the
// placement still gives it to this worker: an idle holder would keep the shard's children
// waiting for good (see parentsDone).
func TestLeaseNotAskedForIsNotTaken(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	shard := "shardId-000000000000"
	log, logs := testLogger(t)
	d, err := NewDynamo(ddb, table, "a", WithLeaseDuration(2*time.Second), WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Register(ctx, infos([]string{shard})); err != nil {
		t.Fatal(err)
	}
	p, stop := drivePoller(t, d, []string{shard}, false)
	defer stop()
	testkit.WaitFor(t, "a reads the shard", 10*time.Second, func() bool { return p.holds(shard) })

	taken := func() int { return strings.Count(logs.String(), `msg="lease taken"`) }
	before := taken()
	p.setCandidates(nil) // trimmed: the poller stops its reader and releases the lease
	from := p.claimCount()
	testkit.WaitFor(t, "claim cycles since", 10*time.Second, func() bool { return p.claimCount() >= from+8 })
	if l := leasesOf(t, table)[shard]; l.Owner != "" || d.Held(shard) {
		t.Fatalf("lease %+v held=%v, want released and left alone", l, d.Held(shard))
	}
	if n := taken() - before; n > 0 {
		t.Fatalf("lease taken %d times after the poller stopped asking for it", n)
	}
}
