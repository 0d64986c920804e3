package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"
)

// Schedule is everything one seed does: the mapping's settings and the timed events.
type Schedule struct {
	Seed   int64
	Shards int // at creation
	Keys   int

	Latest        bool // StartingPosition LATEST (else TRIM_HORIZON)
	Workers       int  // > 1: workers share the shards through lease.Dynamo on fakedynamo
	LeaseDuration time.Duration
	// Leases, when set, is each worker slot's own lease duration (a rolling change of
	// --lease-duration; leasefaults.go).
	Leases              []time.Duration
	PF, BatchSize       int
	Bisect, Partial     bool
	Retries             int // MaximumRetryAttempts (-1: forever)
	Window              time.Duration
	Filter              bool
	FileStore           bool
	PollInterval        time.Duration
	ShardSync           time.Duration
	IteratorTTL         time.Duration
	ListPageSize        int
	InvokeTime          time.Duration // typical invocation duration
	FunctionTimeout     time.Duration // the function's timeout: no invocation runs longer
	BatchWindow         time.Duration // MaximumBatchingWindowInSeconds
	FailRate, PoisonPct float64       // per invocation; per record (percent)

	// EFO: the mapping reads through a consumer, whose subscriptions last SubLifetime
	// (subscribe.go).
	EFO         bool
	SubLifetime time.Duration

	// Skips: an operator skips blocked batches (EvSkip, and after the last event until the
	// mapping is done; skip.go).
	Skips bool

	Events []Event
	Length time.Duration // time of the last event
}

// EventKind names what an Event does.
type EventKind string

// Event kinds.
const (
	EvPut    EventKind = "put"    // N records over the keys
	EvSplit  EventKind = "split"  // split an open shard
	EvMerge  EventKind = "merge"  // merge two adjacent open shards
	EvScale  EventKind = "scale"  // UpdateShardCount to N
	EvTrim   EventKind = "trim"   // retention removes a closed shard
	EvFault  EventKind = "fault"  // Fault active for D
	EvCrash  EventKind = "crash"  // the worker dies (memory lost, store kept); restarts after D
	EvFreeze EventKind = "freeze" // the worker stops for D (SIGSTOP)
	EvStop   EventKind = "stop"   // graceful stop; restarts after D
)

// Fault kinds a fault window can hold.
const (
	FKinThrottle  = "kinesis-throttle"
	FKin5xx       = "kinesis-5xx"
	FKinExpired   = "kinesis-iterator-expired"
	FKinDropped   = "kinesis-response-dropped"
	FKinList5xx   = "kinesis-listshards-5xx"
	FStoreDown    = "store-down"
	FStoreLostAck = "store-write-ok-response-lost"
	FDestDown     = "destination-down"
	FInvThrottle  = "invoke-throttled"
	FInvError     = "invoke-function-error"
	FInvTimeout   = "invoke-timeout"
	FInvPartial   = "invoke-partial-response"
	// FInvReset: the invocation's connection is reset after the request reached the function,
	// which runs on to its timeout while the worker sees an ambiguous failure.
	FInvReset = "invoke-reset-after-send"
)

// Per-worker fault kinds: a fault window that hits one worker (Event.W) while the others see
// everything. A partition refuses the worker's requests before they are sent; what was in
// flight when it began completes (an invocation keeps running at the function). A late write
// is a lease-table update or delete that times out at the worker and lands at DynamoDB later,
// once the partition it met has healed (a request queued in the network).
const (
	FCutDynamo   = "partition-dynamodb"
	FCutKinesis  = "partition-kinesis"
	FCutBoth     = "partition-dynamodb-and-kinesis"
	FCutFunction = "partition-function"
	FLateWrite   = "dynamodb-write-lands-late"
)

var workerFaultKinds = []string{FCutDynamo, FCutKinesis, FCutBoth, FCutFunction}

var faultKinds = []string{FKinThrottle, FKin5xx, FKinExpired, FKinDropped, FKinList5xx, FStoreDown, FStoreLostAck,
	FDestDown, FInvThrottle, FInvError, FInvTimeout, FInvPartial, FInvReset}

// Event is one step of a schedule.
type Event struct {
	At    time.Duration
	Kind  EventKind
	W     int // the worker a crash, freeze or stop hits
	N     int
	D     time.Duration
	Fault string
	// OneWorker: the fault hits worker slot W only.
	OneWorker bool
}

func (e Event) String() string {
	s := fmt.Sprintf("%8s %s", e.At.Round(time.Millisecond), e.Kind)
	if e.Fault != "" {
		s += " " + e.Fault
	}
	if e.N != 0 {
		s += fmt.Sprintf(" n=%d", e.N)
	}
	if e.Kind == EvCrash || e.Kind == EvFreeze || e.Kind == EvStop || e.OneWorker {
		s += fmt.Sprintf(" worker-slot=%d", e.W)
	}
	if e.D != 0 {
		s += fmt.Sprintf(" for %s", e.D.Round(time.Millisecond))
	}
	return s
}

// leaseSchedules turns on schedules with several workers sharing the shards through the real
// lease.Dynamo over fake/fakedynamo for every seed (ESM_SIM_LEASES=1, make sim LEASES=1);
// the CI budget runs a few of them (leaseBudgetSeeds).
var leaseSchedules = os.Getenv("ESM_SIM_LEASES") == "1"

// Generate derives a schedule from a seed.
func Generate(seed int64) Schedule { return generate(seed, leaseSchedules) }

// GenerateWithLeases derives a seed's schedule as with ESM_SIM_LEASES=1.
func GenerateWithLeases(seed int64) Schedule { return generate(seed, true) }

func generate(seed int64, leaseSchedules bool) Schedule {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	pick := func(p float64) bool { return rng.Float64() < p }
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	s := Schedule{
		Seed:         seed,
		Shards:       1 + rng.IntN(4),
		Keys:         5 + rng.IntN(60),
		PF:           1,
		BatchSize:    1 + rng.IntN(20),
		Bisect:       pick(0.5),
		Partial:      pick(0.5),
		Retries:      -1,
		FileStore:    pick(0.3),
		PollInterval: dur(100*time.Millisecond, time.Second),
		ShardSync:    dur(time.Second, 15*time.Second),
		IteratorTTL:  5 * time.Minute,
		ListPageSize: 1000,
		InvokeTime:   dur(time.Millisecond, 300*time.Millisecond),
		FailRate:     0.05 * rng.Float64(),
	}
	s.Workers = 1
	if multi, workers, lease := pick(0.35), 2+rng.IntN(2), dur(3*time.Second, 10*time.Second); multi && leaseSchedules {
		s.Workers, s.FileStore, s.LeaseDuration = workers, false, lease
	}
	if pick(0.5) {
		s.PF = 2 + rng.IntN(9)
	}
	if pick(0.25) {
		s.Keys = 1 + rng.IntN(3) // hot keys: few slots busy
	}
	if pick(0.2) {
		s.InvokeTime = dur(500*time.Millisecond, 3*time.Second) // slow function: batches long in flight
		s.BatchSize = max(s.BatchSize, 10)                      // (and big enough to keep up)
	}
	if pick(0.2) {
		s.ShardSync = dur(200*time.Millisecond, time.Second)
	}
	if pick(0.6) {
		s.Retries = rng.IntN(4)
		if pick(0.6) {
			s.PoisonPct = 0.5 + 2*rng.Float64()
		}
	}
	if s.PF == 1 && pick(0.35) {
		s.Window = time.Duration(1+rng.IntN(20)) * time.Second
	}
	s.Filter = pick(0.3)
	if pick(0.4) {
		s.IteratorTTL = dur(2*time.Second, 20*time.Second)
	}
	if pick(0.5) {
		s.ListPageSize = 1 + rng.IntN(3)
	}

	length := dur(time.Minute, 4*time.Minute)
	add := func(e Event) { s.Events = append(s.Events, e) }
	first := time.Duration(0)
	if pick(0.25) {
		// LATEST: producers start a second after the worker, and the worker often goes down
		// before its first checkpoint, while records are written.
		s.Latest, first = true, time.Second
		if pick(0.6) {
			kind := EvCrash
			if pick(0.5) {
				kind = EvStop
			}
			add(Event{At: dur(200*time.Millisecond, 900*time.Millisecond), Kind: kind, D: dur(time.Second, 3*time.Second)})
		}
	}
	// Producers: bursts over the keys.
	for at := first; at < length; at += dur(50*time.Millisecond, 2*time.Second) {
		add(Event{At: at, Kind: EvPut, N: 1 + rng.IntN(30)})
	}
	at := func() time.Duration { return dur(time.Second, length) }
	// A reshard is often followed closely by retention trimming the oldest closed shard, maybe
	// the parent just closed, whose last batch may still be in flight.
	reshard := func(kind EventKind) {
		t := at()
		add(Event{At: t, Kind: kind})
		if pick(0.5) {
			add(Event{At: t + dur(100*time.Millisecond, 2*time.Second), Kind: EvTrim})
		}
	}
	for range rng.IntN(4) {
		reshard(EvSplit)
	}
	for range rng.IntN(3) {
		reshard(EvMerge)
	}
	for range rng.IntN(2) {
		add(Event{At: at(), Kind: EvScale, N: 1 + rng.IntN(6)})
	}
	for range rng.IntN(3) {
		add(Event{At: at(), Kind: EvTrim})
	}
	for range rng.IntN(8) {
		f := faultKinds[rng.IntN(len(faultKinds))]
		add(Event{At: at(), Kind: EvFault, Fault: f, D: dur(100*time.Millisecond, 10*time.Second)})
	}
	if pick(0.3) { // a store outage long enough that the mapping gives up and exits
		add(Event{At: at(), Kind: EvFault, Fault: FStoreDown, D: dur(40*time.Second, 90*time.Second)})
	}
	for range rng.IntN(2 + s.Workers) {
		add(Event{At: at(), Kind: EvCrash, D: dur(0, 5*time.Second), W: rng.IntN(s.Workers)})
	}
	for range rng.IntN(1 + s.Workers) {
		add(Event{At: at(), Kind: EvFreeze, D: dur(time.Second, 40*time.Second), W: rng.IntN(s.Workers)})
	}
	for range rng.IntN(2) {
		add(Event{At: at(), Kind: EvStop, D: dur(0, 5*time.Second), W: rng.IntN(s.Workers)})
	}
	s.Length = length
	s.withSubscriptions()
	s.withUnkindFaults()
	s.withLeaseFaults()
	s.withSkips()
	s.withRewind(length)
	slices.SortStableFunc(s.Events, func(a, b Event) int { return int(a.At - b.At) })
	return s
}

func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: workers=%d lease=%s latest=%t shards=%d keys=%d PF=%d batch=%d bisect=%t partial=%t retries=%d window=%s filter=%t filestore=%t poll=%s sync=%s ttl=%s page=%d invoke=%s fail=%.3f poison=%.2f%%\n",
		s.Seed, s.Workers, s.LeaseDuration, s.Latest, s.Shards, s.Keys, s.PF, s.BatchSize, s.Bisect, s.Partial, s.Retries, s.Window, s.Filter, s.FileStore,
		s.PollInterval, s.ShardSync, s.IteratorTTL, s.ListPageSize, s.InvokeTime, s.FailRate, s.PoisonPct)
	fmt.Fprintf(&b, "  function timeout %s, batching window %s\n", s.FunctionTimeout, s.BatchWindow)
	if s.EFO {
		fmt.Fprintf(&b, "  read through a consumer; subscriptions last %s\n", s.SubLifetime)
	}
	if s.Skips {
		b.WriteString("  an operator skips blocked batches, and keeps skipping after the last event\n")
	}
	b.WriteString(s.leasesString())
	puts, n := 0, 0
	for _, e := range s.Events {
		if e.Kind == EvPut {
			puts++
			n += e.N
			continue
		}
		fmt.Fprintf(&b, "  %s\n", e)
	}
	fmt.Fprintf(&b, "  (%d put bursts, %d records, over %s)\n", puts, n, s.Length.Round(time.Second))
	return b.String()
}

// withUnkindFaults adds the faults that hit one worker while the others see everything, pauses
// mid-invocation and across another worker's clean-up of finished leases, slow functions (as
// long as the lease and longer) and batching windows. They come from their own random stream,
// so every seed's other events are the same as without them.
func (s *Schedule) withUnkindFaults() {
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0xfa17))
	pick := func(p float64) bool { return rng.Float64() < p }
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	at := func() time.Duration { return dur(time.Second, s.Length) }
	lease := s.LeaseDuration
	if pick(0.4) {
		// A batching window, and iterators that expire while records wait in it.
		s.BatchWindow = time.Duration(1+rng.IntN(4)) * time.Second
		s.BatchSize = max(s.BatchSize, 10+rng.IntN(90)) // big enough that records wait
		for range 1 + rng.IntN(3) {
			s.Events = append(s.Events, Event{At: at(), Kind: EvFault, Fault: FKinExpired, D: dur(100*time.Millisecond, 3*time.Second)})
		}
	}
	if s.Workers > 1 && pick(0.35) {
		// A function as slow as the lease or slower: an invocation outlasts a partition's
		// detection, and a pause often falls in the middle of one.
		s.InvokeTime = dur(lease/2, 2*lease)
		s.BatchSize = max(s.BatchSize, 50)
	}
	s.FunctionTimeout = max(3*time.Second, (2*s.InvokeTime).Truncate(time.Second)+time.Second)
	if pick(0.3) { // the function failing while the partitions below go on
		s.Events = append(s.Events, Event{At: at(), Kind: EvFault, Fault: FInvError, D: dur(time.Second, 10*time.Second)})
	}
	// Partitions of one worker: short ones, and (with leases) ones long enough for the others to
	// declare it dead, often while it invokes.
	for range rng.IntN(3 + 2*s.Workers) {
		kind := workerFaultKinds[rng.IntN(len(workerFaultKinds))]
		d := dur(100*time.Millisecond, 15*time.Second)
		if s.Workers > 1 && pick(0.6) {
			d = dur(lease/2, 4*lease)
		}
		e := Event{At: at(), Kind: EvFault, Fault: kind, D: d, W: rng.IntN(s.Workers), OneWorker: true}
		s.Events = append(s.Events, e)
		if s.Workers > 1 && (kind == FCutDynamo || kind == FCutBoth) && pick(0.4) {
			// Its lease-table writes meanwhile are held in the network and land after it heals.
			e.Fault = FLateWrite
			s.Events = append(s.Events, e)
		}
	}
	if s.Workers == 1 {
		return
	}
	if pick(0.5) {
		// One worker cut off from DynamoDB alone for longer than any takeover of its leases
		// can wait (the lease plus the function timeout), while it can still read and invoke.
		d := lease + 2*s.FunctionTimeout + dur(0, lease)
		e := Event{At: at(), Kind: EvFault, Fault: FCutDynamo, D: d, W: rng.IntN(s.Workers), OneWorker: true}
		s.Events = append(s.Events, e)
		if pick(0.5) {
			e.Fault = FLateWrite
			s.Events = append(s.Events, e)
		}
	}
	// Pauses at any instant, past the lease.
	for range rng.IntN(1 + s.Workers) {
		s.Events = append(s.Events, Event{At: at(), Kind: EvFreeze, D: dur(lease/2, 3*lease), W: rng.IntN(s.Workers)})
	}
	// A pause across a reshard: while the paused worker sleeps, another finishes the parent, the
	// children start and a third deletes the finished lease.
	var reshards []time.Duration
	for _, e := range s.Events {
		if e.Kind == EvSplit || e.Kind == EvMerge || e.Kind == EvScale {
			reshards = append(reshards, e.At)
		}
	}
	for _, t := range reshards {
		if pick(0.5) {
			d := 2*lease + 2*s.ShardSync + dur(0, 20*time.Second)
			s.Events = append(s.Events, Event{At: max(0, t-dur(0, 2*time.Second)), Kind: EvFreeze, D: d, W: rng.IntN(s.Workers)})
		}
	}
}
