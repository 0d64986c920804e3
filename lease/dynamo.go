package lease

import (
	"cmp"
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
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Defaults of a Dynamo.
const (
	// DefaultLeaseDuration is how long a lease whose counter does not move stays its owner's
	// (KCL's failoverTimeMillis). Renewals run every third of it.
	DefaultLeaseDuration = 10 * time.Second
	// DefaultMaxMovesPerCycle is how many hand-overs one Claim may request.
	DefaultMaxMovesPerCycle = 2
)

const (
	// writeParallelism bounds the conditional writes one Register, Claim or renewal round sends
	// at once.
	writeParallelism = 8
	// snapshotReuse: a Claim that follows a Load this closely decides on Load's scan instead of
	// scanning again (the poller calls them back to back every ClaimInterval). The progress the
	// poller starts a shard from and the counter the take is conditional on then come from
	// the same read.
	snapshotReuse = 500 * time.Millisecond
	// releaseTimeout bounds the release of every lease still held when Run's context ends.
	releaseTimeout = 5 * time.Second
	// defaultRequestJitter: after asking for hand-overs a worker waits a random time in
	// [0, jitter) before it asks again, so that workers below their share, claiming at the
	// same pace, drift apart and see each other's requests instead of all asking the same
	// victim in the same instant.
	defaultRequestJitter = time.Second
)

// Dynamo shares one mapping's shards among workers through a DynamoDB lease table, the way KCL
// does: one item per shard, keyed by leaseKey (the shard id), with KCL's attribute names. Use
// one table per mapping (KCL, too, uses one table per application). It is both the mapping's
// poller.Store (progress lives in the lease items, and every write is fenced by the lease) and
// its poller.Coordinator.
//
// # Protocol
//
// Every write is a single-item conditional write (no transactions); leaseCounter is both the
// heartbeat and the fencing token, and every write of an owner (renewal, checkpoint, release,
// hand-over) is conditional on leaseOwner = this worker AND leaseCounter = the value it holds,
// and raises the counter.
//
//   - Expiry needs no clock synchronisation: a worker judges another's lease expired when the
//     counter has not changed for LeaseDuration since this worker first saw that value (from
//     the request of the scan page that showed it), on its own monotonic clock. Unowned leases
//     are free at once.
//   - Run renews every held lease every LeaseDuration/3 (a checkpoint counts as a renewal).
//     A renewal that fails its condition means the lease was lost.
//   - Held is true only while the last successful write of the lease was sent less than
//     LeaseDuration − LeaseDuration/5 ago on this worker's monotonic clock. Another worker can
//     take the lease only LeaseDuration after it first saw the counter that write set, which
//     it cannot have seen before the write was sent (less one scan page request, at most
//     LeaseDuration/10): a worker that stalls (SIGSTOP, a long GC, a partition) stops reading
//     and invoking at least LeaseDuration/10 before anyone else may start.
//   - Claim takes unowned and expired leases in random order up to ceil(shards / workers), and
//     then asks the most loaded workers for cooperative hand-overs (see planClaim): it sets
//     pendingOwner on a lease without touching the counter; the owner's next Claim leaves the
//     shard out, the poller stops the reader after its batch in flight and checkpoint, and
//     Release releases the lease but leaves it reserved for the requester (conditional on the
//     request still being there), whose next Claim takes it. An owner that never answers
//     loses the lease by expiry; one whose reader does not stop within three lease durations
//     hands the lease over anyway (its checkpoints are then fenced). A worker that stops
//     withdraws its requests, granted or not; a reservation for a worker that died is free
//     once its counter has not moved for a lease duration. A requester never owns a lease it
//     has not taken, so it never counts as alive by its requests alone.
//
// # Attributes
//
// KCL's: leaseKey, leaseOwner, leaseCounter, checkpoint (a sequence number; TRIM_HORIZON,
// LATEST or AT_TIMESTAMP for a shard without a checkpoint; SHARD_END once finished),
// checkpointSubSequenceNumber (always 0), ownerSwitchesSinceCheckpoint, parentShardId (SS),
// childShardIds (SS), startingHashKey, endingHashKey. esm's own: pendingOwner (the worker a
// hand-over was requested for), startingPosition (ShardProgress.Start, kept after the first
// checkpoint), lastCheckpoint (the last sequence number of a finished shard), updatedAt
// (ShardProgress.UpdatedAt, RFC 3339) and windowState (ShardProgress.Window as JSON; DynamoDB's
// 400 KB item limit caps it below the 1 MB Lambda allows a tumbling window's state).
//
// Worker ids must be unique among the workers of a table: a worker adopts at once the leases
// the table says it owns (after a restart under the same id).
// A write whose condition fails counts as a lost lease even when it is the SDK's retry of a
// write that had gone through (its response was lost): the reader stops, and the next Claim
// adopts the lease again, since the table names this worker.
//
// Logging (WithLogger): one Info line per lease taken, released, asked for or handed over, a
// Warn line per lease lost, and at Debug one line per lease created and per checkpoint written
// (with the lease counter, which orders every write of a lease). An error that a method returns
// is not logged too.
//
// A Dynamo is safe for concurrent use.
type Dynamo struct {
	api    DynamoAPI
	table  string
	id     string
	cfg    dynamoConfig
	log    *slog.Logger
	renew  time.Duration // renewal period
	safe   time.Duration // how long after a write Held stays true
	handTO time.Duration // a hand-over request older than this is carried out by force

	claimMu sync.Mutex // one Claim at a time

	mu          sync.Mutex
	held        map[string]*heldLease
	seen        map[string]observation // the counter each lease had when first seen, and when
	snap        map[string]Lease       // the last scan; never modified once stored
	snapGen     uint64                 // gen when that scan started
	snapAt      time.Time              // when it ended
	snapFresh   bool                   // taken by Load and not yet used by a Claim
	gen         uint64                 // counts completed takes
	nextRequest time.Time              // no hand-over requests before then
	rnd         *rand.Rand
	running     bool
}

// heldLease is a lease this worker holds. mu serialises the lease's writes (renewal,
// checkpoint, release); the other fields are guarded by Dynamo.mu.
type heldLease struct {
	mu           sync.Mutex
	counter      int64
	sentAt       time.Time // when the last successful write of the lease was sent
	gen          uint64    // Dynamo.gen once taken: scans started before say nothing about it
	pending      string    // worker a hand-over was requested for, from the last scan
	pendingSince time.Time
	announced    bool // returned by Claim: a reader may run, Release will come
	gone         bool // released or lost; no longer in Dynamo.held
}

type observation struct {
	counter int64
	since   time.Time
}

type dynamoConfig struct {
	leaseDuration time.Duration
	maxMoves      int
	log           *slog.Logger
	now           func() time.Time
	rnd           *rand.Rand
	requestJitter time.Duration
}

// DynamoOption configures NewDynamo.
type DynamoOption interface{ apply(*dynamoConfig) }

type dynamoOptionFunc func(*dynamoConfig)

func (f dynamoOptionFunc) apply(c *dynamoConfig) { f(c) }

// WithLeaseDuration sets how long a lease lasts without renewal. Default DefaultLeaseDuration;
// every worker of a table should use the same value.
func WithLeaseDuration(d time.Duration) DynamoOption {
	return dynamoOptionFunc(func(c *dynamoConfig) { c.leaseDuration = d })
}

// WithMaxMovesPerCycle sets how many hand-overs one Claim may request. Default
// DefaultMaxMovesPerCycle.
func WithMaxMovesPerCycle(n int) DynamoOption {
	return dynamoOptionFunc(func(c *dynamoConfig) { c.maxMoves = n })
}

// WithLogger sets the logger: one line per lease taken, lost, released or handed over.
// Default: discard.
func WithLogger(l *slog.Logger) DynamoOption {
	return dynamoOptionFunc(func(c *dynamoConfig) { c.log = l })
}

// WithClock sets the clock that lease expiry and Held are measured with. It must be monotonic:
// time.Now (the default) is, through the monotonic reading its times carry.
func WithClock(now func() time.Time) DynamoOption {
	return dynamoOptionFunc(func(c *dynamoConfig) { c.now = now })
}

// withRand fixes the random choices (tests).
func withRand(r *rand.Rand) DynamoOption {
	return dynamoOptionFunc(func(c *dynamoConfig) { c.rnd = r })
}

// withRequestJitter sets the pause between rounds of hand-over requests (tests).
func withRequestJitter(d time.Duration) DynamoOption {
	return dynamoOptionFunc(func(c *dynamoConfig) { c.requestJitter = d })
}

// NewDynamo returns the lease store and coordinator of worker workerID on table, which must
// exist (see EnsureTable). Call Run to renew leases.
func NewDynamo(client DynamoAPI, table, workerID string, opts ...DynamoOption) (*Dynamo, error) {
	cfg := dynamoConfig{leaseDuration: DefaultLeaseDuration, maxMoves: DefaultMaxMovesPerCycle, now: time.Now,
		requestJitter: defaultRequestJitter}
	for _, o := range opts {
		o.apply(&cfg)
	}
	switch {
	case client == nil:
		return nil, errors.New("lease: DynamoDB client is required")
	case table == "":
		return nil, errors.New("lease: table name is required")
	case workerID == "":
		return nil, errors.New("lease: worker id is required")
	case cfg.leaseDuration <= 0:
		return nil, fmt.Errorf("lease: lease duration %s must be positive", cfg.leaseDuration)
	case cfg.maxMoves < 0:
		return nil, fmt.Errorf("lease: max moves per cycle %d must not be negative", cfg.maxMoves)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.rnd == nil {
		cfg.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &Dynamo{
		api: client, table: table, id: workerID, cfg: cfg,
		log:    cfg.log.With("worker_id", workerID),
		renew:  cfg.leaseDuration / 3,
		safe:   cfg.leaseDuration - cfg.leaseDuration/5,
		handTO: 3 * cfg.leaseDuration,
		held:   map[string]*heldLease{}, seen: map[string]observation{}, rnd: cfg.rnd,
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
// min(1 s, LeaseDuration/15). A dead worker's leases are taken within LeaseDuration plus two
// claim intervals of its last write, so this keeps a takeover well within one renewal interval
// (LeaseDuration/3) of a death.
func (d *Dynamo) ClaimInterval() time.Duration { return min(time.Second, d.cfg.leaseDuration/15) }

// Run renews the held leases every LeaseDuration/3 until ctx ends, then releases every lease
// still held, withdraws its hand-over requests and releases the leases handed over to it but not
// taken up yet (within 5 s), and returns nil. Cancel ctx only after the Poller's Run has returned:
// the poller's last batches and checkpoints need the leases renewed until then. Call Run once.
func (d *Dynamo) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return errors.New("lease: Dynamo.Run called twice")
	}
	d.running = true
	d.mu.Unlock()
	t := time.NewTicker(d.renew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			defer cancel()
			d.releaseAll(rctx)
			d.withdraw(rctx)
			return nil
		case <-t.C:
			d.renewAll(ctx)
		}
	}
}

func (d *Dynamo) heldLeases() map[string]*heldLease {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.held)
}

// renewAll renews every held lease that no write renewed during the last half period.
func (d *Dynamo) renewAll(ctx context.Context) {
	parallel(sortedKeys(d.heldLeases()), func(id string) {
		d.mu.Lock()
		h := d.held[id]
		d.mu.Unlock()
		if h != nil {
			d.renewLease(ctx, id, h)
		}
	})
}

func (d *Dynamo) renewLease(ctx context.Context, id string, h *heldLease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d.mu.Lock()
	gone, cur, age := h.gone, h.counter, d.cfg.now().Sub(h.sentAt)
	d.mu.Unlock()
	if gone || age < d.renew/2 {
		return
	}
	sent := d.cfg.now()
	_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &d.table,
		Key:                       key(id),
		UpdateExpression:          aws.String("SET #c = :next"),
		ConditionExpression:       aws.String("#o = :me AND #c = :cur"),
		ExpressionAttributeNames:  map[string]string{"#c": attrCounter, "#o": attrOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{":next": num(cur + 1), ":cur": num(cur), ":me": str(d.id)},
	})
	switch {
	case err == nil:
		d.mu.Lock()
		h.counter, h.sentAt = cur+1, sent
		d.mu.Unlock()
	case isConditionFailed(err):
		d.lose(id, h, "renewal failed its condition")
	case ctx.Err() == nil:
		d.log.Warn("lease renewal failed; will retry", "shard_id", id, "err", err)
	}
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

// Held implements poller.Coordinator: true while the lease's last successful write was sent less
// than LeaseDuration − LeaseDuration/5 ago.
func (d *Dynamo) Held(shardID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.held[shardID]
	return h != nil && d.cfg.now().Sub(h.sentAt) < d.safe
}

// scan reads the whole table (consistent, paged), records what it saw for lease expiry, and keeps
// it as the latest snapshot.
//
// A counter first seen in a page counts from when that page was requested: the value was
// written before the page was read, so at most one request's time before that instant, and the
// owner's Held has a margin of LeaseDuration/5 for it. A page that took longer than a tenth of
// the lease duration counts from when it came back.
func (d *Dynamo) scan(ctx context.Context) (map[string]Lease, uint64, error) {
	d.mu.Lock()
	gen := d.gen
	d.mu.Unlock()
	seenAt := map[string]time.Time{}
	leases, err := scanPages(ctx, d.api, d.table, func(page []Lease, sent time.Time) {
		at := d.cfg.now()
		if at.Sub(sent) <= d.cfg.leaseDuration/10 {
			at = sent
		}
		for _, l := range page {
			seenAt[l.ShardID] = at
		}
	}, d.cfg.now)
	if err != nil {
		return nil, 0, err
	}
	now := d.cfg.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.snap, d.snapGen, d.snapAt, d.snapFresh = leases, gen, now, false
	for id, l := range leases {
		if o, ok := d.seen[id]; !ok || o.counter != l.Counter {
			d.seen[id] = observation{counter: l.Counter, since: seenAt[id]}
		}
	}
	for id := range d.seen {
		if _, ok := leases[id]; !ok {
			delete(d.seen, id)
		}
	}
	return leases, gen, nil
}

func scanTable(ctx context.Context, api DynamoAPI, table string) (map[string]Lease, error) {
	return scanPages(ctx, api, table, func([]Lease, time.Time) {}, time.Now)
}

// scanPages reads the table page by page, telling page each page's leases and when it was
// requested.
func scanPages(ctx context.Context, api DynamoAPI, table string, page func([]Lease, time.Time), now func() time.Time) (map[string]Lease, error) {
	out := map[string]Lease{}
	in := &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)}
	for {
		sent := now()
		res, err := api.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("scan lease table %s: %w", table, err)
		}
		leases := make([]Lease, 0, len(res.Items))
		for _, it := range res.Items {
			if isMappingItem(it) { // the mapping's UUID (mapping_uuid.go), not a lease
				continue
			}
			l, err := decodeLease(it)
			if err != nil {
				return nil, fmt.Errorf("lease table %s: %w", table, err)
			}
			out[l.ShardID] = l
			leases = append(leases, l)
		}
		page(leases, sent)
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in = &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true), ExclusiveStartKey: res.LastEvaluatedKey}
	}
}

// ListLeases reads every lease of a table with a consistent scan, ordered by shard id.
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

// Load implements poller.Store: the progress of every shard in the table.
func (d *Dynamo) Load(ctx context.Context) (map[string]poller.ShardProgress, error) {
	leases, _, err := d.scan(ctx)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.snapFresh = true
	d.mu.Unlock()
	out := make(map[string]poller.ShardProgress, len(leases))
	for id, l := range leases {
		out[id] = l.Progress
	}
	return out, nil
}

// Save implements poller.Store. Each shard is written on its own, conditional on this worker
// holding its lease (there are no transactions), so an error may leave earlier shards of the same
// call written; the poller saves one shard at a time. A shard whose lease this worker does not
// hold fails with an error wrapping poller.ErrLeaseLost. A write resets
// ownerSwitchesSinceCheckpoint and counts as a renewal.
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
	u.values[":me"], u.values[":cur"], u.values[":next"] = str(d.id), num(cur), num(cur+1)
	expr := "SET " + strings.Join(append(u.set, "#c = :next"), ", ")
	if len(u.remove) > 0 {
		expr += " REMOVE " + strings.Join(u.remove, ", ")
	}
	sent := d.cfg.now()
	_, err = d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(id),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("#o = :me AND #c = :cur"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: u.values,
	})
	if isConditionFailed(err) {
		d.lose(id, h, "checkpoint failed its condition")
		return fmt.Errorf("checkpoint shard %s: %w", id, poller.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("checkpoint shard %s: %w", id, err)
	}
	d.mu.Lock()
	h.counter, h.sentAt = cur+1, sent
	d.mu.Unlock()
	d.log.Debug("checkpoint written", "shard_id", id, "checkpoint", checkpointAttr(pr), "lease_counter", cur+1)
	return nil
}

// Register implements poller.Coordinator. A shard the table does not have gets a new, unowned
// lease with the shard's initial progress (a conditional create: of several workers registering
// it at once, one creates it and the others leave it alone). An existing lease only gains the
// parents and hash range it lacks, and each parent lease gains the shard among its children.
// Shards the latest scan shows complete cost no write.
func (d *Dynamo) Register(ctx context.Context, shards []poller.ShardInfo) error {
	d.mu.Lock()
	known := d.snap
	d.mu.Unlock()
	if known == nil {
		var err error
		if known, _, err = d.scan(ctx); err != nil {
			return err
		}
	}
	var mu sync.Mutex
	var errs []error
	created := map[string]bool{}
	parallel(shards, func(si poller.ShardInfo) {
		ok, err := d.register(ctx, si, known)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			created[si.ShardID] = true
		}
	})
	// Children, once every lease of this call exists.
	type link struct{ parent, child string }
	var links []link
	for _, si := range shards {
		for _, p := range nonEmpty(si.Parents) {
			pl, ok := known[p]
			if (ok && !slices.Contains(pl.Children, si.ShardID)) || (!ok && created[p]) {
				links = append(links, link{p, si.ShardID})
			}
		}
	}
	parallel(links, func(l link) {
		_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &d.table, Key: key(l.parent),
			UpdateExpression:          aws.String("ADD #ch :c"),
			ConditionExpression:       aws.String("attribute_exists(#k)"),
			ExpressionAttributeNames:  map[string]string{"#ch": attrChildren, "#k": attrKey},
			ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberSS{Value: []string{l.child}}},
		})
		if err != nil && !isConditionFailed(err) {
			mu.Lock()
			errs = append(errs, fmt.Errorf("record child %s of lease %s: %w", l.child, l.parent, err))
			mu.Unlock()
		}
	})
	return errors.Join(errs...)
}

// register creates the shard's lease if the table lacks it and fills in parents and hash range.
// It reports whether this call created the lease.
func (d *Dynamo) register(ctx context.Context, si poller.ShardInfo, known map[string]Lease) (bool, error) {
	l, ok := known[si.ShardID]
	if !ok {
		item, err := newItem(si)
		if err != nil {
			return false, err
		}
		_, err = d.api.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: &d.table, Item: item,
			ConditionExpression:      aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": attrKey},
		})
		if err == nil {
			d.log.Debug("lease created", "shard_id", si.ShardID, "checkpoint", checkpointAttr(si.Initial))
			return true, nil
		}
		if !isConditionFailed(err) {
			return false, fmt.Errorf("create lease %s: %w", si.ShardID, err)
		}
		// Another worker created it first, from the same listing. Should it lack parents or
		// hash range, the next Register, with a scan that shows the lease, adds them.
		return false, nil
	}
	var set []string
	names := map[string]string{"#k": attrKey}
	values := map[string]types.AttributeValue{}
	if ps := nonEmpty(si.Parents); len(ps) > 0 && len(l.Parents) == 0 {
		set = append(set, "#ps = if_not_exists(#ps, :ps)")
		names["#ps"], values[":ps"] = attrParents, &types.AttributeValueMemberSS{Value: ps}
	}
	if si.StartingHashKey != "" && l.StartingHashKey == "" {
		set = append(set, "#sh = if_not_exists(#sh, :sh)")
		names["#sh"], values[":sh"] = attrStartHash, str(si.StartingHashKey)
	}
	if si.EndingHashKey != "" && l.EndingHashKey == "" {
		set = append(set, "#eh = if_not_exists(#eh, :eh)")
		names["#eh"], values[":eh"] = attrEndHash, str(si.EndingHashKey)
	}
	if len(set) == 0 {
		return false, nil
	}
	_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(si.ShardID),
		UpdateExpression:          aws.String("SET " + strings.Join(set, ", ")),
		ConditionExpression:       aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil && !isConditionFailed(err) {
		return false, fmt.Errorf("complete lease %s: %w", si.ShardID, err)
	}
	return false, nil
}

// Claim implements poller.Coordinator; see Dynamo for the protocol. It scans the table once
// (or uses the scan of a Load made just before), takes and asks for leases, carries out the
// hand-overs other workers asked of it for shards no reader runs, releases held leases of shards
// that are no longer candidates, and returns the candidates it holds, minus those being handed
// over.
func (d *Dynamo) Claim(ctx context.Context, candidates []string) ([]string, error) {
	d.claimMu.Lock()
	defer d.claimMu.Unlock()

	d.mu.Lock()
	snap, sg := d.snap, d.snapGen
	reuse := d.snapFresh && d.cfg.now().Sub(d.snapAt) < snapshotReuse
	d.snapFresh = false
	d.mu.Unlock()
	if !reuse {
		var err error
		if snap, sg, err = d.scan(ctx); err != nil {
			return nil, err
		}
	}
	now := d.cfg.now()
	d.reconcile(snap, sg, now)

	cand := make(map[string]bool, len(candidates))
	for _, id := range candidates {
		cand[id] = true
	}
	d.mu.Lock()
	alive := map[string]bool{}
	var views []leaseView
	for _, id := range sortedKeys(snap) {
		l := snap[id]
		expired := d.expiredLocked(l, now)
		if l.Owner != "" && !expired {
			alive[l.Owner] = true
		}
		if !cand[id] || l.Finished() {
			continue
		}
		v := leaseView{shardID: id, owner: l.Owner, counter: l.Counter, pending: l.PendingOwner, expired: expired,
			idle: now.Sub(d.seen[id].since)}
		if h := d.held[id]; h != nil {
			v.held, v.pending = true, h.pending
		}
		views = append(views, v)
	}
	plan := planClaim(d.id, views, sortedKeys(alive), d.cfg.maxMoves, !now.Before(d.nextRequest), d.rnd)
	if len(plan.request) > 0 {
		d.nextRequest = now.Add(time.Duration(d.rnd.Int64N(int64(d.cfg.requestJitter) + 1)))
	}
	d.mu.Unlock()

	parallel(plan.take, func(v leaseView) { d.take(ctx, v) })
	for _, v := range plan.request {
		d.requestHandOver(ctx, v)
	}

	// Hand over what others asked for where no reader runs (or the reader did not stop in
	// time), and give up leases of shards that are no longer candidates.
	for _, id := range sortedKeys(d.heldLeases()) {
		d.mu.Lock()
		h := d.held[id]
		var why string
		switch {
		case h == nil:
		case !cand[id]:
			why = "not a candidate"
		case h.pending != "" && h.pending != d.id && !h.announced:
			why = "hand-over requested"
		case h.pending != "" && h.pending != d.id && now.Sub(h.pendingSince) >= d.handTO:
			why = "hand-over requested and the reader did not stop"
		}
		d.mu.Unlock()
		if why != "" {
			if err := d.release(ctx, id, h, why); err != nil && ctx.Err() == nil {
				d.log.Warn("release failed; will retry", "shard_id", id, "err", err)
			}
		}
	}

	var out []string
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range candidates {
		h := d.held[id]
		if h == nil || (h.pending != "" && h.pending != d.id) || now.Sub(h.sentAt) >= d.safe {
			continue
		}
		h.announced = true
		out = append(out, id)
	}
	return out, nil
}

// expiredLocked: another worker's lease, or a lease reserved for another worker, whose counter
// this worker has seen unchanged for a whole lease duration.
func (d *Dynamo) expiredLocked(l Lease, now time.Time) bool {
	if l.Owner == d.id || l.Owner == "" && (l.PendingOwner == "" || l.PendingOwner == d.id) {
		return false
	}
	o, ok := d.seen[l.ShardID]
	return ok && o.counter == l.Counter && now.Sub(o.since) >= d.cfg.leaseDuration
}

// reconcile compares the held leases with a scan: a lease another worker owns now, or whose
// counter moved past what this worker wrote, is lost; a hand-over request is noted. Leases
// taken after the scan started, and leases with a write in flight, are left for the next scan.
func (d *Dynamo) reconcile(snap map[string]Lease, sg uint64, now time.Time) {
	for id, h := range d.heldLeases() {
		if !h.mu.TryLock() {
			continue
		}
		d.mu.Lock()
		if l, ok := snap[id]; !h.gone && h.gen <= sg {
			switch {
			case !ok:
				d.loseLocked(id, h, "lease item missing")
			case l.Owner != d.id:
				d.loseLocked(id, h, "owned by "+cmp.Or(l.Owner, "nobody"))
			case l.Counter > h.counter:
				d.loseLocked(id, h, "lease counter moved")
			case l.PendingOwner != h.pending:
				h.pending, h.pendingSince = l.PendingOwner, now
				if l.PendingOwner != "" && l.PendingOwner != d.id {
					d.log.Info("hand-over asked", "shard_id", id, "new_owner", l.PendingOwner)
				}
			}
		}
		d.mu.Unlock()
		h.mu.Unlock()
	}
}

// take takes a free, expired or adopted lease, conditional on the counter seen.
func (d *Dynamo) take(ctx context.Context, v leaseView) {
	names := map[string]string{"#o": attrOwner, "#c": attrCounter, "#p": attrPendingOwner}
	values := map[string]types.AttributeValue{":me": str(d.id), ":cur": num(v.counter), ":next": num(v.counter + 1)}
	expr := "SET #o = :me, #c = :next"
	cond := "#c = :cur AND "
	reason := "unowned"
	switch v.owner {
	case "":
		cond += "attribute_not_exists(#o)"
		if v.pending == d.id {
			reason = "handed over"
		} else if v.pending != "" {
			reason = "reservation expired"
		}
	case d.id:
		cond += "#o = :me"
		reason = "owned by this worker"
	default:
		cond += "#o = :old"
		values[":old"] = str(v.owner)
		reason = "expired"
		expr += ", #sw = if_not_exists(#sw, :zero) + :one"
		names["#sw"], values[":zero"], values[":one"] = attrOwnerSwitches, num(0), num(1)
	}
	sent := d.cfg.now()
	_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(v.shardID),
		UpdateExpression:          aws.String(expr + " REMOVE #p"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	switch {
	case isConditionFailed(err):
		d.log.Debug("lease taken by another worker first", "shard_id", v.shardID)
		return
	case err != nil:
		if ctx.Err() == nil {
			d.log.Warn("take lease failed; will retry", "shard_id", v.shardID, "err", err)
		}
		return
	}
	d.mu.Lock()
	d.gen++
	d.held[v.shardID] = &heldLease{counter: v.counter + 1, sentAt: sent, gen: d.gen}
	d.mu.Unlock()
	if reason == "expired" {
		d.log.Info("lease taken", "shard_id", v.shardID, "reason", reason, "previous_owner", v.owner, "lease_counter", v.counter+1,
			"unchanged_for", v.idle.Round(time.Millisecond))
		return
	}
	d.log.Info("lease taken", "shard_id", v.shardID, "reason", reason, "previous_owner", v.owner, "lease_counter", v.counter+1)
}

// requestHandOver asks the owner of a lease to hand it over to this worker. The counter does not
// move: the owner keeps renewing and checkpointing until it lets go.
func (d *Dynamo) requestHandOver(ctx context.Context, v leaseView) {
	_, err := d.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: key(v.shardID),
		UpdateExpression:          aws.String("SET #p = :me"),
		ConditionExpression:       aws.String("#o = :owner AND #c = :cur AND attribute_not_exists(#p)"),
		ExpressionAttributeNames:  map[string]string{"#o": attrOwner, "#c": attrCounter, "#p": attrPendingOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": str(d.id), ":owner": str(v.owner), ":cur": num(v.counter)},
	})
	switch {
	case err == nil:
		d.log.Info("hand-over requested", "shard_id", v.shardID, "previous_owner", v.owner)
	case isConditionFailed(err):
		d.log.Debug("hand-over not requested: the lease changed", "shard_id", v.shardID)
	case ctx.Err() == nil:
		d.log.Warn("request hand-over failed", "shard_id", v.shardID, "err", err)
	}
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
