package poller

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func TestBackoffPacing(t *testing.T) {
	bo := backoff{base: 100 * time.Millisecond, max: time.Second}
	// Exponential from base, capped at max, each pause in the upper half of its step.
	for i, step := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		step *= time.Millisecond
		if step > time.Second {
			step = time.Second
		}
		if d := bo.next(); d < step/2 || d > step {
			t.Fatalf("pause %d = %v, want within [%v, %v]", i+1, d, step/2, step)
		}
	}
	bo.n = 40 // far past the shift that would overflow: the cap
	if d := bo.next(); d < 500*time.Millisecond || d > time.Second {
		t.Fatalf("pause after 40 = %v, want within [500ms, 1s]", d)
	}
	bo.reset()
	if d := bo.next(); d < 50*time.Millisecond || d > 100*time.Millisecond {
		t.Fatalf("pause after reset = %v, want within [50ms, 100ms]", d)
	}
}

func TestRetry(t *testing.T) {
	errBoom := errors.New("boom")
	t.Run("returns what the attempt that is done gives", func(t *testing.T) {
		for _, want := range []error{nil, errBoom} {
			bo := backoff{base: time.Second, max: time.Second}
			calls := 0
			got := retry(context.Background(), &bo, func(int) (step, error) { calls++; return stepDone, want }, nil)
			if got != want || calls != 1 || bo.n != 0 {
				t.Fatalf("retry = %v after %d calls (%d pauses), want %v after 1 call and no pause", got, calls, bo.n, want)
			}
		}
	})
	t.Run("pauses after each failure, telling notify", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			bo := backoff{base: time.Second, max: 4 * time.Second}
			var (
				ns     []int
				pauses []time.Duration
			)
			start := time.Now()
			err := retry(t.Context(), &bo, func(n int) (step, error) {
				ns = append(ns, n)
				if n == 4 {
					return stepDone, nil
				}
				return stepRetry, errBoom
			}, func(err error, d time.Duration) {
				if err != errBoom {
					t.Errorf("notify got %v, want the attempt's error", err)
				}
				pauses = append(pauses, d)
			})
			if err != nil || len(ns) != 4 || ns[0] != 1 || ns[3] != 4 {
				t.Fatalf("retry = %v, attempts %v; want nil after attempts 1..4", err, ns)
			}
			var total time.Duration
			for i, d := range pauses {
				step := min(time.Second<<i, 4*time.Second)
				if d < step/2 || d > step {
					t.Fatalf("pause %d = %v, want within [%v, %v]", i+1, d, step/2, step)
				}
				total += d
			}
			if len(pauses) != 3 || time.Since(start) != total {
				t.Fatalf("%d pauses of %v in all, %v passed; want 3, slept in full", len(pauses), total, time.Since(start))
			}
		})
	})
	t.Run("a failure without an error pauses silently", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			bo := backoff{base: time.Second, max: time.Second}
			start := time.Now()
			err := retry(t.Context(), &bo, func(n int) (step, error) {
				if n == 2 {
					return stepDone, nil
				}
				return stepRetry, nil
			}, func(err error, d time.Duration) { t.Errorf("notify(%v, %v) for a failure without an error", err, d) })
			if err != nil || time.Since(start) < time.Second/2 {
				t.Fatalf("retry = %v after %v, want nil after one pause", err, time.Since(start))
			}
		})
	})
	t.Run("again goes on at once, paced from the start", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			bo := backoff{base: time.Second, max: time.Minute}
			var at []time.Duration
			start := time.Now()
			err := retry(t.Context(), &bo, func(n int) (step, error) {
				at = append(at, time.Since(start))
				switch n {
				case 1, 2, 4:
					return stepRetry, errBoom
				case 3:
					return stepAgain, nil
				}
				return stepDone, nil
			}, nil)
			if err != nil || len(at) != 5 {
				t.Fatalf("retry = %v after %d attempts, want nil after 5", err, len(at))
			}
			// Pauses: [0.5s,1s] after 1, [1s,2s] after 2, none after 3, [0.5s,1s] again after 4.
			if at[3] != at[2] {
				t.Fatalf("attempt 4 at %v, attempt 3 (again) at %v: want no pause", at[3], at[2])
			}
			if d := at[4] - at[3]; d < time.Second/2 || d > time.Second {
				t.Fatalf("pause after again = %v, want the first step's [0.5s, 1s]", d)
			}
		})
	})
	t.Run("a stop during a pause ends it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			bo := backoff{base: time.Hour, max: time.Hour}
			start := time.Now()
			time.AfterFunc(time.Second, cancel)
			calls := 0
			err := retry(ctx, &bo, func(int) (step, error) { calls++; return stepRetry, errBoom }, nil)
			if !errors.Is(err, errStopped) || calls != 1 || time.Since(start) != time.Second {
				t.Fatalf("retry = %v after %d calls and %v, want errStopped after 1 call, when ctx ended (1s)", err, calls, time.Since(start))
			}
			// An ended ctx does not pause at all.
			calls = 0
			if err := retry(ctx, &bo, func(int) (step, error) { calls++; return stepRetry, errBoom }, nil); !errors.Is(err, errStopped) || calls != 1 || time.Since(start) != time.Second {
				t.Fatalf("retry on an ended ctx = %v after %d calls and %v, want errStopped at once", err, calls, time.Since(start))
			}
		})
	})
}

// TestWithRandReplaysPauses: Pollers given sources of one seed pause alike, each backoff by its
// own source whatever the order in which the goroutines drew (the simulation replays a seed by
// them); differently named backoffs draw differently.
func TestWithRandReplaysPauses(t *testing.T) {
	draw := func(p *Poller, name string) []time.Duration {
		var out []time.Duration
		for _, bo := range []backoff{p.readPace(name), p.retryPace(name)} {
			for range 8 {
				out = append(out, bo.next())
			}
		}
		return out
	}
	seeded := func() *Poller {
		p := &Poller{retryBase: time.Second, retryMax: 5 * time.Second}
		WithRand(rand.New(rand.NewPCG(427, 1)))(p)
		return p
	}
	p1, p2 := seeded(), seeded()
	a1 := draw(p1, "shard-1 batch 7")
	draw(p2, "shard-2 batch 9") // another goroutine drew first
	a2 := draw(p2, "shard-1 batch 7")
	if !slices.Equal(a1, a2) {
		t.Fatalf("pauses of one name under one seed differ with the order of the draws:\n%v\n%v", a1, a2)
	}
	if b := draw(p1, "shard-2 batch 9"); slices.Equal(a1, b) {
		t.Fatalf("two backoffs drew the same pauses: %v", b)
	}
}
