package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source/dynamostreams"
)

// The DynamoDB Streams schedules run the engine on a table's stream of the in-memory DynamoDB
// (source/dynamostreams over fake/fakedynamo): items updated in versions while the stream's shards
// rotate (a closed shard ends with a null iterator and its child is found by DescribeStream, one
// parent each), the function failing at random and on poison versions, one worker or two sharing
// a lease table in the same DynamoDB, stopped and started again. The judge: every change delivered
// or sent to the destination, the first deliveries of each item in version order, no invocation of
// a child shard before its parent's last one ended, no two invocations of one item at once, and
// every event in Lambda's DynamoDB shape.

// InvDDBShape is the DynamoDB schedules' own invariant.
const InvDDBShape = "DynamoDB events in Lambda's shape (aws:dynamodb, keys, images, sequence numbers)"

// ddbSchedule is a DynamoDB Streams run's settings, drawn from its seed.
type ddbSchedule struct {
	Seed                       int64
	Workers, Items, Changes    int
	Rotations                  int
	BatchSize, PF, Retries     int
	Bisect, Partial            bool
	FailRate                   float64
	Poison                     bool
	Stops                      int
	BatchWindow, LeaseDuration time.Duration
	// OpenShards is how many shards of the stream are open at once; IteratorTTL how long an
	// iterator lives (0: 15 minutes); Trim whether the stream is trimmed mid-run, TrimAge the
	// age of the records it removes.
	OpenShards  int
	IteratorTTL time.Duration
	Trim        bool
	TrimAge     time.Duration
}

func (s ddbSchedule) String() string {
	return fmt.Sprintf("ddb seed %d: workers=%d items=%d changes=%d open=%d rotations=%d batch=%d PF=%d retries=%d bisect=%t partial=%t fail=%.2f poison=%t stops=%d window=%s iterator-ttl=%s trim=%t/%s\n",
		s.Seed, s.Workers, s.Items, s.Changes, s.OpenShards, s.Rotations, s.BatchSize, s.PF, s.Retries, s.Bisect, s.Partial, s.FailRate, s.Poison, s.Stops, s.BatchWindow,
		s.IteratorTTL, s.Trim, s.TrimAge)
}

func generateDDB(seed int64) ddbSchedule {
	r := rand.New(rand.NewPCG(uint64(seed), 0xdd))
	s := ddbSchedule{Seed: seed, Workers: 1 + r.IntN(2), Items: 3 + r.IntN(20), Changes: 100 + r.IntN(400),
		Rotations: 1 + r.IntN(4), BatchSize: 1 + r.IntN(40), PF: 1 + r.IntN(4), Retries: r.IntN(4),
		Bisect: r.IntN(2) == 0, Partial: r.IntN(2) == 0, FailRate: []float64{0, 0.02, 0.1}[r.IntN(3)],
		Poison: r.IntN(3) == 0, Stops: r.IntN(4), LeaseDuration: 3 * time.Second}
	if r.IntN(3) == 0 {
		s.BatchWindow = time.Duration(r.IntN(1000)) * time.Millisecond
	}
	s.OpenShards = 1 + r.IntN(3)
	if r.IntN(3) == 0 {
		s.IteratorTTL = time.Duration(500+r.IntN(2500)) * time.Millisecond
	}
	if r.IntN(4) == 0 {
		s.Trim, s.TrimAge = true, time.Duration(r.IntN(3000))*time.Millisecond
	}
	return s
}

// ddbCall is an invocation as the function saw it.
type ddbCall struct {
	start, end time.Time
	seqs       []string
	items      []string // the item of each record
	versions   []int
}

// ddbWorld is one DynamoDB Streams run.
type ddbWorld struct {
	s   ddbSchedule
	db  *fakedynamo.DB
	arn string
	// prod draws the producer's choices (its goroutine's only); rnd the function's (under mu).
	prod, rnd *rand.Rand

	mu        sync.Mutex
	calls     []*ddbCall
	discarded map[string]bool // sequence numbers sent to the destination
	running   map[string]int  // item → invocations running with it
	mem       *poller.MemoryStore
	res       Result
}

func (w *ddbWorld) inject(kind string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.res.Injected[kind]++
}

func (w *ddbWorld) violate(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.res.Violations = append(w.res.Violations, fmt.Sprintf(format, args...))
}

// RunDynamoDB runs seed's DynamoDB Streams schedule and judges it (in virtual time: call it
// inside a synctest bubble).
func RunDynamoDB(seed int64) Result {
	s := generateDDB(seed)
	dbOpts := []fakedynamo.Option{fakedynamo.WithStreamShards(s.OpenShards)}
	if s.IteratorTTL > 0 {
		dbOpts = append(dbOpts, fakedynamo.WithIteratorTTL(s.IteratorTTL))
	}
	w := &ddbWorld{s: s, db: fakedynamo.New(dbOpts...), prod: rand.New(rand.NewPCG(uint64(seed), 0x9d)), rnd: rand.New(rand.NewPCG(uint64(seed), 0x5eed)),
		discarded: map[string]bool{}, running: map[string]int{},
		res: Result{Injected: map[string]int{}, Checked: map[string]int{}}}
	w.res.Schedule = Schedule{Seed: seed, Workers: s.Workers}
	if err := w.setUp(); err != nil {
		w.violate("set up: %v", err)
		return w.res
	}
	var wg sync.WaitGroup
	stops := make([]context.CancelFunc, s.Workers)
	dones := make([]chan error, s.Workers)
	for i := range s.Workers {
		stops[i], dones[i] = w.startWorker(&wg, i)
	}
	w.produce(func(i int) { // a stop and a start of one worker, mid-run
		n := i % s.Workers
		stops[n]()
		if err := <-dones[n]; err != nil {
			w.violate("worker %d stopped with %v", n, err)
		}
		w.inject("ddb-stop")
		stops[n], dones[n] = w.startWorker(&wg, n)
	})
	w.awaitAll()
	for i := range stops {
		stops[i]()
		if err := <-dones[i]; err != nil {
			w.violate("worker %d stopped with %v", i, err)
		}
	}
	wg.Wait()
	w.judge()
	return w.res
}

// setUp creates the table with its stream, and the lease table for two workers.
func (w *ddbWorld) setUp() error {
	ctx := context.Background()
	out, err := w.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("sim"), BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		return err
	}
	w.arn = aws.ToString(out.TableDescription.LatestStreamArn)
	if w.s.Workers > 1 {
		return lease.EnsureTable(ctx, w.db, "sim-leases", true)
	}
	return nil
}

// startWorker starts worker n's poller (on the lease table when there are two workers); the
// cancel stops it, and its Run's error comes on the channel.
func (w *ddbWorld) startWorker(wg *sync.WaitGroup, n int) (context.CancelFunc, chan error) {
	done := make(chan error, 1)
	retries := w.s.Retries
	cfg := poller.Config{
		StartingPosition: poller.TrimHorizon, BatchSize: w.s.BatchSize, ParallelizationFactor: w.s.PF,
		BisectBatchOnFunctionError: w.s.Bisect, ReportBatchItemFailures: w.s.Partial, MaximumRetryAttempts: &retries,
		MaximumBatchingWindow: w.s.BatchWindow, OnFailureDestination: "arn:aws:sqs:us-east-1:000000000000:ddbsim-dlq",
		ShardSyncInterval: 2 * time.Second,
	}
	src, err := dynamostreams.New(ddbStreams{w.db, w}, w.arn)
	if err != nil {
		done <- err
		return func() {}, done
	}
	opts := []poller.Option{poller.WithDestination(ddbDest{w}), poller.WithInvocationBound(5 * time.Second),
		poller.WithFunctionARN("arn:aws:lambda:us-east-1:000000000000:function:ddbsim")}
	var store poller.Store = w.store()
	ctx, cancel := context.WithCancel(context.Background())
	lctx, stopLeases := context.WithCancel(context.Background())
	var runLeases func(context.Context) error
	if w.s.Workers > 1 {
		d, err := lease.NewDynamo(w.db, "sim-leases", fmt.Sprintf("w%d", n), lease.WithLeaseDuration(w.s.LeaseDuration),
			lease.WithFunctionTimeout(5*time.Second))
		if err != nil {
			done <- err
			cancel()
			stopLeases()
			return func() {}, done
		}
		store, runLeases, cfg.ClaimInterval = d, d.Run, d.ClaimInterval()
		opts = append(opts, poller.WithCoordinator(d))
	}
	p, err := poller.New(src, cfg, store, ddbFunction{w}, opts...)
	if err != nil {
		done <- err
		cancel()
		stopLeases()
		return func() {}, done
	}
	wg.Go(func() {
		var leasesDone sync.WaitGroup
		if runLeases != nil {
			leasesDone.Go(func() { _ = runLeases(lctx) })
		}
		err := p.Run(ctx)
		stopLeases()
		leasesDone.Wait()
		done <- err
	})
	return cancel, done
}

// store is the one worker's durable store (its progress outlives its stops).
func (w *ddbWorld) store() poller.Store {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mem == nil {
		w.mem = poller.NewMemoryStore()
	}
	return w.mem
}

// produce writes the changes (version v of an item, one after another), rotating the stream's
// shards and calling stop (a worker's stop and start) at random points.
func (w *ddbWorld) produce(stop func(int)) {
	ctx := context.Background()
	versions := map[string]int{}
	rotateAt, stopAt, trimAt := w.points(w.s.Rotations), w.points(w.s.Stops), w.points(0)
	if w.s.Trim {
		trimAt = w.points(1)
	}
	for i := range w.s.Changes {
		item := fmt.Sprintf("item-%d", w.prod.IntN(w.s.Items))
		versions[item]++
		v := versions[item]
		attrs := map[string]ddbtypes.AttributeValue{"k": &ddbtypes.AttributeValueMemberS{Value: item},
			"v": &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(v)}}
		if w.s.Poison && i == w.s.Changes/2 {
			attrs["poison"] = &ddbtypes.AttributeValueMemberBOOL{Value: true}
			w.inject("poison-record")
		}
		if _, err := w.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("sim"), Item: attrs}); err != nil {
			w.violate("put %s v%d: %v", item, v, err)
		}
		if rotateAt[i] {
			if err := w.db.RotateStream("sim"); err != nil {
				w.violate("rotate: %v", err)
			}
			w.inject("ddb-rotate")
		}
		if stopAt[i] {
			stop(i)
		}
		if trimAt[i] { // the records older than TrimAge go, read or not (excused from the judge)
			if err := w.db.TrimStream("sim", time.Now().Add(-w.s.TrimAge)); err != nil {
				w.violate("trim: %v", err)
			}
			w.inject("ddb-trim")
		}
		time.Sleep(time.Duration(5+w.prod.IntN(40)) * time.Millisecond)
	}
}

// points are n distinct change indexes, drawn at random.
func (w *ddbWorld) points(n int) map[int]bool {
	out := map[int]bool{}
	for len(out) < n {
		out[1+w.prod.IntN(w.s.Changes-1)] = true
	}
	return out
}

// awaitAll waits (virtual time) until every change written was delivered or discarded, or
// two minutes passed.
func (w *ddbWorld) awaitAll() {
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); {
		if missing, _ := w.missing(); len(missing) == 0 {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}
