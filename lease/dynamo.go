package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/poller"
)

// DynamoAPI is the part of the DynamoDB client a Dynamo uses. *dynamodb.Client satisfies it.
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Defaults of a Dynamo.
const (
	// DefaultLeaseDuration is how long a worker whose heartbeat does not move keeps its leases
	// (KCL's failoverTimeMillis). Heartbeats run every third of it.
	DefaultLeaseDuration = 10 * time.Second
	// DefaultShardSettle is how long a shard this worker learnt of later than its first
	// listing (a child of a split or merge) is claimed by whoever can read it first, before
	// the placement applies to it: longer than any worker needs to list the shards again
	// (poller.DefaultShardSyncInterval is a minute).
	DefaultShardSettle = 2 * time.Minute
	// MaxFunctionTimeout is Lambda's longest function timeout: the invocation bound of a worker
	// whose roster entry does not give one (written by an earlier version).
	MaxFunctionTimeout = 900 * time.Second
)

const (
	// writeParallelism bounds the conditional writes one cycle sends at once.
	writeParallelism = 8
	// cycleReuse: a Claim that follows a Load this closely uses Load's cycle.
	cycleReuse = 500 * time.Millisecond
	// releaseTimeout bounds the release of every lease still held when Run's context ends.
	releaseTimeout = 5 * time.Second
	// batchGetMax is the most keys one BatchGetItem may ask for.
	batchGetMax = 100
	// pollMin and pollMax bound the back-off of reading a lease this worker wants but another
	// holds.
	pollMin   = time.Second
	pollMax   = 8 * time.Second
	pollEager = 10 // reads at every cycle before backing off
	// beatRetry is the pause between heartbeat attempts after a failure (throttling).
	beatRetry = 250 * time.Millisecond
	// coldStartMax bounds how long a worker of a new mapping waits for the fleet to stop
	// changing before it creates the leases placed on it (see placementInput.fleetQuiet).
	coldStartMax = 5 * time.Minute
)

// Dynamo shares one mapping's shards among workers through a DynamoDB lease table: one item
// per shard, keyed by leaseKey (the shard id), with KCL's attribute names, plus one roster item
// holding every worker's heartbeat. Use one table per mapping. It is both the mapping's
// poller.Store (progress lives in the lease items, and every write is fenced by the lease) and
// its poller.Coordinator. DESIGN.md gives the protocol (heartbeats, placement, hand-over,
// takeover, fencing) and why.
//
// Held is true only while this worker's last successful heartbeat was sent less than
// LeaseDuration − LeaseDuration/5 ago: a worker that stalls stops reading before anyone can
// declare it dead. Throttled heartbeats are retried every 250 ms and a worker is only declared
// dead across two heartbeats of the declarer that went through. A dead (or restarted) worker's
// leases are taken only once any invocation it started must have ended: 9/8 of the invocation
// bound it published (WithFunctionTimeout) after its death, since no invocation can be called
// back once sent.
//
// Logging (WithLogger): one Info line per lease taken, handed over or released, a Warn line per
// lease lost and per worker declared dead, Debug lines for creations and checkpoints. An error
// a method returns is not logged too.
//
// A Dynamo is safe for concurrent use.
type Dynamo struct {
	api     DynamoAPI
	table   string
	id      string
	cfg     dynamoConfig
	log     *slog.Logger
	beatInt time.Duration // heartbeat period
	safe    time.Duration // how long after a heartbeat Held stays true

	cycleMu sync.Mutex // one Load or Claim cycle at a time
	// beatTurn lets one heartbeat run at a time. It is a channel, not a mutex, so that a wait for it
	// ends with its context and counts as durably blocked under testing/synctest: the
	// simulation pauses a worker inside a DynamoDB call, holding it, and a goroutine waiting on
	// a mutex would keep the simulated clock from ever reaching the pause's end.
	beatTurn chan struct{}

	mu       sync.Mutex
	rnd      *rand.Rand
	running  bool
	lastLoad time.Time // when Load's cycle ended, zero once a Claim used it
	loaded   bool      // a Load has read the whole table once
	// scanned is the epoch this worker was a member under when a claim cycle last read the
	// whole table (see scan); Claim creates leases only once it is the current one.
	scanned    int64
	lastScan   map[string]Lease // that read, for the first Load
	rejoined   bool             // this epoch is not the process's first
	unlistedAt time.Time        // when the read after a rejoin marked the shards it found unlisted

	// stopping: the mapping stops (the poller said so, or Run's context ended); only then does
	// this worker say it is leaving.
	stopping bool
	// rewindDue: a rewind newer than cfg.rewindRev was requested (rewind.go); rewindCh is
	// closed then.
	rewindDue bool
	rewindCh  chan struct{}
	// skipSeen is the latest skip request revision a roster read showed; skipCh (1-buffered)
	// tells the runner's watch of a newer one (skip.go).
	skipSeen int64
	skipCh   chan struct{}

	// Roster state.
	me         membership // this worker's own entry
	fl         flight     // its invocations and the horizon its heartbeats publish (horizon.go)
	roster     roster     // everyone's, as last read
	stopReadAt time.Time  // last consistent roster read before a shutdown hand-over

	// Shard state.
	shards     map[string]*shard // everything known of each shard, by shard id
	registered int               // how many shards the poller registered
	knownSum   uint32            // the digest of their ids (knownLocked)
	plan       assignment
	planKey    string
	succ       assignment // the placement without this worker (shutdown hand-overs)
	succKey    string
	claims     int // Claim calls
	cycles     int // claim cycles run
	lastCycle  time.Time
}

// membership is this worker's own roster entry and its heartbeats. Guarded by Dynamo.mu.
type membership struct {
	joined      bool
	joinedAt    time.Time
	epoch, beat int64
	leaving     bool
	lastBeat    time.Time // send time of the last successful heartbeat
	lastBeatTry time.Time
	// beats counts the healthy heartbeats (and joins): those that returned within L/10 of their
	// send. Only they count towards declaring another worker dead (roster.dead).
	beats int64
	// countedAt is when the last heartbeat counted in beats was sent.
	countedAt time.Time
	// drawn is the epoch of a join not yet written to the roster, whose bound item is written:
	// the next attempt joins with it, so that failed joins leave no bound item behind.
	drawn          int64
	beatFailures   int
	publishedKnown int64 // the digest of the shards known the last heartbeat published (knownLocked)
}

// heldLease is a lease this worker holds. mu serialises the lease's writes (checkpoint,
// release); the other fields are guarded by Dynamo.mu.
type heldLease struct {
	mu        sync.Mutex
	counter   int64
	gone      bool   // released or lost; no longer its shard's held lease
	handTo    string // placed on another worker: to be handed over once the reader stopped
	fresh     bool   // the last Load returned its current progress
	announced bool   // returned by Claim
	finished  bool
	unwanted  bool // not asked for by the poller: to be released unowned
	abandoned bool // its invocation was cut off at shutdown (Abandon): kept, not handed over
}

type observation struct {
	counter int64
	since   time.Time
}

type pollState struct {
	next    time.Time
	backoff time.Duration
	tries   int
}

type dynamoConfig struct {
	leaseDuration time.Duration
	settle        time.Duration
	// functionTimeout bounds how long an invocation this worker starts may run.
	functionTimeout time.Duration
	statusAddr      string // published in the bound item (WithStatusAddr)
	rewindRev       int64  // the rewind revision this worker started under (WithRewindRevision)
	rewinds         bool   // WithRewindRevision was given: this worker stops for a rewind
	log             *slog.Logger
	now             func() time.Time
	rnd             *rand.Rand
}

// Option configures NewDynamo; nil Options are ignored.
type Option func(*dynamoConfig)

// WithLeaseDuration sets how long a worker's leases last without a heartbeat. Default
// DefaultLeaseDuration. Workers of one table may differ (a rolling change): each publishes its
// own, and its death is judged by the longer of its own and the observer's.
func WithLeaseDuration(d time.Duration) Option {
	return func(c *dynamoConfig) { c.leaseDuration = d }
}

// WithShardSettle sets how long a shard learnt of after the first listing is claimed by
// whoever can read it first. Default DefaultShardSettle; keep it above the poller's
// ShardSyncInterval.
func WithShardSettle(d time.Duration) Option {
	return func(c *dynamoConfig) { c.settle = d }
}

// WithFunctionTimeout sets how long an invocation this worker starts may run at most: the
// function timeout the invoker enforces (exec:, in-process), Lambda enforces (lambda:), or the
// HTTP client's deadline. It goes into the roster: a worker that takes a dead worker's leases
// waits for it (see DESIGN.md, "Invocations bounded by leases"). Default invoke.DefaultTimeout,
// the invokers' own default.
func WithFunctionTimeout(d time.Duration) Option {
	return func(c *dynamoConfig) { c.functionTimeout = d }
}

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(c *dynamoConfig) { c.log = l }
}

// WithClock sets the clock that heartbeats and Held are measured with. It must be monotonic:
// time.Now (the default) is, through the monotonic reading its times carry.
func WithClock(now func() time.Time) Option {
	return func(c *dynamoConfig) { c.now = now }
}

// WithRand fixes the random choices (epochs), for reproducible simulations.
func WithRand(r *rand.Rand) Option {
	return func(c *dynamoConfig) { c.rnd = r }
}

// NewDynamo returns the lease store and coordinator of worker workerID on table, which must
// exist (see EnsureTable). Call Run to keep the heartbeat going.
func NewDynamo(client DynamoAPI, table, workerID string, opts ...Option) (*Dynamo, error) {
	cfg := dynamoConfig{leaseDuration: DefaultLeaseDuration, settle: DefaultShardSettle, functionTimeout: invoke.DefaultTimeout, now: time.Now}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	switch {
	case client == nil:
		return nil, errors.New("lease: DynamoDB client is required")
	case table == "":
		return nil, errors.New("lease: table name is required")
	case workerID == "":
		return nil, errors.New("lease: worker id is required")
	case strings.HasPrefix(workerID, "!"):
		return nil, fmt.Errorf("lease: worker id %q must not start with '!'", workerID)
	case cfg.leaseDuration <= 0:
		return nil, fmt.Errorf("lease: lease duration %s must be positive", cfg.leaseDuration)
	case cfg.functionTimeout <= 0:
		return nil, fmt.Errorf("lease: function timeout %s must be positive", cfg.functionTimeout)
	case cfg.settle < 0:
		return nil, fmt.Errorf("lease: shard settle time %s must not be negative", cfg.settle)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.rnd == nil {
		cfg.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	d := &Dynamo{
		api: timedAPI{api: client, p: policyFor(cfg.leaseDuration)}, table: table, id: workerID, cfg: cfg,
		log:      cfg.log.With("worker_id", workerID),
		beatInt:  cfg.leaseDuration / 3,
		safe:     cfg.leaseDuration - cfg.leaseDuration/5,
		rnd:      cfg.rnd,
		roster:   newRoster(),
		beatTurn: make(chan struct{}, 1), shards: map[string]*shard{}, rewindCh: make(chan struct{}), skipCh: make(chan struct{}, 1),
	}
	d.roster.reads = d.rosterReads()
	return d, nil
}

// rosterReads is how often Run reads the roster: half a claim interval. A dead worker's last
// heartbeat is seen, and the horizon it published counted, at most that long after it was
// written (DESIGN.md, "The takeover bound").
func (d *Dynamo) rosterReads() time.Duration { return d.ClaimInterval() / 2 }

var (
	_ poller.Store          = (*Dynamo)(nil)
	_ poller.Coordinator    = (*Dynamo)(nil)
	_ poller.Abandoner      = (*Dynamo)(nil)
	_ poller.Stopper        = (*Dynamo)(nil)
	_ poller.InvocationGate = (*Dynamo)(nil)
)

// WorkerID is this worker's id, the leaseOwner of the leases it holds.
func (d *Dynamo) WorkerID() string { return d.id }

// LeaseDuration is the lease duration in use.
func (d *Dynamo) LeaseDuration() time.Duration { return d.cfg.leaseDuration }

// ClaimInterval is the poller.Config.ClaimInterval this lease duration calls for:
// min(1 s, LeaseDuration/10). Each claim cycle reads the roster once; a dead worker's leases
// are taken within about LeaseDuration plus one claim interval of its last heartbeat.
func (d *Dynamo) ClaimInterval() time.Duration { return min(time.Second, d.cfg.leaseDuration/10) }

// Run keeps this worker's heartbeat going until ctx ends, then hands over or releases every
// lease still held and leaves the roster (within 5 s), and returns nil. Cancel ctx only after
// the Poller's Run has returned: the poller's last batches and checkpoints need the heartbeat
// until then. Call Run once.
func (d *Dynamo) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return errors.New("lease: Dynamo.Run called twice")
	}
	d.running = true
	d.mu.Unlock()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			defer cancel()
			d.Stopping(rctx)
			d.releaseAll(rctx)
			d.leave(rctx)
			return nil
		case <-t.C:
			t.Reset(min(d.beatOnce(ctx), d.readRosterIfDue(ctx)))
		}
	}
}

// Stopping implements poller.Stopper: the mapping stops. This worker tells the others at once
// that it is leaving, so that they count without it and read what it hands them; the readers'
// leases released from now on are handed to the workers the placement gives them to without
// this one. Run calls it too when its context ends.
func (d *Dynamo) Stopping(ctx context.Context) {
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	d.markLeaving(ctx)
}

// lockBeats waits for the heartbeat's turn; false when ctx ended first.
func (d *Dynamo) lockBeats(ctx context.Context) bool {
	select {
	case d.beatTurn <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (d *Dynamo) unlockBeats() { <-d.beatTurn }

// beatOnce joins or heartbeats if one is due and says when to come back.
func (d *Dynamo) beatOnce(ctx context.Context) time.Duration {
	if !d.lockBeats(ctx) {
		return beatRetry
	}
	defer d.unlockBeats()
	d.mu.Lock()
	joined, last, fails := d.me.joined, d.me.lastBeatTry, d.me.beatFailures
	d.mu.Unlock()
	now := d.cfg.now()
	wait := d.beatInt
	if fails > 0 || !joined {
		wait = beatRetry
	}
	if due := last.Add(wait); joined && now.Before(due) {
		return due.Sub(now)
	}
	d.mu.Lock()
	d.me.lastBeatTry = now
	d.mu.Unlock()
	var err error
	if !joined {
		err = d.join(ctx)
		if err != nil {
			d.mu.Lock()
			d.me.beatFailures++
			d.roster.unhealthy = d.cfg.now()
			d.mu.Unlock()
		}
	} else {
		err = d.heartbeat(ctx)
	}
	if err != nil && ctx.Err() == nil {
		d.log.Warn("heartbeat failed; retrying", "err", err)
		return beatRetry
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.me.joined || d.me.beatFailures > 0 {
		return beatRetry
	}
	return d.beatInt
}

// readRosterIfDue reads the roster when the last read is rosterReads old (or nearly), and says
// when to come back.
func (d *Dynamo) readRosterIfDue(ctx context.Context) time.Duration {
	every := d.rosterReads()
	d.mu.Lock()
	joined, age := d.me.joined, d.cfg.now().Sub(d.roster.readAt)
	d.mu.Unlock()
	if !joined {
		return every
	}
	if age < every*9/10 {
		return every - age
	}
	if err := d.readRoster(ctx, false); err != nil && ctx.Err() == nil {
		d.log.Debug("read roster failed; will retry", "err", err)
	}
	return every
}

// lose forgets a lease another worker now has.
func (d *Dynamo) lose(id string, h *heldLease, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.loseLocked(id, h, why)
}

func (d *Dynamo) loseLocked(id string, h *heldLease, why string) {
	if h.gone {
		return
	}
	h.gone = true
	s := d.shardLocked(id)
	s.held = nil
	if h.announced {
		s.orphan = true
	}
	d.log.Warn("lease lost", "shard_id", id, "reason", why, "lease_counter", h.counter)
}

// drop forgets a lease this worker gave up.
func (d *Dynamo) drop(id string, h *heldLease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h.gone = true
	d.shardLocked(id).held = nil
}

// Held implements poller.Coordinator: true while this worker holds the lease and its last
// successful heartbeat was sent less than LeaseDuration − LeaseDuration/5 ago.
func (d *Dynamo) Held(shardID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.peekLocked(shardID)
	return s.held != nil && !s.orphan && d.aliveLocked(d.cfg.now()) && !d.rewindDueLocked()
}

func (d *Dynamo) aliveLocked(now time.Time) bool {
	return d.me.joined && now.Sub(d.me.lastBeat) < d.safe
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// parallel calls fn for every item, at most writeParallelism at once, and returns when all
// calls have.
func parallel[T any](items []T, fn func(T)) {
	var g errgroup.Group
	g.SetLimit(writeParallelism)
	for _, it := range items {
		g.Go(func() error { fn(it); return nil })
	}
	_ = g.Wait()
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// DebugState describes this worker's view of one shard (simulations and tests).
func (d *Dynamo) DebugState(shardID string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.cfg.now()
	s := d.peekLocked(shardID)
	l, known := s.last, s.known()
	var hs string
	if h := s.held; h != nil {
		hs = fmt.Sprintf("fresh=%v finished=%v handTo=%q announced=%v", h.fresh, h.finished, h.handTo, h.announced)
	}
	var ps []string
	for _, p := range nonEmpty(s.info.Parents) {
		pl, ok := d.cachedLocked(p)
		ps = append(ps, fmt.Sprintf("%s cached=%v finished=%v", p, ok, pl.Finished()))
	}
	return fmt.Sprintf("%s %s cand=%v parents=%v children-of-parent=%v", hs, d.id, s.asked, ps, d.peekLocked(firstOr(s.info.Parents)).children) + fmt.Sprintf(" %s: cycles=%d last=%s joined=%v alive=%v placed=%q settled=%v held=%v cached=%v owner=%q epoch=%d poll=%+v pending=%v members=%d agreed=%v",
		d.id, d.cycles, d.lastCycle.Format("15:04:05.000"), d.me.joined, d.aliveLocked(now), d.plan.owner[shardID], d.settledLocked(shardID, now), s.held != nil, known, l.Owner, l.OwnerEpoch,
		s.poll, s.pending, len(d.roster.members), d.agreedLocked())
}

func firstOr(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}
