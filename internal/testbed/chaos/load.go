package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/internal/ctxwait"
	"github.com/kinesis-esm/esm/internal/testbed/local"
)

// produce puts one record of each key every 250 ms, the next of a key only once the previous one
// was accepted, so that each key's records are in the stream in order.
func (r *runner) produce(ctx context.Context) error {
	keys := make([]string, r.cfg.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key%02d", i)
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		r.mu.Lock()
		in := &kinesis.PutRecordsInput{StreamName: aws.String(r.stream)}
		for _, k := range keys {
			in.Records = append(in.Records, types.PutRecordsRequestEntry{PartitionKey: aws.String(k),
				Data: []byte(k + ":" + strconv.Itoa(r.produced.Written[k]))})
		}
		r.mu.Unlock()
		out, err := r.kc.PutRecords(ctx, in)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.cfg.Logf("put records: %v (retrying)", err)
			continue
		}
		now := time.Now()
		r.mu.Lock()
		for i, e := range out.Records {
			if e.ErrorCode != nil {
				continue
			}
			r.produced.Written[keys[i]]++
			if s := aws.ToString(e.ShardId); r.produced.FirstPut[s].IsZero() {
				r.produced.FirstPut[s] = now
			}
		}
		r.mu.Unlock()
	}
}

// reshard splits, merges and rescales the stream under load: a split at 15% of the duration, a
// merge at 35%, UpdateShardCount to 4 at 55% and to 2 at 75%. Half the time a worker is paused
// past its lease (mid-invocation) just before the change, so that the others finish (and clean
// up) the parents while it sleeps.
func (r *runner) reshard(ctx context.Context, rng *rand.Rand) {
	start := time.Now()
	steps := []struct {
		at   float64
		name string
		do   func(context.Context) (string, error)
	}{
		{0.15, "split", func(ctx context.Context) (string, error) {
			open, err := local.OpenShards(ctx, r.kc, r.stream)
			if err != nil || len(open) == 0 {
				return "", cmp.Or(err, errors.New("no open shard"))
			}
			id := aws.ToString(open[rng.IntN(len(open))].ShardId)
			return "split " + id, local.SplitInHalf(ctx, r.kc, r.stream, id)
		}},
		{0.35, "merge", func(ctx context.Context) (string, error) {
			a, b, err := local.MergeFirstAdjacent(ctx, r.kc, r.stream)
			return "merge " + a + " " + b, err
		}},
		{0.55, "update", func(ctx context.Context) (string, error) {
			return "UpdateShardCount 4", local.Resize(ctx, r.kc, r.stream, 4)
		}},
		{0.75, "update", func(ctx context.Context) (string, error) {
			return "UpdateShardCount 2", local.Resize(ctx, r.kc, r.stream, 2)
		}},
	}
	var pauses sync.WaitGroup
	defer pauses.Wait()
	for _, s := range steps {
		at := start.Add(time.Duration(s.at * float64(r.cfg.Duration)))
		if rng.IntN(2) == 0 {
			pauseAt := at.Add(-1300 * time.Millisecond)
			if !ctxwait.Sleep(ctx, time.Until(pauseAt)) {
				return
			}
			if i, ok := r.claim(rng); ok {
				r.fn.SlowFor(r.workers[i].ID, time.Second) // paused 1 s later, mid-invocation
				d := r.cfg.LeaseDuration + time.Duration(2000+rng.IntN(3000))*time.Millisecond
				pauses.Go(func() {
					ctxwait.Sleep(ctx, time.Second)
					r.pause(ctx, i, d, "sigstop across a reshard")
				})
			}
		}
		if !ctxwait.Sleep(ctx, time.Until(at)) {
			return
		}
		before, _ := local.OpenShards(ctx, r.kc, r.stream)
		what, err := s.do(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logf("reshard %s: %v", s.name, err)
				r.counts.AddKind("reshard failed")
			}
			continue
		}
		after, _ := local.OpenShards(ctx, r.kc, r.stream)
		r.counts.AddKind(s.name)
		r.mu.Lock()
		r.reshards = append(r.reshards, fmt.Sprintf("%s: %d → %d open shards", what, len(before), len(after)))
		r.mu.Unlock()
	}
}

// claim picks a running worker that is under no other fault and marks it busy.
func (r *runner) claim(rng *rand.Rand) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var free []int
	for i, w := range r.workers {
		if !r.busy[i] && w.Running() {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return 0, false
	}
	i := free[rng.IntN(len(free))]
	r.busy[i] = true
	return i, true
}

// restartExited starts again the workers that exited on their own.
func (r *runner) restartExited() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.workers {
		if !r.busy[i] && !w.Running() {
			if err := w.Start(); err != nil {
				r.cfg.Logf("restart %s: %v", w.ID, err)
			}
		}
	}
}

func (r *runner) release(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.busy[i] = false
}

func (r *runner) record(kind string, i int, from time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, FaultEvent{Kind: kind, Worker: r.workers[i].ID, From: from, To: time.Now()})
	r.counts.AddKind(kind)
}

// pause stops worker i for d (past its lease), then resumes it.
func (r *runner) pause(ctx context.Context, i int, d time.Duration, kind string) {
	defer r.release(i)
	w := r.workers[i]
	from := time.Now()
	w.Pause()
	ctxwait.Sleep(ctx, d)
	w.Resume()
	r.record(kind, i, from)
}

// processKinds and partitionKinds are the faults the schedule deals, one worker at a time.
var faultKinds = []string{"partition dynamodb", "partition kinesis", "partition dynamodb+kinesis", "partition function",
	"sigkill", "sigstop", "sigterm"}

// faults deals faults to the workers from a shuffled deck of every kind, one every 1–3 s after
// the previous one ended, after a 2–4 s start. It restarts a worker that exited on its own (the
// judge reports the exit).
func (r *runner) faults(ctx context.Context, rng *rand.Rand) {
	if !ctxwait.Sleep(ctx, time.Duration(2000+rng.IntN(2000))*time.Millisecond) {
		return
	}
	var deck []string
	for {
		r.restartExited()
		if len(deck) == 0 {
			deck = slices.Clone(faultKinds)
			rng.Shuffle(len(deck), func(a, b int) { deck[a], deck[b] = deck[b], deck[a] })
		}
		kind := deck[0]
		deck = deck[1:]
		i, ok := r.claim(rng)
		if ok {
			if kind != "sigterm" { // a stop waits for its invocations anyway
				r.fn.SlowFor(r.workers[i].ID, 1500*time.Millisecond)
				ctxwait.Sleep(ctx, time.Second)
			}
			r.inject(ctx, rng, i, kind)
		}
		if !ctxwait.Sleep(ctx, time.Duration(1000+rng.IntN(2000))*time.Millisecond) {
			return
		}
	}
}

// inject applies one fault to worker i (claimed) and waits for its end.
func (r *runner) inject(ctx context.Context, rng *rand.Rand, i int, kind string) {
	w := r.workers[i]
	lease := r.cfg.LeaseDuration
	from := time.Now()
	switch kind {
	case "sigstop":
		r.pause(ctx, i, lease+time.Duration(500+rng.IntN(4500))*time.Millisecond, kind)
		return
	case "sigkill":
		defer r.release(i)
		w.Kill()
		r.record(kind, i, from)
		ctxwait.Sleep(context.WithoutCancel(ctx), time.Duration(500+rng.IntN(2500))*time.Millisecond)
		if err := w.Start(); err != nil {
			r.cfg.Logf("restart %s: %v", w.ID, err)
		}
		return
	case "sigterm":
		defer r.release(i)
		w.AwaitLogging(10 * time.Second)
		from = time.Now()
		if err := w.Term(termWait); err != nil {
			r.cfg.Logf("%v", err)
		}
		r.record(kind, i, from)
		if err := w.Start(); err != nil {
			r.cfg.Logf("restart %s: %v", w.ID, err)
			return
		}
		if rng.IntN(2) == 0 { // again, while it starts (describing the stream and the lease table)
			w.AwaitLogging(10 * time.Second)
			ctxwait.Sleep(context.WithoutCancel(ctx), time.Duration(rng.IntN(1000))*time.Millisecond)
			from = time.Now()
			if err := w.Term(termWait); err != nil {
				r.cfg.Logf("%v", err)
			}
			r.record("sigterm at start-up", i, from)
			if err := w.Start(); err != nil {
				r.cfg.Logf("restart %s: %v", w.ID, err)
			}
		}
		return
	}
	defer r.release(i)
	var cut []Service
	switch kind {
	case "partition dynamodb":
		cut = []Service{DynamoDB}
	case "partition kinesis":
		cut = []Service{Kinesis}
	case "partition dynamodb+kinesis":
		cut = []Service{DynamoDB, Kinesis}
	case "partition function":
		cut = []Service{Function}
	}
	for _, s := range cut {
		w.Proxy.Partition(s)
	}
	ctxwait.Sleep(ctx, lease+time.Duration(500+rng.IntN(4500))*time.Millisecond)
	for _, s := range cut {
		w.Proxy.Heal(s)
	}
	r.record(kind, i, from)
}
