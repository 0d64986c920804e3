package poller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke"
)

// heldCoord is a Coordinator that holds every candidate but those lost; Held says so.
type heldCoord struct {
	mu        sync.Mutex
	lost      map[string]bool
	released  []string
	abandoned []string
}

func (c *heldCoord) Register(context.Context, []ShardInfo) error { return nil }
func (c *heldCoord) Claim(_ context.Context, cand []string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, id := range cand {
		if !c.lost[id] {
			out = append(out, id)
		}
	}
	return out, nil
}
func (c *heldCoord) Held(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.lost[id]
}
func (c *heldCoord) Release(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = append(c.released, id)
	return nil
}
func (c *heldCoord) Abandon(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.abandoned = append(c.abandoned, id)
}
func (c *heldCoord) lose(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost[id] = true
}

// sentInvocation is one invocation as the function saw it.
type sentInvocation struct {
	shard      string
	final      bool
	heldAtSend bool
}

// TestFinalWindowInvocationAsksTheLease: a tumbling window's final invocation goes through the
// same start check as a batch's (the audit's defect 4: it was made with the work context alone).
// Shard 0's final invocation waits for the one concurrency slot (reserved concurrency 1) that
// shard 1's slow batch holds; meanwhile shard 0's lease is lost. It must not be sent once the
// slot frees. Fails with closeWindow calling the invoker directly.
func TestFinalWindowInvocationAsksTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := fakekinesis.New()
		arn := fk.CreateStream("w", 2)
		shards := fk.OpenShards("w")
		coord := &heldCoord{lost: map[string]bool{}}
		var mu sync.Mutex
		var log []sentInvocation
		release := make(chan struct{})
		blocked := false
		rec := invoke.InvokerFunc(func(ctx context.Context, payload []byte) (invoke.Response, error) {
			var ev struct {
				Records []struct {
					EventID string `json:"eventID"`
				} `json:"Records"`
				ShardID string `json:"shardId"`
				Final   bool   `json:"isFinalInvokeForWindow"`
			}
			if err := json.Unmarshal(payload, &ev); err != nil {
				t.Error(err)
			}
			shard := ev.ShardID
			if len(ev.Records) > 0 {
				shard = strings.SplitN(ev.Records[0].EventID, ":", 2)[0]
			}
			mu.Lock()
			log = append(log, sentInvocation{shard: shard, final: ev.Final, heldAtSend: coord.Held(shard)})
			block := shard == shards[1] && !ev.Final && !blocked
			blocked = blocked || block
			mu.Unlock()
			if block {
				<-release // shard 1's slow batch holds the only slot
			}
			return invoke.Response{StatusCode: 200, Payload: []byte(`{"state":{"n":"1"}}`)}, nil
		})
		cfg := Config{BatchSize: 10, StartingPosition: TrimHorizon, PollInterval: 50 * time.Millisecond,
			ClaimInterval: 100 * time.Millisecond, TumblingWindow: time.Second, ShutdownGrace: 2 * time.Second}
		p, err := New(kinesisSource(fk, arn), cfg, NewMemoryStore(), invoke.Limit(rec, 1), WithCoordinator(coord), WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = p.Run(ctx); close(done) }()

		fk.PutToShard("w", shards[0], "k", []byte(`{}`)) // shard 0 opens a window
		time.Sleep(500 * time.Millisecond)
		fk.PutToShard("w", shards[1], "k", []byte(`{}`)) // shard 1's batch takes the slot and holds it
		time.Sleep(2500 * time.Millisecond)              // shard 0's window ends: its final invocation waits for the slot
		coord.lose(shards[0])                            // the lease horizon passes meanwhile
		time.Sleep(200 * time.Millisecond)
		close(release)
		time.Sleep(time.Second)
		cancel()
		<-done

		mu.Lock()
		defer mu.Unlock()
		finals := 0
		for _, s := range log {
			t.Logf("invocation of %s final=%v held=%v", s.shard, s.final, s.heldAtSend)
			if s.final && s.shard == shards[1] {
				finals++
			}
			if !s.heldAtSend {
				t.Errorf("invocation of %s (final: %v) sent while the shard's lease was no longer held", s.shard, s.final)
			}
		}
		if !blocked || finals == 0 {
			t.Fatalf("the schedule did not run as planned: shard 1 blocked %v, its final invocations %d", blocked, finals)
		}
	})
}

// ambiguousFunction plays a function host whose first invocation's connection is reset after the
// request arrived: the invoker reports invoke.ErrAmbiguous while the function runs on for runFor.
// It records each invocation's run.
type ambiguousFunction struct {
	runFor time.Duration
	mu     sync.Mutex
	runs   [][2]time.Time
}

func (f *ambiguousFunction) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	if err := invoke.CheckStart(ctx); err != nil {
		return invoke.Response{}, err
	}
	f.mu.Lock()
	n := len(f.runs)
	f.runs = append(f.runs, [2]time.Time{time.Now(), time.Now().Add(f.runFor)})
	f.mu.Unlock()
	if n == 0 {
		time.Sleep(300 * time.Millisecond)
		return invoke.Response{}, fmt.Errorf("%w: read tcp: connection reset by peer", invoke.ErrAmbiguous)
	}
	time.Sleep(f.runFor)
	return invoke.Response{StatusCode: 200, Payload: []byte(`{}`)}, nil
}

func (f *ambiguousFunction) overlaps() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for i, x := range f.runs {
		for _, y := range f.runs[i+1:] {
			if x[0].Before(y[1]) && y[0].Before(x[1]) {
				out = append(out, fmt.Sprintf("%v..%v and %v..%v", x[0], x[1], y[0], y[1]))
			}
		}
	}
	return out
}

// TestAmbiguousFailureHoldsTheShard: an invocation that failed after its request was sent (a
// reset: the function runs on) is not followed by the shard's next invocation until the
// invocation bound has passed since its send (the audit's defect 2: it was retried a second
// later, while the first still ran). Fails with send ignoring invoke.ErrAmbiguous.
func TestAmbiguousFailureHoldsTheShard(t *testing.T) {
	for _, pf := range []int{1, 3} {
		t.Run(fmt.Sprintf("PF%d", pf), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fk := fakekinesis.New()
				arn := fk.CreateStream("s", 1)
				fk.Put("s", "k", []byte(`{}`))
				fn := &ambiguousFunction{runFor: 4 * time.Second}
				cfg := Config{StartingPosition: TrimHorizon, PollInterval: 50 * time.Millisecond, ParallelizationFactor: pf}
				p, err := New(kinesisSource(fk, arn), cfg, NewMemoryStore(), fn, WithInvocationBound(5*time.Second), WithLogger(slog.New(slog.DiscardHandler)))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				_ = p.Run(ctx)
				fn.mu.Lock()
				runs := len(fn.runs)
				gap := time.Duration(0)
				if runs >= 2 {
					gap = fn.runs[1][0].Sub(fn.runs[0][0])
				}
				fn.mu.Unlock()
				if runs < 2 {
					t.Fatalf("%d invocations, want the ambiguous one and its retry", runs)
				}
				if o := fn.overlaps(); len(o) > 0 || gap < 5*time.Second {
					t.Errorf("the retry was sent %v after the ambiguous invocation (bound 5 s); overlapping: %v", gap, o)
				}
			})
		})
	}
}

// TestAmbiguousFailureAtStopAbandonsTheLease: a reader stopped while an invocation that failed
// ambiguously may still run does not hand its lease over (Release) but abandons it, so that the
// next owner waits for the invocation bound. Fails with mayStillRun ignoring runsUntil.
func TestAmbiguousFailureAtStopAbandonsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := fakekinesis.New()
		arn := fk.CreateStream("s", 1)
		fk.Put("s", "k", []byte(`{}`))
		fn := &ambiguousFunction{runFor: 4 * time.Second}
		coord := &heldCoord{lost: map[string]bool{}}
		cfg := Config{StartingPosition: TrimHorizon, PollInterval: 50 * time.Millisecond, ClaimInterval: 100 * time.Millisecond}
		p, err := New(kinesisSource(fk, arn), cfg, NewMemoryStore(), fn, WithCoordinator(coord), WithInvocationBound(30*time.Second),
			WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // stopped while the first may still run
		defer cancel()
		_ = p.Run(ctx)
		coord.mu.Lock()
		defer coord.mu.Unlock()
		if len(coord.abandoned) != 1 || len(coord.released) != 0 {
			t.Errorf("abandoned %v, released %v: want the shard abandoned, not handed over", coord.abandoned, coord.released)
		}
		fn.mu.Lock()
		defer fn.mu.Unlock()
		if len(fn.runs) != 1 {
			t.Errorf("%d invocations before the stop, want 1", len(fn.runs))
		}
	})
}

// TestTrimmedShardWithAmbiguousInvocationHoldsItsChildren: a parent trimmed by retention while
// an invocation of it may still run (its connection reset, the function running on) is not
// counted as done: its children start once the invocation bound has passed since that send, not
// when the trim stops its reader (the simulation's seed 247 with the reset fault: children
// invoked while the parent's invocation ran). Fails without the coordinator's wait in start.
func TestTrimmedShardWithAmbiguousInvocationHoldsItsChildren(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := fakekinesis.New()
		arn := fk.CreateStream("s", 1)
		fk.Put("s", "k", []byte(`{}`))
		kids := fk.Split("s", "shardId-000000000000")
		var mu sync.Mutex
		starts := map[string][]time.Time{}
		inv := invoke.InvokerFunc(func(ctx context.Context, payload []byte) (invoke.Response, error) {
			if err := invoke.CheckStart(ctx); err != nil {
				return invoke.Response{}, err
			}
			var ev struct {
				Records []struct {
					EventID string `json:"eventID"`
				} `json:"Records"`
			}
			if err := json.Unmarshal(payload, &ev); err != nil {
				t.Error(err)
			}
			shard, _, _ := strings.Cut(ev.Records[0].EventID, ":")
			mu.Lock()
			starts[shard] = append(starts[shard], time.Now())
			first := shard == "shardId-000000000000" && len(starts[shard]) == 1
			mu.Unlock()
			if first { // reset after 300 ms; the function runs on for 4 s
				time.Sleep(300 * time.Millisecond)
				return invoke.Response{}, fmt.Errorf("%w: connection reset", invoke.ErrAmbiguous)
			}
			return invoke.Response{StatusCode: 200, Payload: []byte(`{}`)}, nil
		})
		cfg := Config{StartingPosition: TrimHorizon, PollInterval: 50 * time.Millisecond, ShardSyncInterval: 100 * time.Millisecond}
		p, err := New(kinesisSource(fk, arn), cfg, NewMemoryStore(), inv, WithInvocationBound(5*time.Second), WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = p.Run(ctx); close(done) }()
		time.Sleep(time.Second) // the parent's invocation failed ambiguously and waits for the bound
		fk.Trim("s", "shardId-000000000000")
		for _, kid := range kids {
			fk.PutToShard("s", kid, "k", []byte(`{}`))
		}
		time.Sleep(10 * time.Second)
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		sent := starts["shardId-000000000000"]
		if len(sent) == 0 {
			t.Fatal("the parent was never invoked")
		}
		for _, kid := range kids {
			if len(starts[kid]) == 0 {
				t.Errorf("child %s never invoked", kid)
			} else if gap := starts[kid][0].Sub(sent[0]); gap < 5*time.Second {
				t.Errorf("child %s invoked %v after its parent's ambiguous invocation was sent, within the bound (5 s)", kid, gap)
			}
		}
	})
}
