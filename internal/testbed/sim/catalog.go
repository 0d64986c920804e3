package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/aws"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
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
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// The catalog schedule: two or three `esm serve` managers (esmapi.Manager) share one catalog
// (esmapi.DynamoCatalog on fake/fakedynamo) and take Creates, template starts (EnsureMapping),
// Updates (of settings, or of the function) and Deletes, often several at the same instant on
// different managers for the same mapping, or for the same stream and function. In some seeds
// catalog writes fail now and then, before they apply or after (a worker stopping between two
// writes). Then the managers are left to sync, and four invariants are judged:
//
//   - after every write, no two records of the catalog have one event source and function, and
//     a template start that did not create the mapping named one the catalog held;
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
	InvCatalogUnique     = "catalog: one mapping per source and function, adopted by template starts"
)

// CatalogInvariants lists them in report order.
var CatalogInvariants = []string{InvCatalogConverge, InvCatalogResurrect, InvCatalogSuperseded, InvCatalogUnique}

// Catalog operation kinds, as counted in Result.Injected.
const (
	OpCatalogCreate = "catalog-create"
	OpCatalogUpdate = "catalog-update"
	OpCatalogDelete = "catalog-delete"
	// OpCatalogEnsure is a template start: EnsureMapping of a stream and function.
	OpCatalogEnsure = "catalog-template-start"
	// OpCatalogMove is an Update that changes the mapping's function.
	OpCatalogMove = "catalog-update-function"
	// FCatalogWriteFailed and FCatalogWriteLost are catalog writes that failed before they
	// applied, and after (the answer lost).
	FCatalogWriteFailed = "catalog-write-failed"
	FCatalogWriteLost   = "catalog-write-response-lost"
)

// CatalogKinds are the operations and faults of the catalog schedule.
var CatalogKinds = []string{OpCatalogCreate, OpCatalogUpdate, OpCatalogDelete, OpCatalogEnsure, OpCatalogMove, FCatalogWriteFailed, FCatalogWriteLost}

// catalogFunctions are the functions the managers register.
var catalogFunctions = []string{"fn", "fn2"}

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
	stream, fn       string // a create's, a template start's, a move's
	created          bool   // a template start made the mapping
	issued, answered time.Time
	accepted         bool
	answer           string // the error, when refused
}

// mayHaveApplied tells whether the call's change may be in the catalog: it was accepted, or it
// failed with a service error (a write whose answer was lost applied).
func (op *catalogOp) mayHaveApplied() bool {
	return op.accepted || strings.HasPrefix(op.answer, esmapi.ServiceError)
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
	streams []string
	// faults: one write in faultEvery fails (0: none), before it applies or after.
	faultEvery int
	rng        *rand.Rand
	injected   map[string]int
	unique     int      // writes after which the pairs were checked
	dups       []string // pairs held twice
}

// errInjected is a catalog write's injected failure.
var errInjected = errors.New("injected: the connection to DynamoDB failed")

// fault tells whether this write fails (kind), rolling once per write and side; cw.mu is held.
func (cw *catalogWorld) fault(kind string) bool {
	if cw.faultEvery == 0 || cw.rng.IntN(2*cw.faultEvery) != 0 {
		return false
	}
	cw.injected[kind]++
	return true
}

// checkPairs judges, after a write, that no two records have one source and function; cw.mu is
// held.
func (cw *catalogWorld) checkPairs(ctx context.Context) {
	cw.unique++
	out, err := cw.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(catalogTable)})
	if err != nil {
		cw.dups = append(cw.dups, fmt.Sprintf("scan: %v", err))
		return
	}
	seen := map[[2]string]string{}
	for _, item := range out.Items {
		v, ok := item["record"].(*dtypes.AttributeValueMemberS)
		if !ok {
			continue
		}
		var r esmapi.Record
		if err := json.Unmarshal([]byte(v.Value), &r); err != nil {
			cw.dups = append(cw.dups, fmt.Sprintf("record: %v", err))
			continue
		}
		p := [2]string{r.Mapping.EventSourceArn, r.Mapping.FunctionArn}
		if other, dup := seen[p]; dup && len(cw.dups) < 5 {
			cw.dups = append(cw.dups, fmt.Sprintf("catalog: after write %d at %s, mappings %s and %s both map %s to %s",
				cw.unique, time.Now().Sub(epoch), other, r.Mapping.UUID, p[0], p[1]))
		}
		seen[p] = r.Mapping.UUID
	}
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
	if c.w.fault(FCatalogWriteFailed) {
		return nil, errInjected
	}
	out, err := c.w.db.PutItem(ctx, in, o...)
	if err == nil {
		defer c.w.checkPairs(ctx)
		wr := catalogWrite{at: time.Now()}
		if v, ok := in.Item["record"].(*dtypes.AttributeValueMemberS); ok {
			_ = json.Unmarshal([]byte(v.Value), &wr.rec)
		}
		wr.uuid = wr.rec.Mapping.UUID
		c.w.writes = append(c.w.writes, wr)
		if c.w.fault(FCatalogWriteLost) {
			return nil, errInjected
		}
	}
	return out, err
}

func (c catalogAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	if c.w.fault(FCatalogWriteFailed) {
		return nil, errInjected
	}
	out, err := c.w.db.DeleteItem(ctx, in, o...)
	if err == nil {
		wr := catalogWrite{at: time.Now(), deleted: true}
		if v, ok := in.Key["uuid"].(*dtypes.AttributeValueMemberS); ok {
			wr.uuid = v.Value
		}
		c.w.writes = append(c.w.writes, wr)
		if c.w.fault(FCatalogWriteLost) {
			return nil, errInjected
		}
	}
	return out, err
}

// RunCatalog plays a seed's catalog schedule and judges it. It must be called inside a
// testing/synctest bubble.
func RunCatalog(seed int64) Result {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xca7a))
	managers := 2 + rng.IntN(2)
	res := Result{Injected: map[string]int{}, Checked: map[string]int{}}
	cw := &catalogWorld{db: fakedynamo.New(), rng: rand.New(rand.NewPCG(uint64(seed), 0xfa17)), injected: res.Injected}
	if rng.IntN(2) == 0 {
		cw.faultEvery = 5 + rng.IntN(15)
	}
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
	var fns []esmapi.Function
	for _, name := range catalogFunctions {
		fns = append(fns, esmapi.Function{Name: name, Invoker: invoke.InvokerFunc(func(context.Context, []byte) (invoke.Response, error) {
			return invoke.Response{StatusCode: 200, Payload: []byte("null")}, nil
		})})
	}
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
		m, err := esmapi.Open(ctx, r, catalog, progress, esmapi.WithFunctions(fns...),
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

	play := catalogPlay{cw: cw, kin: kin, ms: ms, rng: rng}
	rounds := 6 + rng.IntN(10)
	for range rounds {
		play.round(&res)
		time.Sleep(time.Duration(rng.IntN(3*int(syncEvery/time.Millisecond))) * time.Millisecond)
	}
	play.wg.Wait()
	// Converged: within a few sync intervals after the last change (and the deletes' delay).
	time.Sleep(5*syncEvery + 2*deleteDelay + 2*time.Second)
	judgeCatalog(&res, cw, catalog, ms)
	return res
}

// catalogPlay issues a catalog schedule's calls.
type catalogPlay struct {
	cw    *catalogWorld
	kin   *fakekinesis.Fake
	ms    []*esmapi.Manager
	rng   *rand.Rand
	uuids []string // the mappings created
	wg    sync.WaitGroup
}

// round issues a round of calls, which start at the same instant on random managers: mostly on
// one mapping, and the creates and template starts on one stream and function, a new stream or
// one that has mappings.
func (p *catalogPlay) round(res *Result) {
	p.cw.mu.Lock()
	known := slices.Clone(p.uuids)
	p.cw.mu.Unlock()
	target := ""
	if len(known) > 0 {
		target = known[p.rng.IntN(len(known))]
	}
	stream, fn := "", catalogFunctions[p.rng.IntN(len(catalogFunctions))]
	if n := len(p.cw.streams); n > 0 && p.rng.IntN(2) == 0 {
		stream = p.cw.streams[p.rng.IntN(n)]
	} else {
		stream = p.kin.CreateStream(fmt.Sprintf("catalog-%d", n+1), 1)
		p.cw.streams = append(p.cw.streams, stream)
	}
	for range 1 + p.rng.IntN(3) {
		op := &catalogOp{manager: p.rng.IntN(len(p.ms)), uuid: target, stream: stream, fn: fn}
		switch x := p.rng.Float64(); {
		case target == "" || x < 0.15:
			op.kind = OpCatalogCreate
		case x < 0.3:
			op.kind = OpCatalogEnsure
		case x < 0.4:
			op.kind, op.fn = OpCatalogMove, catalogFunctions[p.rng.IntN(len(catalogFunctions))]
		case x < 0.8:
			op.kind = OpCatalogUpdate
			op.field = catalogFields[p.rng.IntN(len(catalogFields))]
			switch op.field {
			case "BatchSize":
				op.value = 1 + p.rng.IntN(500)
			case "ParallelizationFactor":
				op.value = 1 + p.rng.IntN(10)
			default:
				op.value = p.rng.IntN(20)
			}
			if p.rng.IntN(4) == 0 && len(known) > 1 {
				op.uuid = known[p.rng.IntN(len(known))]
			}
		default:
			op.kind = OpCatalogDelete
		}
		p.cw.mu.Lock() // the faults are counted in the same map, from the calls
		res.Injected[op.kind]++
		p.cw.mu.Unlock()
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.do(op) }()
	}
}

// do makes the call op and records its answer.
func (p *catalogPlay) do(op *catalogOp) {
	ctx := context.Background()
	op.issued = time.Now()
	var v esmapi.EventSourceMapping
	var e *esmapi.APIError
	var err error
	m := p.ms[op.manager]
	switch op.kind {
	case OpCatalogCreate:
		v, e = m.Create(ctx, fmt.Appendf(nil, `{"FunctionName":%q,"EventSourceArn":%q,"StartingPosition":"TRIM_HORIZON"}`, op.fn, op.stream))
	case OpCatalogEnsure:
		v, op.created, err = m.EnsureMapping(ctx, runner.Mapping{Source: runner.Source{Stream: op.stream},
			Function: runner.Function{Name: op.fn, ARN: functionARN(op.stream, op.fn)}, Config: poller.Config{StartingPosition: poller.TrimHorizon}})
	case OpCatalogMove:
		v, e = m.Update(ctx, op.uuid, fmt.Appendf(nil, `{"FunctionName":%q}`, op.fn))
	case OpCatalogUpdate:
		v, e = m.Update(ctx, op.uuid, fmt.Appendf(nil, `{%q:%d}`, op.field, op.value))
	case OpCatalogDelete:
		v, e = m.Delete(ctx, op.uuid)
	}
	if e != nil {
		err = e
	}
	p.cw.mu.Lock()
	defer p.cw.mu.Unlock()
	op.answered, op.accepted = time.Now(), err == nil
	switch {
	case err != nil:
		op.answer = err.Error()
	case op.kind == OpCatalogCreate || op.kind == OpCatalogEnsure:
		op.uuid = v.UUID
		if op.kind == OpCatalogCreate || op.created {
			p.uuids = append(p.uuids, v.UUID)
		}
	}
	p.cw.ops = append(p.cw.ops, op)
}

// functionARN is the ARN of function fn in the stream's region and account, as the API makes it.
func functionARN(stream, fn string) string {
	a, err := kinesissrc.ParseStreamARN(stream)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", a.Partition, a.Region, a.Account, fn)
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
		if op.accepted && (op.kind == OpCatalogCreate || op.created) {
			all = append(all, op.uuid)
		}
	}
	judgeUnique(res, cw)
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
	judgeSuperseded(res, cw, final, deleted)
}

// judgeSuperseded judges that every accepted Update is held at the end, or superseded by a change
// of the same setting that did not precede it (accepted, or answered with a service error: its
// write may have applied), or by a Delete; cw.mu is held.
func judgeSuperseded(res *Result, cw *catalogWorld, final map[string]esmapi.Record, deleted map[string]*catalogOp) {
	bad := func(format string, args ...any) {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	}
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
		if deleted[u.uuid] != nil || slices.ContainsFunc(cw.ops, func(d *catalogOp) bool {
			return d.kind == OpCatalogDelete && d.uuid == u.uuid && d.mayHaveApplied()
		}) {
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
			if v != u && v.kind == OpCatalogUpdate && v.mayHaveApplied() && v.uuid == u.uuid && v.field == u.field &&
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

// judgeUnique judges that no write left two records of one source and function, and that every
// template start that did not create the mapping named one the catalog held; cw.mu is held.
func judgeUnique(res *Result, cw *catalogWorld) {
	res.Checked[InvCatalogUnique] += cw.unique
	res.Violations = append(res.Violations, cw.dups...)
	for _, op := range cw.ops {
		if op.kind != OpCatalogEnsure || !op.accepted || op.created {
			continue
		}
		res.Checked[InvCatalogUnique]++
		held := slices.ContainsFunc(cw.writes, func(wr catalogWrite) bool {
			return wr.uuid == op.uuid && wr.rec.Mapping.EventSourceArn == op.stream && wr.rec.Mapping.FunctionArn == functionARN(op.stream, op.fn)
		})
		if !held {
			res.Violations = append(res.Violations, fmt.Sprintf("catalog: a template start of %s → %s on manager %d adopted %q, which the catalog never held for them",
				op.stream, op.fn, op.manager, op.uuid))
		}
	}
}
