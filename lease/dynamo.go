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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

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
	// changing before it creates the leases placed on it (see fleetSettledLocked).
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
// dead across two heartbeats of the declarer that went through.
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
	beatMu  sync.Mutex // one heartbeat at a time

	mu       sync.Mutex
	rnd      *rand.Rand
	running  bool
	lastLoad time.Time // when Load's cycle ended, zero once a Claim used it
	loaded   bool      // a Load has read the whole table once

	// Roster state.
	joined         bool
	joinedAt       time.Time
	epoch, beat    int64
	leaving        bool
	lastBeat       time.Time // send time of the last successful heartbeat
	lastBeatTry    time.Time
	beats          int64 // successful heartbeats
	beatFailures   int
	members        map[string]member
	beats2         map[string]beatObs
	membersChanged time.Time
	fleetChanged   time.Time // when a member last came or went, as this worker saw it
	rosterAt       time.Time // when the roster was last read or returned
	publishedKnown int64     // the shard count the last heartbeat published
	stopReadAt     time.Time // last consistent roster read before a shutdown hand-over

	// Shard state.
	infos     map[string]poller.ShardInfo
	firstSeen map[string]time.Time
	initial   map[string]bool // in the first Register call
	restarted map[string]bool // registered with a LATEST start the table replaced by an earlier one
	children  map[string][]string
	plan      assignment
	planKey   string
	succ      assignment // the placement without this worker (shutdown hand-overs)
	succKey   string
	cache     map[string]Lease // the last item seen of each shard this worker looked at
	missing   map[string]bool  // polled and found absent
	held      map[string]*heldLease
	polls     map[string]pollState
	legacy    map[string]observation // leases of the previous protocol: counter and since when
	cleanup   map[string]bool        // finished parents to check for deletion
	lastCand  map[string]bool        // the candidates of the last Claim
	claims    int                    // Claim calls
	cycles    int                    // claim cycles run
	lastCycle time.Time
	pending   map[string]bool // placed here at some point and not seen owned by another since
	// finishedHere are the shards this worker finished: it creates their children too.
	finishedHere map[string]bool
	waiting      map[string]bool // placed here, owned by another live worker that does not hand it over
}

// heldLease is a lease this worker holds. mu serialises the lease's writes (checkpoint,
// release); the other fields are guarded by Dynamo.mu.
type heldLease struct {
	mu        sync.Mutex
	counter   int64
	gone      bool   // released or lost; no longer in Dynamo.held
	handTo    string // placed on another worker: to be handed over once the reader stopped
	fresh     bool   // the last Load returned its current progress
	announced bool   // returned by Claim
	finished  bool
	unwanted  bool // not asked for by the poller: to be released unowned
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
	log           *slog.Logger
	now           func() time.Time
	rnd           *rand.Rand
}

// Option configures NewDynamo; nil Options are ignored.
type Option func(*dynamoConfig)

// WithLeaseDuration sets how long a worker's leases last without a heartbeat. Default
// DefaultLeaseDuration; every worker of a table should use the same value.
func WithLeaseDuration(d time.Duration) Option {
	return func(c *dynamoConfig) { c.leaseDuration = d }
}

// WithShardSettle sets how long a shard learnt of after the first listing is claimed by
// whoever can read it first. Default DefaultShardSettle; keep it above the poller's
// ShardSyncInterval.
func WithShardSettle(d time.Duration) Option {
	return func(c *dynamoConfig) { c.settle = d }
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
	cfg := dynamoConfig{leaseDuration: DefaultLeaseDuration, settle: DefaultShardSettle, now: time.Now}
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
	case cfg.settle < 0:
		return nil, fmt.Errorf("lease: shard settle time %s must not be negative", cfg.settle)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.rnd == nil {
		cfg.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &Dynamo{
		api: client, table: table, id: workerID, cfg: cfg,
		log:     cfg.log.With("worker_id", workerID),
		beatInt: cfg.leaseDuration / 3,
		safe:    cfg.leaseDuration - cfg.leaseDuration/5,
		rnd:     cfg.rnd,
		members: map[string]member{}, beats2: map[string]beatObs{},
		infos: map[string]poller.ShardInfo{}, firstSeen: map[string]time.Time{}, initial: map[string]bool{}, restarted: map[string]bool{},
		children: map[string][]string{}, cache: map[string]Lease{}, missing: map[string]bool{},
		held: map[string]*heldLease{}, polls: map[string]pollState{}, legacy: map[string]observation{},
		cleanup: map[string]bool{}, lastCand: map[string]bool{}, pending: map[string]bool{}, waiting: map[string]bool{},
		finishedHere: map[string]bool{},
	}, nil
}

var (
	_ poller.Store       = (*Dynamo)(nil)
	_ poller.Coordinator = (*Dynamo)(nil)
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
			d.markLeaving(rctx)
			d.releaseAll(rctx)
			d.leave(rctx)
			return nil
		case <-t.C:
			t.Reset(d.beatOnce(ctx))
		}
	}
}

// beatOnce joins or heartbeats if one is due and says when to come back.
func (d *Dynamo) beatOnce(ctx context.Context) time.Duration {
	d.beatMu.Lock()
	defer d.beatMu.Unlock()
	d.mu.Lock()
	joined, last, fails := d.joined, d.lastBeatTry, d.beatFailures
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
	d.lastBeatTry = now
	d.mu.Unlock()
	var err error
	if !joined {
		err = d.join(ctx)
		if err != nil {
			d.mu.Lock()
			d.beatFailures++
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
	if !d.joined || d.beatFailures > 0 {
		return beatRetry
	}
	return d.beatInt
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
	delete(d.held, id)
	d.log.Warn("lease lost", "shard_id", id, "reason", why, "lease_counter", h.counter)
}

// drop forgets a lease this worker gave up.
func (d *Dynamo) drop(id string, h *heldLease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h.gone = true
	delete(d.held, id)
}

// Held implements poller.Coordinator: true while this worker holds the lease and its last
// successful heartbeat was sent less than LeaseDuration − LeaseDuration/5 ago.
func (d *Dynamo) Held(shardID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.held[shardID]
	return h != nil && d.aliveLocked(d.cfg.now())
}

func (d *Dynamo) aliveLocked(now time.Time) bool {
	return d.joined && now.Sub(d.lastBeat) < d.safe
}

// Register implements poller.Coordinator: it records the shards (the placement is computed
// over every shard registered) and, for a shard whose parents this worker finished, adds it to
// the parents' childShardIds. It creates no lease: each is created by the worker it is placed
// on, when the shard may be read.
func (d *Dynamo) Register(ctx context.Context, shards []poller.ShardInfo) error {
	shards, err := d.shareLatestStart(ctx, shards)
	if err != nil {
		return err
	}
	now := d.cfg.now()
	d.mu.Lock()
	first := len(d.infos) == 0
	var links [][2]string
	for _, si := range shards {
		old, known := d.infos[si.ShardID]
		if !known {
			d.firstSeen[si.ShardID] = now
			if first {
				d.initial[si.ShardID] = true
			}
		} else {
			// Keep what the first registration said, completing what it lacked.
			if len(old.Parents) == 0 {
				old.Parents = si.Parents
			}
			old.StartingHashKey, old.EndingHashKey = cmpOr(old.StartingHashKey, si.StartingHashKey), cmpOr(old.EndingHashKey, si.EndingHashKey)
			si = old
		}
		d.infos[si.ShardID] = si
		for _, p := range nonEmpty(si.Parents) {
			if !slices.Contains(d.children[p], si.ShardID) {
				d.children[p] = append(d.children[p], si.ShardID)
				if h := d.held[p]; h != nil || d.cache[p].Owner == d.id {
					links = append(links, [2]string{p, si.ShardID})
				}
			}
		}
	}
	publish := d.joined && d.publishedKnown != int64(len(d.infos))
	d.mu.Unlock()
	if publish { // tell the others at once how many shards this worker knows of
		d.beatMu.Lock()
		if err := d.heartbeat(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("heartbeat failed; retrying", "err", err)
		}
		d.beatMu.Unlock()
	}
	var mu sync.Mutex
	var errs []error
	parallel(links, func(l [2]string) {
		_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &d.table, Key: key(l[0]),
			UpdateExpression:          aws.String("ADD #ch :c"),
			ConditionExpression:       aws.String("attribute_exists(#k)"),
			ExpressionAttributeNames:  map[string]string{"#ch": attrChildren, "#k": attrKey},
			ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberSS{Value: []string{l[1]}}},
		})
		if err != nil && !isConditionFailed(err) {
			mu.Lock()
			errs = append(errs, fmt.Errorf("record child %s of lease %s: %w", l[1], l[0], err))
			mu.Unlock()
		}
	})
	return errors.Join(errs...)
}

// attrLatestStart, on the mapping item, is when the mapping's first worker decided a LATEST start.
const attrLatestStart = "latestStart"

// shareLatestStart makes every worker of a new LATEST mapping start where the first one
// decided: leases are created only at claim time, so a worker that joins before any exists
// sees an empty table and decides a later start of its own, skipping what arrived between the
// two (sim LEASES=1 seed 4). One conditional write (SET if_not_exists) on the mapping item
// decides; shards registered with a later start get the stored one.
func (d *Dynamo) shareLatestStart(ctx context.Context, shards []poller.ShardInfo) ([]poller.ShardInfo, error) {
	var ts time.Time
	d.mu.Lock()
	for _, si := range shards {
		if _, known := d.infos[si.ShardID]; !known && si.Initial.Start == poller.Latest && !si.Initial.StartTimestamp.IsZero() {
			if ts.IsZero() || si.Initial.StartTimestamp.Before(ts) {
				ts = si.Initial.StartTimestamp
			}
		}
	}
	d.mu.Unlock()
	if ts.IsZero() {
		return shards, nil
	}
	out, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(mappingItemKey),
		UpdateExpression:          aws.String("SET #s = if_not_exists(#s, :s)"),
		ExpressionAttributeNames:  map[string]string{"#s": attrLatestStart},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": str(ts.UTC().Format(time.RFC3339Nano))},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return nil, fmt.Errorf("record the mapping's start in lease table %s: %w", d.table, err)
	}
	v, ok := out.Attributes[attrLatestStart].(*types.AttributeValueMemberS)
	if !ok {
		return shards, nil
	}
	first, err := time.Parse(time.RFC3339Nano, v.Value)
	if err != nil || !first.Before(ts) {
		return shards, nil
	}
	shards = slices.Clone(shards)
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, si := range shards {
		if si.Initial.Start == poller.Latest && first.Before(si.Initial.StartTimestamp) {
			shards[i].Initial.StartTimestamp = first
			d.restarted[si.ShardID] = true
		}
	}
	return shards, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Load implements poller.Store. It runs this worker's claim cycle (roster, declarations of
// dead workers, reads and takes of the leases placed on it) and returns the progress of every
// shard it knows of: the leases it holds (their current progress), and the others it has read
// (finished parents unblock their children).
func (d *Dynamo) Load(ctx context.Context) (map[string]poller.ShardProgress, error) {
	d.cycleMu.Lock()
	defer d.cycleMu.Unlock()
	if err := d.cycle(ctx); err != nil {
		return nil, err
	}
	// The first Load reads the whole table: the poller takes an empty answer for a mapping that
	// never ran (a LATEST start decided now, lineage ignored), and the cache holds only the
	// leases placed on this worker, none yet.
	var all map[string]Lease
	d.mu.Lock()
	first := !d.loaded
	d.mu.Unlock()
	if first {
		m, err := scanTable(ctx, d.api, d.table)
		if err != nil {
			return nil, err
		}
		all = m
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]poller.ShardProgress, len(d.cache)+len(all))
	for id, l := range all {
		out[id] = l.Progress
	}
	for id, l := range d.cache {
		out[id] = l.Progress
	}
	for _, h := range d.held {
		h.fresh = true
	}
	d.lastLoad, d.loaded = d.cfg.now(), true
	return out, nil
}

// Save implements poller.Store. Each shard is written on its own, conditional on this worker
// owning its lease with the counter it took it at (a checkpoint leaves the counter alone, so
// an SDK retry after a lost response passes again); a shard whose lease this worker does not
// hold fails with an error wrapping poller.ErrLeaseLost. A write resets
// ownerSwitchesSinceCheckpoint. A finished shard's write also records its children.
func (d *Dynamo) Save(ctx context.Context, updates map[string]poller.ShardProgress) error {
	for _, id := range sortedKeys(updates) {
		if err := d.save(ctx, id, updates[id]); err != nil {
			return err
		}
	}
	return nil
}

func (d *Dynamo) save(ctx context.Context, id string, pr poller.ShardProgress) error {
	d.mu.Lock()
	h := d.held[id]
	children := slices.Clone(d.children[id])
	d.mu.Unlock()
	if h == nil {
		return fmt.Errorf("checkpoint shard %s: %w", id, poller.ErrLeaseLost)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	d.mu.Lock()
	gone, cur := h.gone, h.counter
	d.mu.Unlock()
	if gone {
		return fmt.Errorf("checkpoint shard %s: %w", id, poller.ErrLeaseLost)
	}
	u, err := newProgressUpdate(pr)
	if err != nil {
		return fmt.Errorf("checkpoint shard %s: %w", id, err)
	}
	names := maps.Clone(progressNames)
	names["#o"], names["#c"] = attrOwner, attrCounter
	u.values[":me"], u.values[":cur"] = str(d.id), num(cur)
	expr := "SET " + strings.Join(u.set, ", ")
	if len(u.remove) > 0 {
		expr += " REMOVE " + strings.Join(u.remove, ", ")
	}
	if pr.Finished && len(children) > 0 {
		expr += " ADD #ch :ch"
		names["#ch"], u.values[":ch"] = attrChildren, &types.AttributeValueMemberSS{Value: children}
	}
	out, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(id),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("#o = :me AND #c = :cur"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: u.values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		d.lose(id, h, "checkpoint failed its condition")
		return fmt.Errorf("checkpoint shard %s: %w", id, poller.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("checkpoint shard %s: %w", id, err)
	}
	l, derr := decodeLease(out.Attributes)
	d.mu.Lock()
	if derr == nil {
		d.cache[id] = l
	}
	if pr.Finished {
		h.finished = true
		d.finishedHere[id] = true
	}
	if pr.Checkpoint != "" || pr.Finished {
		for _, p := range nonEmpty(d.infos[id].Parents) {
			d.cleanup[p] = true
		}
	}
	d.mu.Unlock()
	d.log.Debug("checkpoint written", "shard_id", id, "checkpoint", checkpointAttr(pr), "lease_counter", cur)
	return nil
}

// Claim implements poller.Coordinator: it runs a claim cycle (or uses the one Load ran just
// before), creates the leases of candidates placed on this worker that have none yet, takes
// free candidates that the placement does not cover yet (children of a recent split or merge),
// and returns the candidates it holds, minus those placed on another worker (to be handed
// over: the poller stops the reader and calls Release) and those whose current progress the
// last Load did not return.
func (d *Dynamo) Claim(ctx context.Context, candidates []string) ([]string, error) {
	d.cycleMu.Lock()
	defer d.cycleMu.Unlock()
	d.mu.Lock()
	// A poller that still claims is not stopping: a reader stopped for another reason (a
	// shard trimmed while being read) made this worker say it was leaving.
	clearLeaving := d.leaving && d.running
	d.leaving = false
	d.mu.Unlock()
	if clearLeaving {
		d.mu.Lock()
		d.membersChanged = d.cfg.now()
		d.mu.Unlock()
	}
	cand := make(map[string]bool, len(candidates))
	for _, id := range candidates {
		cand[id] = true
	}
	d.mu.Lock()
	// The cycle takes only leases the poller asks for (see pollAndTake): the first Claim
	// runs its own, since Load's ran before any candidates were known.
	reuse := !d.lastLoad.IsZero() && d.cfg.now().Sub(d.lastLoad) < cycleReuse && d.claims > 0
	d.lastLoad = time.Time{}
	d.lastCand = cand
	d.claims++
	d.mu.Unlock()
	if !reuse {
		if err := d.cycle(ctx); err != nil {
			return nil, err
		}
	}
	now := d.cfg.now()
	d.mu.Lock()
	ready := d.joined && now.Sub(d.joinedAt) >= d.beatInt && d.aliveLocked(now)
	var create, grab []string
	for _, id := range candidates {
		if !ready || d.held[id] != nil || d.cache[id].Finished() {
			continue
		}
		switch {
		case !d.settledLocked(id, now):
			if l, ok := d.cache[id]; !ok || d.freeLocked(l, now) || l.Owner == d.id {
				grab = append(grab, id)
			}
		case d.plan.owner[id] == d.id && d.missing[id] && d.fleetSettledLocked(id, now):
			create = append(create, id)
		case d.relatedLocked(id) && !d.hasItemLocked(id):
			// A child of a shard this worker finished: created by it as well as by the
			// worker it is placed on, which may have died meanwhile (the first one wins;
			// the placement hands it over afterwards).
			create = append(create, id)
		}
	}
	d.mu.Unlock()
	done := d.parentsDone(ctx, append(slices.Clone(create), grab...))
	create = slices.DeleteFunc(create, func(id string) bool { return !done[id] })
	grab = slices.DeleteFunc(grab, func(id string) bool { return !done[id] })
	parallel(create, func(id string) { d.create(ctx, id, true) })
	parallel(grab, func(id string) { d.grab(ctx, id) })

	// Leases placed elsewhere that no reader runs here (adopted after another worker asked)
	// are handed over now; leases the poller does not ask for (a shard trimmed from its
	// listing, adopted after a lost response) are released, so that no idle holder keeps a
	// parent's children waiting (see parentsDone).
	d.mu.Lock()
	var idle []string
	for id, h := range d.held {
		switch {
		case h.announced || h.finished:
		case h.handTo != "":
			idle = append(idle, id)
		case !cand[id]:
			h.unwanted = true
			idle = append(idle, id)
		}
	}
	d.mu.Unlock()
	parallel(idle, func(id string) {
		d.mu.Lock()
		h := d.held[id]
		why := "no reader here"
		if h != nil && h.unwanted {
			why = "not asked for by the poller"
		}
		d.mu.Unlock()
		if h != nil {
			if err := d.release(ctx, id, h, why); err != nil && ctx.Err() == nil {
				d.log.Warn("hand-over failed; will retry", "shard_id", id, "err", err)
			}
		}
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, id := range candidates {
		h := d.held[id]
		if h == nil || h.handTo != "" || !h.fresh || h.finished || !d.aliveLocked(now) {
			continue
		}
		h.announced = true
		out = append(out, id)
	}
	return out, nil
}

// parentsDone returns which of the shards (about to be created or taken) have every parent
// done: finished, or read just now and held by no live worker but this one. The poller counts
// a parent the listing no longer shows (trimmed by retention) as finished, but its owner
// elsewhere may still be invoking its last batch: the child waits for its checkpoint
// (invariant 3) or for the owner to stop (hand-over, release) or die. A cached copy of the
// parent does not do: the lease may have been taken since (sim LEASES=1 seed 60). Nobody
// reads a trimmed parent after such a read (its records are gone), and a finished lease stays
// finished, so a child whose item exists has parents that are done.
func (d *Dynamo) parentsDone(ctx context.Context, ids []string) map[string]bool {
	d.mu.Lock()
	var ps []string
	for _, id := range ids {
		for _, p := range nonEmpty(d.infos[id].Parents) {
			if !d.cache[p].Finished() && d.held[p] == nil {
				ps = append(ps, p)
			}
		}
	}
	d.mu.Unlock()
	read := map[string]*Lease{}
	if len(ps) > 0 {
		slices.Sort(ps)
		read = d.batchGetRetry(ctx, slices.Compact(ps), childRetries)
	}
	now := d.cfg.now()
	d.mu.Lock()
	gone := false
	for _, l := range read {
		gone = gone || l != nil && d.ownerGoneLocked(*l, now)
	}
	d.mu.Unlock()
	if gone {
		// An owner this worker's (eventually consistent) roster lacks may have joined since:
		// only a consistent read tells it is gone for good (see confirmFree).
		if err := d.readRoster(ctx, true); err != nil {
			if ctx.Err() == nil {
				d.log.Warn("read roster failed; will retry", "err", err)
			}
			return nil
		}
		now = d.cfg.now()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		ok := true
		for _, p := range nonEmpty(d.infos[id].Parents) {
			if d.cache[p].Finished() || d.held[p] != nil {
				continue
			}
			l, got := read[p]
			if !got || l != nil && d.parentBusyLocked(*l, now) { // not read (throttled), or busy
				ok = false
			}
		}
		out[id] = ok
	}
	return out
}

// hasItemLocked: the shard's lease item is known to exist.
func (d *Dynamo) hasItemLocked(id string) bool {
	_, ok := d.cache[id]
	return ok && !d.missing[id]
}

// parentBusyLocked: the parent's lease, as just read, is unfinished and held by another live
// worker.
func (d *Dynamo) parentBusyLocked(l Lease, now time.Time) bool {
	return !l.Finished() && l.Owner != "" && l.Owner != d.id && !d.freeLocked(l, now)
}

// ownerGoneLocked: the lease names another worker, with an epoch, that the roster as this
// worker last read it does not show.
func (d *Dynamo) ownerGoneLocked(l Lease, now time.Time) bool {
	return !l.Finished() && l.Owner != "" && l.Owner != d.id && !l.HandedOver && l.OwnerEpoch != 0 && d.freeLocked(l, now)
}

// fleetSettledLocked: the lease of a shard of a new mapping (one without parents that has no
// item yet) is created once no member came or went for a heartbeat interval and a claim
// interval, as this worker saw the roster, or coldStartMax after it joined: a fleet still
// starting one worker after another would otherwise have the first ones create leases they hand
// on at each join (see DESIGN.md, "Cold start"). A child is created at once.
func (d *Dynamo) fleetSettledLocked(id string, now time.Time) bool {
	if len(nonEmpty(d.infos[id].Parents)) > 0 {
		return true
	}
	return now.Sub(d.fleetChanged) >= d.beatInt+d.ClaimInterval() || now.Sub(d.joinedAt) >= coldStartMax
}

// settledLocked: the placement applies to the shard. A shard of the first listing without
// parents is placed at once (every worker lists it); any other once every member knows as many
// shards as this worker, or after the settle time (see DefaultShardSettle). Until then it goes
// to whoever can read it first.
func (d *Dynamo) settledLocked(id string, now time.Time) bool {
	if d.initial[id] && len(nonEmpty(d.infos[id].Parents)) == 0 {
		return true
	}
	return d.agreedLocked() || now.Sub(d.firstSeen[id]) >= d.cfg.settle
}

// freeLocked: nobody alive holds the lease as far as this worker knows.
func (d *Dynamo) freeLocked(l Lease, now time.Time) bool {
	switch {
	case l.Owner == "" || l.HandedOver: // nobody reads a lease not taken up yet
		return true
	case l.Owner == d.id:
		return l.OwnerEpoch != d.epoch
	case l.OwnerEpoch == 0: // the previous protocol's lease: free once its counter stood still
		o, ok := d.legacy[l.ShardID]
		return ok && o.counter == l.Counter && now.Sub(o.since) >= d.cfg.leaseDuration
	}
	m, ok := d.members[l.Owner]
	return !ok || m.epoch != l.OwnerEpoch
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

// ListLeases reads every lease of a table with a consistent scan, ordered by shard id (the
// roster item is left out).
func ListLeases(ctx context.Context, client DynamoAPI, table string) ([]Lease, error) {
	m, err := scanTable(ctx, client, table)
	if err != nil {
		return nil, err
	}
	out := make([]Lease, 0, len(m))
	for _, id := range sortedKeys(m) {
		out = append(out, m[id])
	}
	return out, nil
}

func scanTable(ctx context.Context, api DynamoAPI, table string) (map[string]Lease, error) {
	out := map[string]Lease{}
	in := &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)}
	for {
		res, err := api.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("scan lease table %s: %w", table, err)
		}
		for _, it := range res.Items {
			if isRoster(it) || isMappingItem(it) { // not leases
				continue
			}
			l, err := decodeLease(it)
			if err != nil {
				return nil, fmt.Errorf("lease table %s: %w", table, err)
			}
			out[l.ShardID] = l
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in = &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true), ExclusiveStartKey: res.LastEvaluatedKey}
	}
}

func isRoster(it map[string]types.AttributeValue) bool {
	v, ok := it[attrKey].(*types.AttributeValueMemberS)
	return ok && v.Value == rosterKey
}

// DebugState describes this worker's view of one shard (simulations and tests).
func (d *Dynamo) DebugState(shardID string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.cfg.now()
	l, known := d.cache[shardID]
	var hs string
	if h := d.held[shardID]; h != nil {
		hs = fmt.Sprintf("fresh=%v finished=%v handTo=%q announced=%v", h.fresh, h.finished, h.handTo, h.announced)
	}
	var ps []string
	for _, p := range nonEmpty(d.infos[shardID].Parents) {
		pl, ok := d.cache[p]
		ps = append(ps, fmt.Sprintf("%s cached=%v finished=%v", p, ok, pl.Finished()))
	}
	return fmt.Sprintf("%s %s cand=%v parents=%v children-of-parent=%v", hs, d.id, d.lastCand[shardID], ps, d.children[firstOr(d.infos[shardID].Parents)]) + fmt.Sprintf(" %s: cycles=%d last=%s joined=%v alive=%v placed=%q settled=%v held=%v cached=%v owner=%q epoch=%d poll=%+v pending=%v members=%d agreed=%v",
		d.id, d.cycles, d.lastCycle.Format("15:04:05.000"), d.joined, d.aliveLocked(now), d.plan.owner[shardID], d.settledLocked(shardID, now), d.held[shardID] != nil, known, l.Owner, l.OwnerEpoch,
		d.polls[shardID], d.pending[shardID], len(d.members), d.agreedLocked())
}

func firstOr(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}
