package esmapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
)

// These tests play the guard protocol's crash cases: a worker that stopped between its two
// writes, and its write landing late.

const (
	srcA = "arn:aws:kinesis:us-east-1:000000000000:stream/a"
	fnA  = "arn:aws:lambda:us-east-1:000000000000:function:fa"
	fnB  = "arn:aws:lambda:us-east-1:000000000000:function:fb"
)

func testCatalog(t *testing.T, api DynamoCatalogAPI) DynamoCatalog {
	t.Helper()
	c := DynamoCatalog{API: api, Table: "mappings"}
	if err := c.Ensure(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	return c
}

func rec(id string, rev int64, source, function string) Record {
	r := Record{Revision: rev, FunctionName: function}
	r.Mapping.UUID, r.Mapping.EventSourceArn, r.Mapping.FunctionArn = id, source, function
	return r
}

// holders are the mappings whose records have p.
func holders(t *testing.T, c DynamoCatalog, p pair) []string {
	t.Helper()
	recs, err := c.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range recs {
		if pairOf(&recs[i]) == p {
			ids = append(ids, recs[i].Mapping.UUID)
		}
	}
	return ids
}

func wantTaken(t *testing.T, err error, by string) {
	t.Helper()
	var taken *PairTakenError
	if !errors.As(err, &taken) || taken.UUID != by {
		t.Fatalf("%v, want the pair taken by %s", err, by)
	}
}

// TestCreateStoppedAfterItsGuard: a worker wrote a pair's guard for its new mapping x and
// stopped (or stalled) before x's record. Another create takes the pair over, and x's record,
// if it comes later, is refused.
func TestCreateStoppedAfterItsGuard(t *testing.T) {
	ctx := context.Background()
	c := testCatalog(t, fakedynamo.New())
	p := pair{srcA, fnA}
	if err := c.putGuard(ctx, p, guard{"x", 0}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, rec("y", 0, srcA, fnA)); err != nil {
		t.Fatalf("create of a pair whose guard's create never came: %v", err)
	}
	if err := c.putRecord(ctx, rec("x", 0, srcA, fnA)); !errors.Is(err, ErrConflict) {
		t.Fatalf("the stalled create's record, written after the take-over: %v, want ErrConflict", err)
	}
	if ids := holders(t, c, p); len(ids) != 1 || ids[0] != "y" {
		t.Fatalf("the pair's records: %v, want [y]", ids)
	}
}

// onRead calls hook before the n-th GetItem of key.
type onRead struct {
	*fakedynamo.DB
	key   string
	n     int
	reads atomic.Int32
	hook  func()
}

func (o *onRead) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if k, ok := in.Key[catalogKey].(*types.AttributeValueMemberS); ok && k.Value == o.key && int(o.reads.Add(1)) == o.n {
		o.hook()
	}
	return o.DB.GetItem(ctx, in, opts...)
}

// TestCreateWaitsForTheGuardsOwner: a second create finds the pair's guard before the first
// create's record: it waits, then answers that the first has the pair.
func TestCreateWaitsForTheGuardsOwner(t *testing.T) {
	ctx := context.Background()
	api := &onRead{DB: fakedynamo.New(), key: "x", n: 2}
	c := testCatalog(t, api)
	p := pair{srcA, fnA}
	if err := c.putGuard(ctx, p, guard{"x", 0}, nil); err != nil {
		t.Fatal(err)
	}
	api.hook = func() { // x's record lands while y waits
		if err := c.putRecord(ctx, rec("x", 0, srcA, fnA)); err != nil {
			t.Error(err)
		}
	}
	wantTaken(t, c.Put(ctx, rec("y", 0, srcA, fnA)), "x")
	if ids := holders(t, c, p); len(ids) != 1 || ids[0] != "x" {
		t.Fatalf("the pair's records: %v, want [x]", ids)
	}
}

// TestMoveStoppedAfterItsGuard: an update of u to function b wrote b's guard and stopped before
// u's record. A create of the pair takes it over, and the update's record, if it comes later, is
// refused; u keeps its function.
func TestMoveStoppedAfterItsGuard(t *testing.T) {
	ctx := context.Background()
	c := testCatalog(t, fakedynamo.New())
	for rev := range int64(3) {
		if err := c.Put(ctx, rec("u", rev, srcA, fnA)); err != nil {
			t.Fatal(err)
		}
	}
	pb := pair{srcA, fnB}
	if err := c.claim(ctx, pb, "u", 3); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, rec("y", 0, srcA, fnB)); err != nil {
		t.Fatalf("create of a pair whose update never came: %v", err)
	}
	if err := c.putRecord(ctx, rec("u", 3, srcA, fnB)); !errors.Is(err, ErrConflict) {
		t.Fatalf("the stalled update's record, written after the take-over: %v, want ErrConflict", err)
	}
	if ids := holders(t, c, pb); len(ids) != 1 || ids[0] != "y" {
		t.Fatalf("the pair's records: %v, want [y]", ids)
	}
	if ids := holders(t, c, pair{srcA, fnA}); len(ids) != 1 || ids[0] != "u" {
		t.Fatalf("u's own pair: %v, want [u]", ids)
	}
}

// TestGuardsLeftBehindAreTakenAtOnce: the guard of a pair its mapping moved away from, and that
// of a deleted mapping, whose release failed, are taken over without fencing anything.
func TestGuardsLeftBehindAreTakenAtOnce(t *testing.T) {
	ctx := context.Background()
	c := testCatalog(t, fakedynamo.New())
	pa := pair{srcA, fnA}
	if err := c.Put(ctx, rec("u", 0, srcA, fnA)); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, rec("u", 1, srcA, fnB)); err != nil {
		t.Fatal(err)
	}
	if err := c.putGuard(ctx, pa, guard{"u", 0}, nil); err != nil { // as if the release had failed
		t.Fatal(err)
	}
	if err := c.Put(ctx, rec("y", 0, srcA, fnA)); err != nil {
		t.Fatal(err)
	}
	if r, _, err := c.readRecord(ctx, "u"); err != nil || r == nil || r.Revision != 1 {
		t.Fatalf("u after the take-over of a guard it left: %+v %v, want revision 1 (not fenced)", r, err)
	}
	wantTaken(t, c.Put(ctx, rec("z", 0, srcA, fnB)), "u")
}

// TestOldRecordsGetGuards: records written before guards existed get them at the next Load.
func TestOldRecordsGetGuards(t *testing.T) {
	ctx := context.Background()
	c := testCatalog(t, fakedynamo.New())
	if err := c.putRecord(ctx, rec("old", 4, srcA, fnA)); err == nil {
		t.Fatal("a record written from a revision the catalog does not hold")
	}
	if err := c.putRecord(ctx, rec("old", 0, srcA, fnA)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	wantTaken(t, c.Put(ctx, rec("new", 0, srcA, fnA)), "old")
}

// crashing is the in-memory DynamoDB whose writes fail at random, before they apply or after,
// and that checks after every write that no two records have one pair.
type crashing struct {
	*fakedynamo.DB
	t       *testing.T
	mu      sync.Mutex
	rng     *rand.Rand
	crashes int
	writes  int
}

func (c *crashing) write(ctx context.Context, apply func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := c.rng.IntN(25)
	if fail == 0 {
		c.crashes++
		return errors.New("injected: the worker stopped before this write")
	}
	if err := apply(); err != nil {
		return err
	}
	c.writes++
	c.unique(ctx)
	if fail == 1 {
		c.crashes++
		return errors.New("injected: the worker stopped after this write")
	}
	return nil
}

func (c *crashing) unique(ctx context.Context) {
	out, err := c.DB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("mappings")})
	if err != nil {
		c.t.Error(err)
		return
	}
	seen := map[pair]string{}
	for _, item := range out.Items {
		v, ok := item[catalogRecord].(*types.AttributeValueMemberS)
		if !ok {
			continue
		}
		r := new(Record)
		if err := json.Unmarshal([]byte(v.Value), r); err != nil {
			c.t.Error(err)
			continue
		}
		if other, dup := seen[pairOf(r)]; dup {
			c.t.Errorf("after write %d, mappings %s and %s both have %s → %s", c.writes, other, r.Mapping.UUID, r.Mapping.EventSourceArn, r.Mapping.FunctionArn)
		}
		seen[pairOf(r)] = r.Mapping.UUID
	}
}

func (c *crashing) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	var out *dynamodb.PutItemOutput
	err := c.write(ctx, func() (err error) { out, err = c.DB.PutItem(ctx, in, o...); return err })
	return out, err
}

func (c *crashing) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	var out *dynamodb.DeleteItemOutput
	err := c.write(ctx, func() (err error) { out, err = c.DB.DeleteItem(ctx, in, o...); return err })
	return out, err
}

// TestPairsUniqueUnderCrashes: workers create, move (change the function of) and delete
// mappings of two sources and two functions at once, each write failing at random before or
// after it applies (a worker stopping between two writes); after every write, no two records
// have one pair.
func TestPairsUniqueUnderCrashes(t *testing.T) {
	ctx := context.Background()
	api := &crashing{DB: fakedynamo.New(), t: t, rng: rand.New(rand.NewPCG(1, 2))}
	c := testCatalog(t, api)
	sources := []string{srcA, "arn:aws:kinesis:us-east-1:000000000000:stream/b"}
	fns := []string{fnA, fnB}
	var seq atomic.Int64
	counts := make([]map[string]int, 4)
	var wg sync.WaitGroup
	for w := range counts {
		counts[w] = map[string]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for range 40 {
				recs, err := c.Load(ctx)
				if err != nil {
					counts[w]["load failed"]++
					continue
				}
				src, fn := sources[rng.IntN(2)], fns[rng.IntN(2)]
				var op string
				switch k := rng.IntN(3); {
				case k == 0 || len(recs) == 0:
					op, err = "create", c.Put(ctx, rec(fmt.Sprint("m", seq.Add(1)), 0, src, fn))
				case k == 1:
					r := recs[rng.IntN(len(recs))]
					r.Revision++
					r.Mapping.EventSourceArn, r.Mapping.FunctionArn = src, fn
					op, err = "move", c.Put(ctx, r)
				default:
					r := recs[rng.IntN(len(recs))]
					op, err = "delete", c.Delete(ctx, r.Mapping.UUID, r.Revision)
				}
				var taken *PairTakenError
				switch {
				case err == nil:
					counts[w][op]++
				case errors.As(err, &taken):
					counts[w][op+" refused: pair taken"]++
				default:
					counts[w][op+" failed"]++
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("writes %d, crashes injected %d; operations %v", api.writes, api.crashes, counts)
	total := map[string]int{}
	for _, m := range counts {
		for k, n := range m {
			total[k] += n
		}
	}
	for _, k := range []string{"create", "move", "delete", "create refused: pair taken", "move refused: pair taken"} {
		if total[k] == 0 {
			t.Errorf("no %q among %v: the test exercised too little", k, total)
		}
	}
	if api.crashes == 0 {
		t.Error("no write failed: the test injected nothing")
	}
}
