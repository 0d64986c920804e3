package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/aws"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// The catalog schedule: two or three `esm serve` managers (esmapi.Manager) share one catalog
// (esmapi.DynamoCatalog on fake/fakedynamo) and take Creates, Updates and Deletes, often
// several at the same instant on different managers for the same mapping. Then the managers
// are left to sync, and three invariants are judged:
//
//   - every manager converges on the catalog: the same mappings, with the catalog's settings;
//   - no change resurrects a deleted mapping: once a Delete was accepted, the catalog never
//     again holds the mapping as live, and no manager serves it;
//   - every accepted Update's settings are what the catalog holds at the end, unless a change
//     of the same setting accepted not before it (or a Delete) superseded them.

// Catalog invariants.
const (
	InvCatalogConverge   = "catalog: every manager converges on the catalog"
	InvCatalogResurrect  = "catalog: no change resurrects a deleted mapping"
	InvCatalogSuperseded = "catalog: every accepted change held or superseded"
)

// CatalogInvariants lists them in report order.
var CatalogInvariants = []string{InvCatalogConverge, InvCatalogResurrect, InvCatalogSuperseded}

// Catalog operation kinds, as counted in Result.Injected.
const (
	OpCatalogCreate = "catalog-create"
	OpCatalogUpdate = "catalog-update"
	OpCatalogDelete = "catalog-delete"
)

const catalogTable = "sim-catalog"

// catalogFields are the settings Updates change.
var catalogFields = []string{"BatchSize", "ParallelizationFactor", "MaximumRetryAttempts"}

// catalogOp is one API call and its answer.
type catalogOp struct {
	kind             string
	manager          int
	uuid             string
	field            string
	value            int
	issued, answered time.Time
	accepted         bool
	answer           string // the error, when refused
}

// catalogWrite is one write that reached the catalog table.
type catalogWrite struct {
	at      time.Time
	uuid    string
	deleted bool // the item was deleted
	rec     esmapi.Record
}

// catalogWorld is one catalog run's shared state.
type catalogWorld struct {
	db      *fakedynamo.DB
	mu      sync.Mutex
	ops     []*catalogOp
	writes  []catalogWrite
	streams int
}

// catalogAPI is the managers' connection to the catalog table: it records every write that
// went through.
type catalogAPI struct{ w *catalogWorld }

func (c catalogAPI) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return c.w.db.Scan(ctx, in, o...)
}

func (c catalogAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return c.w.db.GetItem(ctx, in, o...)
}

func (c catalogAPI) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return c.w.db.DescribeTable(ctx, in, o...)
}

func (c catalogAPI) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return c.w.db.CreateTable(ctx, in, o...)
}

func (c catalogAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.w.mu.Lock() // the write and its record in one step: the log is in the table's order
	defer c.w.mu.Unlock()
	out, err := c.w.db.PutItem(ctx, in, o...)
	if err == nil {
		wr := catalogWrite{at: time.Now()}
		if v, ok := in.Item["record"].(*dtypes.AttributeValueMemberS); ok {
			_ = json.Unmarshal([]byte(v.Value), &wr.rec)
		}
		wr.uuid = wr.rec.Mapping.UUID
		c.w.writes = append(c.w.writes, wr)
	}
	return out, err
}

func (c catalogAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	out, err := c.w.db.DeleteItem(ctx, in, o...)
	if err == nil {
		wr := catalogWrite{at: time.Now(), deleted: true}
		if v, ok := in.Key["uuid"].(*dtypes.AttributeValueMemberS); ok {
			wr.uuid = v.Value
		}
		c.w.writes = append(c.w.writes, wr)
	}
	return out, err
}

// RunCatalog plays a seed's catalog schedule and judges it. It must be called inside a
// testing/synctest bubble.
func RunCatalog(seed int64) Result {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xca7a))
	managers := 2 + rng.IntN(2)
	res := Result{Injected: map[string]int{}, Checked: map[string]int{}}
	cw := &catalogWorld{db: fakedynamo.New()}
	kin := fakekinesis.New()
	ctx := context.Background()
	syncEvery := time.Duration(200+rng.IntN(1800)) * time.Millisecond
	deleteDelay := time.Duration(rng.IntN(2000)) * time.Millisecond
	res.Schedule = Schedule{Seed: seed}
	fail := func(format string, args ...any) Result {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
		return res
	}
	catalog := esmapi.DynamoCatalog{API: catalogAPI{cw}, Table: catalogTable}
	if err := catalog.Ensure(ctx, true); err != nil {
		return fail("catalog table: %v", err)
	}
	fn := esmapi.Function{Name: "fn", Invoker: invoke.InvokerFunc(func(context.Context, []byte) (invoke.Response, error) {
		return invoke.Response{StatusCode: 200, Payload: []byte("null")}, nil
	})}
	progress := esmapi.ProgressFuncs{
		StoreFunc:  func(context.Context, string) (poller.Store, error) { return poller.NewMemoryStore(), nil },
		DeleteFunc: func(context.Context, string) error { return nil },
	}
	// The managers run their mappings on the in-memory Kinesis.
	r, err := runner.New(aws.Config{Region: "us-east-1"}, runner.WithKinesis(kin), runner.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return fail("runner: %v", err)
	}
	ms := make([]*esmapi.Manager, managers)
	for i := range ms {
		m, err := esmapi.Open(ctx, r, catalog, progress, esmapi.WithFunctions(fn),
			esmapi.WithSyncInterval(syncEvery), esmapi.WithDeleteDelay(deleteDelay), esmapi.WithRestartBackoff(100*time.Millisecond),
			esmapi.WithBase(poller.Config{PollInterval: time.Second}))
		if err != nil {
			return fail("open manager %d: %v", i, err)
		}
		ms[i] = m
	}
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()

	var uuids []string
	var wg sync.WaitGroup
	do := func(op *catalogOp) {
		op.issued = time.Now()
		var v esmapi.EventSourceMapping
		var e *esmapi.APIError
		m := ms[op.manager]
		switch op.kind {
		case OpCatalogCreate:
			cw.mu.Lock()
			cw.streams++
			name := fmt.Sprintf("catalog-%d", cw.streams)
			cw.mu.Unlock()
			arn := kin.CreateStream(name, 1)
			v, e = m.Create(ctx, fmt.Appendf(nil, `{"FunctionName":"fn","EventSourceArn":%q,"StartingPosition":"TRIM_HORIZON"}`, arn))
		case OpCatalogUpdate:
			v, e = m.Update(ctx, op.uuid, fmt.Appendf(nil, `{%q:%d}`, op.field, op.value))
		case OpCatalogDelete:
			v, e = m.Delete(ctx, op.uuid)
		}
		cw.mu.Lock()
		defer cw.mu.Unlock()
		op.answered, op.accepted = time.Now(), e == nil
		if e != nil {
			op.answer = e.Error()
		} else if op.kind == OpCatalogCreate {
			op.uuid = v.UUID
			uuids = append(uuids, v.UUID)
		}
		cw.ops = append(cw.ops, op)
	}
	// Rounds of calls: each round's calls start at the same instant, on random managers, mostly
	// on the same mapping.
	rounds := 6 + rng.IntN(10)
	for range rounds {
		cw.mu.Lock()
		known := slices.Clone(uuids)
		cw.mu.Unlock()
		target := ""
		if len(known) > 0 {
			target = known[rng.IntN(len(known))]
		}
		for range 1 + rng.IntN(3) {
			op := &catalogOp{manager: rng.IntN(managers), uuid: target}
			switch x := rng.Float64(); {
			case target == "" || x < 0.2:
				op.kind = OpCatalogCreate
			case x < 0.8:
				op.kind = OpCatalogUpdate
				op.field = catalogFields[rng.IntN(len(catalogFields))]
				switch op.field {
				case "BatchSize":
					op.value = 1 + rng.IntN(500)
				case "ParallelizationFactor":
					op.value = 1 + rng.IntN(10)
				default:
					op.value = rng.IntN(20)
				}
				if rng.IntN(4) == 0 && len(known) > 1 {
					op.uuid = known[rng.IntN(len(known))]
				}
			default:
				op.kind = OpCatalogDelete
			}
			res.Injected[op.kind]++
			wg.Add(1)
			go func() { defer wg.Done(); do(op) }()
		}
		time.Sleep(time.Duration(rng.IntN(3*int(syncEvery/time.Millisecond))) * time.Millisecond)
	}
	wg.Wait()
	// Converged: within a few sync intervals after the last change (and the deletes' delay).
	time.Sleep(5*syncEvery + 2*deleteDelay + 2*time.Second)
	judgeCatalog(&res, cw, catalog, ms)
	return res
}

// judgeCatalog judges the three catalog invariants.
func judgeCatalog(res *Result, cw *catalogWorld, catalog esmapi.DynamoCatalog, ms []*esmapi.Manager) {
	bad := func(format string, args ...any) {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	}
	recs, err := catalog.Load(context.Background())
	if err != nil {
		bad("catalog: load: %v", err)
		return
	}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	final := map[string]esmapi.Record{}
	for _, r := range recs {
		if !r.Deleting {
			final[r.Mapping.UUID] = r
		}
	}
	deleted := map[string]*catalogOp{}
	for _, op := range cw.ops {
		if op.kind == OpCatalogDelete && op.accepted {
			if d := deleted[op.uuid]; d == nil || op.answered.Before(d.answered) {
				deleted[op.uuid] = op
			}
		}
	}
	var all []string
	for _, op := range cw.ops {
		if op.kind == OpCatalogCreate && op.accepted {
			all = append(all, op.uuid)
		}
	}
	// Convergence: every manager serves exactly the catalog's live mappings, with its settings.
	for i, m := range ms {
		for _, id := range all {
			res.Checked[InvCatalogConverge]++
			v, e := m.Get(id)
			r, live := final[id]
			switch {
			case !live && e == nil && v.State != esmapi.StateDeleting:
				bad("catalog: manager %d serves %s (%s), which the catalog does not hold", i, id, v.State)
			case live && e != nil:
				bad("catalog: manager %d does not serve %s, which the catalog holds: %v", i, id, e)
			case live && (v.BatchSize != r.Mapping.BatchSize || v.ParallelizationFactor != r.Mapping.ParallelizationFactor ||
				v.MaximumRetryAttempts != r.Mapping.MaximumRetryAttempts):
				bad("catalog: manager %d runs %s with BatchSize %d, ParallelizationFactor %d, MaximumRetryAttempts %d; the catalog says %d, %d, %d",
					i, id, v.BatchSize, v.ParallelizationFactor, v.MaximumRetryAttempts,
					r.Mapping.BatchSize, r.Mapping.ParallelizationFactor, r.Mapping.MaximumRetryAttempts)
			}
		}
	}
	// No resurrection: after a Delete was accepted, no write leaves the mapping live, and the
	// catalog does not hold it.
	for id, d := range deleted {
		res.Checked[InvCatalogResurrect]++
		if _, live := final[id]; live {
			bad("catalog: %s, deleted at %s by manager %d, is live in the catalog at the end", id, d.answered.Sub(epoch), d.manager)
		}
		gone := false
		for _, wr := range cw.writes {
			if wr.uuid != id {
				continue
			}
			if gone && !wr.deleted && !wr.rec.Deleting {
				bad("catalog: %s written live at %s after its deletion was recorded", id, wr.at.Sub(epoch))
				break
			}
			gone = gone || wr.deleted || wr.rec.Deleting
		}
	}
	// Accepted changes: held at the end, or superseded by an accepted change of the same
	// setting that did not precede them, or by an accepted Delete.
	value := func(r esmapi.Record, field string) int {
		switch field {
		case "BatchSize":
			return r.Mapping.BatchSize
		case "ParallelizationFactor":
			return r.Mapping.ParallelizationFactor
		}
		return r.Mapping.MaximumRetryAttempts
	}
	for _, u := range cw.ops {
		if u.kind != OpCatalogUpdate || !u.accepted {
			continue
		}
		res.Checked[InvCatalogSuperseded]++
		if deleted[u.uuid] != nil {
			continue
		}
		r, live := final[u.uuid]
		if !live {
			bad("catalog: %s, updated (%s=%d) by manager %d and never deleted, is not in the catalog", u.uuid, u.field, u.value, u.manager)
			continue
		}
		got := value(r, u.field)
		if got == u.value {
			continue
		}
		superseded := false
		for _, v := range cw.ops {
			if v != u && v.kind == OpCatalogUpdate && v.accepted && v.uuid == u.uuid && v.field == u.field &&
				v.value == got && !v.answered.Before(u.issued) {
				superseded = true
			}
		}
		if !superseded {
			bad("catalog: manager %d accepted %s=%d for %s at %s; the catalog holds %d, set by no change accepted since",
				u.manager, u.field, u.value, u.uuid, u.answered.Sub(epoch), got)
		}
	}
}
