package poller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

// TestPollGridDefaults: PollGrid is 50 ms by default, or PollInterval when that is shorter (so a
// short PollInterval alone is accepted), at most PollInterval when set, and never negative.
func TestPollGridDefaults(t *testing.T) {
	base := Config{StartingPosition: TrimHorizon}
	for _, tt := range []struct {
		name             string
		interval, grid   time.Duration
		wantInterval     time.Duration
		wantGrid         time.Duration
		wantErr, wantMsg string
	}{
		{name: "defaults", wantInterval: time.Second, wantGrid: DefaultPollGrid},
		{name: "a PollInterval below the default grid", interval: 20 * time.Millisecond, wantInterval: 20 * time.Millisecond, wantGrid: 20 * time.Millisecond},
		{name: "a PollInterval of the default grid", interval: DefaultPollGrid, wantInterval: DefaultPollGrid, wantGrid: DefaultPollGrid},
		{name: "a grid of its own", interval: 2 * time.Second, grid: 30 * time.Millisecond, wantInterval: 2 * time.Second, wantGrid: 30 * time.Millisecond},
		{name: "a grid of PollInterval", interval: 200 * time.Millisecond, grid: 200 * time.Millisecond, wantInterval: 200 * time.Millisecond, wantGrid: 200 * time.Millisecond},
		{name: "a grid of the default PollInterval", grid: time.Second, wantInterval: time.Second, wantGrid: time.Second},
		{name: "a grid above PollInterval", interval: 20 * time.Millisecond, grid: 21 * time.Millisecond, wantErr: "PollGrid", wantMsg: "PollGrid 21ms must be at most PollInterval 20ms"},
		{name: "a grid above the default PollInterval", grid: 2 * time.Second, wantErr: "PollGrid", wantMsg: "PollGrid 2s must be at most PollInterval 1s"},
		{name: "a negative grid", grid: -time.Millisecond, wantErr: "PollGrid", wantMsg: "PollGrid -1ms must be positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			c.PollInterval, c.PollGrid = tt.interval, tt.grid
			err := c.Validate("")
			if tt.wantErr != "" {
				var ve *ValidationError
				if !errors.As(err, &ve) || !errors.Is(err, ErrInvalidConfig) || ve.Field != tt.wantErr || ve.Message != tt.wantMsg {
					t.Fatalf("Validate = %v, want a %s ValidationError %q", err, tt.wantErr, tt.wantMsg)
				}
				return
			}
			got := c.Defaults()
			if err != nil || got.PollInterval != tt.wantInterval || got.PollGrid != tt.wantGrid {
				t.Fatalf("Validate, Defaults: PollInterval %s, PollGrid %s, %v; want %s, %s", got.PollInterval, got.PollGrid, err, tt.wantInterval, tt.wantGrid)
			}
			if _, err := New(kinesisSource(fakekinesis.New(), testStreamARN), c, NewMemoryStore(), inprocess.New(func() error { return nil })); err != nil {
				t.Fatalf("New of a valid configuration: %v", err)
			}
		})
	}
}

// TestNextPoll: a caught-up shard's next poll is PollInterval after the last, on the nearest
// multiple of PollGrid since the Unix epoch, never closer to the last than MinPollSpacing (or
// PollInterval, when that is shorter); off the grid when asked (a subscribed reader).
func TestNextPoll(t *testing.T) {
	ms := func(n int64) time.Time { return time.UnixMilli(1_700_000_000_100 + n) } // ms(0) is on every grid below
	cfg := Config{PollInterval: time.Second, PollGrid: 50 * time.Millisecond, MinPollSpacing: 200 * time.Millisecond}
	wideGrid := Config{PollInterval: 300 * time.Millisecond, PollGrid: 300 * time.Millisecond, MinPollSpacing: 200 * time.Millisecond}
	fast := Config{PollInterval: 100 * time.Millisecond, PollGrid: 50 * time.Millisecond, MinPollSpacing: 200 * time.Millisecond}
	for _, tt := range []struct {
		name   string
		cfg    Config
		last   time.Time
		onGrid bool
		want   time.Time
	}{
		{"on the grid: PollInterval later", cfg, ms(0), true, ms(1000)},
		{"just after a grid point: back to it", cfg, ms(17), true, ms(1000)},
		{"just before a grid point: on to it", cfg, ms(-17), true, ms(1000)},
		{"past the middle: the next point", cfg, ms(30), true, ms(1050)},
		{"half-way: the later point", cfg, ms(25), true, ms(1050)},
		{"off the grid: PollInterval later", cfg, ms(17), false, ms(1017)},
		{"before 1970", cfg, time.UnixMilli(-1983), true, time.UnixMilli(-1000)},
		{"the point before is within MinPollSpacing: MinPollSpacing later", wideGrid, ms(140), true, ms(340)},
		{"the point after is beyond MinPollSpacing", wideGrid, ms(160), true, ms(600)},
		{"a PollInterval below MinPollSpacing: never sooner than it", fast, ms(10), true, ms(110)},
		{"a PollInterval below MinPollSpacing, rounded up", fast, ms(30), true, ms(150)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := nextPoll(&tt.cfg, tt.last, tt.onGrid); !got.Equal(tt.want) {
				t.Fatalf("nextPoll(%s) = %s, want %s", tt.last.Format(time.StampMilli), got.Format(time.StampMilli), tt.want.Format(time.StampMilli))
			}
		})
	}
	// In pollWait: the caught-up wait is until the grid point; the behind wait is not moved.
	caughtUp := pollState{lastPoll: ms(17)}
	if wait, _ := caughtUp.pollWait(&cfg, ms(100), false); wait != 900*time.Millisecond {
		t.Fatalf("caught up: pollWait = %s, want 900ms (to the grid point at 1 s)", wait)
	}
	behind := pollState{lastPoll: ms(17), behind: true}
	if wait, _ := behind.pollWait(&cfg, ms(100), false); wait != 117*time.Millisecond {
		t.Fatalf("behind: pollWait = %s, want 117ms (MinPollSpacing after the last read)", wait)
	}
}

// gridPoll is one GetRecords call a shard got: when it started and how many records it returned.
type gridPoll struct {
	at      time.Time
	records int
}

// gridKinesis is the fake Kinesis recording each shard's GetRecords calls. A shard's first
// GetShardIterator is held for its delay, so that its reads start at that offset.
type gridKinesis struct {
	*fakekinesis.Fake
	arn   string                   // the stream s
	delay map[string]time.Duration // by shard ID; read only
	mu    sync.Mutex
	shard map[string]string     // iterator → shard ID
	polls map[string][]gridPoll // by shard ID
}

// newGridKinesis is a fake with stream s of the shards given, read after the delays given.
func newGridKinesis(shards int, delay map[string]time.Duration) *gridKinesis {
	f := fakekinesis.New()
	return &gridKinesis{Fake: f, arn: f.CreateStream("s", shards), delay: delay, shard: map[string]string{}, polls: map[string][]gridPoll{}}
}

func (k *gridKinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	k.mu.Lock()
	first := k.polls[*in.ShardId] == nil
	k.mu.Unlock()
	if d := k.delay[*in.ShardId]; first && d > 0 {
		time.Sleep(d) // virtual time
	}
	out, err := k.Fake.GetShardIterator(ctx, in, opts...)
	if err == nil {
		k.mu.Lock()
		k.shard[*out.ShardIterator] = *in.ShardId
		k.mu.Unlock()
	}
	return out, err
}

func (k *gridKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	at := time.Now()
	out, err := k.Fake.GetRecords(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	id := k.shard[*in.ShardIterator]
	k.polls[id] = append(k.polls[id], gridPoll{at: at, records: len(out.Records)})
	if out.NextShardIterator != nil {
		k.shard[*out.NextShardIterator] = id
	}
	return out, err
}

// shardPolls is a copy of what shard got.
func (k *gridKinesis) shardPolls(shard string) []gridPoll {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.polls[shard])
}

// lateWake is a Coordinator that holds every shard, and answers Held, which is asked just before
// a read starts, no earlier than wake after the grid point: the reads of a grid point start that
// late, as a process woken by its timer runs a little later when it is busy. (Once per instant:
// the idle poller asks for every shard due then, one after the other.)
type lateWake struct{ wake time.Duration }

func (lateWake) Register(context.Context, []ShardInfo) error           { return nil }
func (lateWake) Claim(_ context.Context, c []string) ([]string, error) { return c, nil }
func (w lateWake) Held(string) bool {
	if off := time.Duration(time.Now().UnixNano() % int64(DefaultPollGrid)); off < w.wake {
		time.Sleep(w.wake - off)
	}
	return true
}
func (lateWake) Release(context.Context, string) error { return nil }

// runGridPoller runs a poller of cfg on k's stream s for d of virtual time, then stops it.
func runGridPoller(t *testing.T, k *gridKinesis, cfg Config, d time.Duration, opts ...Option) {
	t.Helper()
	cfg.StartingPosition, cfg.ShardSyncInterval = TrimHorizon, time.Hour
	p, err := New(kinesisSource(k, k.arn), cfg, NewMemoryStore(), inprocess.New(func() error { return nil }), opts...)
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := runPoller(t, p)
	time.Sleep(d)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func onGrid(at time.Time, grid time.Duration) bool { return at.UnixNano()%int64(grid) == 0 }

const shard1 = "shardId-000000000001" // with shard0 (blocked_test.go)

// TestIdlePollsAlignToTheGrid: an idle shard whose first poll starts 17 ms off the 50 ms grid
// polls next on the grid point nearest a second later, then exactly a second apart, on the grid.
func TestIdlePollsAlignToTheGrid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newGridKinesis(1, map[string]time.Duration{shard0: 17 * time.Millisecond})
		runGridPoller(t, k, Config{}, 10*time.Second)
		polls := k.shardPolls(shard0)
		if len(polls) < 9 {
			t.Fatalf("%d polls in 10 s, want about 10", len(polls))
		}
		if onGrid(polls[0].at, DefaultPollGrid) {
			t.Fatalf("the first poll %s is on the grid: the scenario needs it off", polls[0].at.Format(time.StampMilli))
		}
		for i, p := range polls {
			if p.records != 0 {
				t.Fatalf("poll %d returned %d records: the shard must be idle", i, p.records)
			}
			if i == 0 {
				continue
			}
			if !onGrid(p.at, DefaultPollGrid) {
				t.Fatalf("poll %d at %s is off the %s grid", i, p.at.Format(time.StampMilli), DefaultPollGrid)
			}
			if i > 1 && p.at.Sub(polls[i-1].at) != time.Second {
				t.Fatalf("polls %d and %d are %s apart, want PollInterval (1s)", i-1, i, p.at.Sub(polls[i-1].at))
			}
		}
		if gap := polls[1].at.Sub(polls[0].at); gap != time.Second-17*time.Millisecond {
			t.Fatalf("the first poll 17 ms off the grid is followed %s later, want 983ms (the nearest grid point)", gap)
		}
	})
}

// TestIdleShardsPollTogether: two idle shards whose reads start 30 ms and 70 ms after the start
// (either side of the 50 ms grid point) poll at the same instants from their second poll on.
func TestIdleShardsPollTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newGridKinesis(2, map[string]time.Duration{shard0: 30 * time.Millisecond, shard1: 70 * time.Millisecond})
		runGridPoller(t, k, Config{}, 10*time.Second)
		a, b := k.shardPolls(shard0), k.shardPolls(shard1)
		if len(a) < 9 || len(b) < 9 {
			t.Fatalf("%d and %d polls in 10 s, want about 10 each", len(a), len(b))
		}
		if got := b[0].at.Sub(a[0].at); got != 40*time.Millisecond {
			t.Fatalf("the first polls are %s apart, want 40ms: the scenario needs them apart", got)
		}
		n := min(len(a), len(b))
		for i := 1; i < n; i++ {
			if !a[i].at.Equal(b[i].at) {
				t.Fatalf("poll %d: %s and %s, want the same instant", i, a[i].at.Format(time.StampMilli), b[i].at.Format(time.StampMilli))
			}
		}
	})
}

// TestBehindPollsAreNotAligned: a shard that is behind (each read a full batch) is read
// MinPollSpacing after each read, 30 ms off the grid as it started (the nearest grid point is
// 20 ms later, so an aligned read would move); once it is caught up, its next poll is on the grid.
func TestBehindPollsAreNotAligned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newGridKinesis(1, map[string]time.Duration{shard0: 30 * time.Millisecond})
		for range 10 {
			k.Put("s", "k", []byte("r"))
		}
		runGridPoller(t, k, Config{BatchSize: 2}, 5*time.Second)
		polls := k.shardPolls(shard0)
		if len(polls) < 8 {
			t.Fatalf("%d polls in 5 s, want 6 behind and caught-up ones after", len(polls))
		}
		var got []int
		for _, p := range polls[:6] {
			got = append(got, p.records)
		}
		if !slices.Equal(got, []int{2, 2, 2, 2, 2, 0}) {
			t.Fatalf("the first reads returned %v records, want five full batches of 2, then none", got)
		}
		for i := 1; i < 6; i++ { // each read after a full batch: behind
			if gap := polls[i].at.Sub(polls[i-1].at); gap != DefaultMinPollSpacing || onGrid(polls[i].at, DefaultPollGrid) {
				t.Fatalf("read %d, behind: %s after the one before (want MinPollSpacing, %s), on the grid: %v (want off it)",
					i, gap, DefaultMinPollSpacing, onGrid(polls[i].at, DefaultPollGrid))
			}
		}
		for i := 6; i < len(polls); i++ { // after the empty read: caught up
			if !onGrid(polls[i].at, DefaultPollGrid) || polls[i].records != 0 {
				t.Fatalf("poll %d, caught up, at %s with %d records: want it on the grid", i, polls[i].at.Format(time.StampMilli), polls[i].records)
			}
		}
		if gap := polls[6].at.Sub(polls[5].at); gap != time.Second+20*time.Millisecond {
			t.Fatalf("the first caught-up poll came %s after the read that caught up, want 1.02s (the grid point nearest 1 s)", gap)
		}
	})
}

// TestIdlePollRateUnchanged: idle shards whose reads start 20 ms after they wake (lateWake) still
// poll once a second, 60 times a minute: the wake-up is on the grid point nearest a second after
// the last read, not the next one after it (which would add a grid step to every interval), and
// the lateness does not add up as it would without the grid (59 polls a minute).
func TestIdlePollRateUnchanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newGridKinesis(2, map[string]time.Duration{shard0: 10 * time.Millisecond, shard1: 40 * time.Millisecond})
		runGridPoller(t, k, Config{}, 65*time.Second, WithCoordinator(lateWake{wake: 20 * time.Millisecond}))
		for _, shard := range []string{shard0, shard1} {
			polls := k.shardPolls(shard)
			if len(polls) < 3 {
				t.Fatalf("%s: %d polls", shard, len(polls))
			}
			from := polls[1].at
			n := 0
			for _, p := range polls[1:] {
				if p.at.Before(from.Add(time.Minute)) {
					n++
				}
			}
			if n != 60 {
				t.Fatalf("%s: %d polls in the minute from its second poll, want 60 (1 a second)", shard, n)
			}
			if off := time.Duration(from.UnixNano() % int64(DefaultPollGrid)); off != 20*time.Millisecond {
				t.Fatalf("%s: its second read starts %s after a grid point, want the 20ms it starts after waking", shard, off)
			}
		}
	})
}
