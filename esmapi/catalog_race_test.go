package esmapi_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// These tests run two or three Managers on one DynamoCatalog, as "esm serve --lease-table" workers
// do, and send them conflicting Creates, Updates and Deletes: on the in-memory DynamoDB with an
// engine that runs no poller, and on dynalite with real pollers on kinesis-local.

// writeLog wraps a catalog and keeps every write it accepted, and counts those it refused.
type writeLog struct {
	esmapi.Catalog
	mu        sync.Mutex
	writes    []write
	conflicts int
}

type write struct {
	uuid     string
	revision int64
	deleting bool
	delete   bool // the record was removed
}

func (l *writeLog) logged(w write, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.writes = append(l.writes, w)
	case errors.Is(err, esmapi.ErrConflict):
		l.conflicts++
	}
	return err
}

func (l *writeLog) Put(ctx context.Context, r esmapi.Record) error {
	return l.logged(write{uuid: r.Mapping.UUID, revision: r.Revision, deleting: r.Deleting}, l.Catalog.Put(ctx, r))
}

func (l *writeLog) Delete(ctx context.Context, uuid string, rev int64) error {
	return l.logged(write{uuid: uuid, revision: rev, delete: true}, l.Catalog.Delete(ctx, uuid, rev))
}

func (l *writeLog) refusedWrites() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conflicts
}

// check judges the accepted writes of each mapping: its revisions are 0, 1, 2, … each written
// once (no two writes were made from one revision: no lost update), a Deleting revision is its
// last (nothing written over a deletion, no resurrection), and its record was removed only at
// that revision.
func (l *writeLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	puts := map[string][]write{}
	var removals []write
	for _, w := range l.writes {
		if w.delete {
			removals = append(removals, w)
		} else {
			puts[w.uuid] = append(puts[w.uuid], w)
		}
	}
	for id, ws := range puts {
		slices.SortStableFunc(ws, func(a, b write) int { return cmp.Compare(a.revision, b.revision) })
		for i, w := range ws {
			switch {
			case w.revision != int64(i):
				t.Errorf("%s: revisions written %v: two writes were made from one revision (a lost update)", id, revisions(ws))
			case w.deleting && i != len(ws)-1:
				t.Errorf("%s: revisions written %v, Deleting at %d: written over its deletion", id, revisions(ws), w.revision)
			default:
				continue
			}
			break
		}
	}
	for _, w := range removals {
		ws := puts[w.uuid]
		if len(ws) == 0 || !ws[len(ws)-1].deleting || ws[len(ws)-1].revision != w.revision {
			t.Errorf("%s removed at revision %d, which is not its last, Deleting revision (written %v)", w.uuid, w.revision, revisions(ws))
		}
	}
}

func revisions(ws []write) []int64 {
	var out []int64
	for _, w := range ws {
		out = append(out, w.revision)
	}
	return out
}

// stubKinesis finds every stream and lists no shard: each start of a mapping fails, and the
// mapping is started again after its backoff. Any other call panics (the nil interface).
type stubKinesis struct{ runner.KinesisAPI }

func (stubKinesis) DescribeStreamSummary(_ context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &kinesistypes.StreamDescriptionSummary{StreamARN: in.StreamARN}}, nil
}

func (stubKinesis) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return nil, errors.New("this test runs no poller")
}

// stubRunner is a Runner on stubKinesis.
func stubRunner(t *testing.T) *runner.Runner {
	r, err := runner.New(aws.Config{Region: "us-east-1"}, runner.WithKinesis(stubKinesis{}), runner.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// raceEnv is what the scenarios need from a backend.
type raceEnv struct {
	log *writeLog
	// worker starts one more Manager on the catalog, reading it again every syncInterval (0:
	// only when the test calls Sync).
	worker func(t *testing.T, syncInterval time.Duration) *server
	// sources are stream ARNs to create mappings of, and functions the functions registered.
	sources, functions []string
	// progressGone reports whether a mapping's progress is gone (nil: nothing to check).
	progressGone func(id string) bool
}

// try is call for any goroutine: transport errors are returned.
func (s *server) try(method, path string, body any) (rawResponse, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return rawResponse{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.http.URL+path, rd)
	if err != nil {
		return rawResponse{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rawResponse{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return rawResponse{}, err
	}
	r := rawResponse{status: resp.StatusCode, errorType: resp.Header.Get("x-amzn-ErrorType")}
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &r.body); err != nil {
			return r, fmt.Errorf("%s %s: body %q: %w", method, path, b, err)
		}
	}
	return r, nil
}

// refused reports whether r is Lambda's answer to a conflicting change.
func refused(r rawResponse) bool {
	return r.status == 400 && r.errorType == "ResourceInUseException" || r.status == 409 && r.errorType == "ResourceConflictException"
}

// settled waits until the mapping is Enabled (or Disabled) on s, or gone when gone.
func settled(t *testing.T, s *server, id string, gone bool) map[string]any {
	t.Helper()
	var r rawResponse
	testkit.WaitFor(t, "the mapping to settle", 30*time.Second, func() bool {
		r = s.call(t, "GET", mappings+id, nil)
		if gone {
			return r.status == 404
		}
		st, _ := r.body["State"].(string)
		return r.status == 200 && (st == "Enabled" || st == "Disabled")
	})
	return r.body
}

// createSynced creates a mapping of src to fn on a, lets b read it, and waits until it runs on
// both.
func createSynced(t *testing.T, a, b *server, src, fn string) string {
	t.Helper()
	r := a.call(t, "POST", mappings, map[string]any{"FunctionName": fn, "EventSourceArn": src, "StartingPosition": "TRIM_HORIZON"})
	if r.status != 202 {
		t.Fatalf("create: %d %v", r.status, r.body)
	}
	id := r.body["UUID"].(string)
	syncAll(t, b)
	settled(t, a, id, false)
	settled(t, b, id, false)
	return id
}

func syncAll(t *testing.T, workers ...*server) {
	t.Helper()
	for _, w := range workers {
		if err := w.m.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// catalogRecord is the catalog's record of the mapping, nil when it has none.
func catalogRecord(t *testing.T, c esmapi.Catalog, id string) *esmapi.Record {
	t.Helper()
	recs, err := c.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Mapping.UUID == id {
			return &r
		}
	}
	return nil
}

// testLostUpdates plays the races of two workers one step at a time (no background sync, so
// worker b stays stale until told), each on a mapping of its own: an update from a replaced
// revision, a delete from one, and an update of a mapping another worker deleted. Each stale
// change is refused as Lambda refuses a conflicting change, and every worker ends with the
// catalog's mapping, or none.
func testLostUpdates(t *testing.T, env raceEnv) {
	a, b := env.worker(t, 0), env.worker(t, 0)
	n := 0
	fresh := func(t *testing.T) string {
		t.Helper()
		src, fn := env.sources[n%len(env.sources)], env.functions[n/len(env.sources)]
		n++
		return createSynced(t, a, b, src, fn)
	}
	wantRefused := func(t *testing.T, what string, r rawResponse) {
		t.Helper()
		if !refused(r) {
			t.Errorf("%s: %d %s %v, want ResourceInUseException or ResourceConflictException", what, r.status, r.errorType, r.body)
		}
	}
	batchSizes := func(t *testing.T, id string, want float64) {
		t.Helper()
		syncAll(t, a, b)
		for name, w := range map[string]*server{"a": a, "b": b} {
			if got := settled(t, w, id, false)["BatchSize"]; got != want {
				t.Errorf("worker %s runs BatchSize %v, want %v (the catalog's)", name, got, want)
			}
		}
		if r := catalogRecord(t, env.log, id); r == nil || float64(r.Mapping.BatchSize) != want || r.Deleting {
			t.Errorf("the catalog holds %+v, want BatchSize %v", r, want)
		}
	}

	t.Run("update after an update", func(t *testing.T) {
		id := fresh(t)
		if r := a.call(t, "PUT", mappings+id, map[string]any{"BatchSize": 3}); r.status != 202 {
			t.Fatalf("update on a: %d %v", r.status, r.body)
		}
		wantRefused(t, "update on b from a replaced revision", b.call(t, "PUT", mappings+id, map[string]any{"BatchSize": 7}))
		batchSizes(t, id, 3)
	})

	t.Run("delete after an update", func(t *testing.T) {
		id := fresh(t)
		if r := a.call(t, "PUT", mappings+id, map[string]any{"BatchSize": 4}); r.status != 202 {
			t.Fatalf("update on a: %d %v", r.status, r.body)
		}
		wantRefused(t, "delete on b from a replaced revision", b.call(t, "DELETE", mappings+id, nil))
		batchSizes(t, id, 4)
	})

	t.Run("update after a delete", func(t *testing.T) {
		id := fresh(t)
		if r := a.call(t, "DELETE", mappings+id, nil); r.status != 202 || r.body["State"] != "Deleting" {
			t.Fatalf("delete on a: %d %v", r.status, r.body)
		}
		settled(t, a, id, true)
		if r := catalogRecord(t, env.log, id); r != nil {
			t.Fatalf("the catalog still holds the deleted mapping: %+v", r)
		}
		wantRefused(t, "update on b of a deleted mapping", b.call(t, "PUT", mappings+id, map[string]any{"BatchSize": 9}))
		if r := catalogRecord(t, env.log, id); r != nil {
			t.Errorf("the deleted mapping is back in the catalog: %+v", r)
		}
		syncAll(t, a, b)
		settled(t, b, id, true)
		if c := env.worker(t, 0); c.call(t, "GET", mappings+id, nil).status != 404 {
			t.Error("a new worker runs the deleted mapping")
		}
		if env.progressGone != nil {
			testkit.WaitFor(t, "the deleted mapping's progress to be gone", 20*time.Second, func() bool { return env.progressGone(id) })
		}
	})
	env.log.check(t)
}

// testConcurrentChanges: three workers, each syncing every interval, take concurrent Creates,
// Updates and Deletes. Every accepted write follows the revision it was made from, nothing is
// written to a deleted mapping, and within a few sync intervals of the last change every worker
// runs exactly the catalog's mappings with the catalog's settings.
func testConcurrentChanges(t *testing.T, env raceEnv, interval, pace time.Duration, ops int) {
	workers := []*server{env.worker(t, interval), env.worker(t, interval), env.worker(t, interval)}
	var mu sync.Mutex
	var ids []string
	counts := map[string]int{}
	count := func(k string) {
		mu.Lock()
		counts[k]++
		mu.Unlock()
	}
	// pick is one of the live mappings, and how many there are.
	pick := func(rng *rand.Rand) (string, int) {
		mu.Lock()
		defer mu.Unlock()
		if len(ids) == 0 {
			return "", 0
		}
		return ids[rng.IntN(len(ids))], len(ids)
	}
	// The load runs ops operations per worker, and on until every kind of change the scenario
	// is about has happened (or a minute has passed: the checks below then fail).
	minimum := map[string]int{"create accepted": 2, "update accepted": 10, "update refused": 1, "delete accepted": 1}
	uncovered := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for k, n := range minimum {
			if counts[k] < n {
				return true
			}
		}
		return env.log.refusedWrites() == 0
	}
	deadline := time.Now().Add(time.Minute)
	pairs := make(chan [2]string, len(env.sources)*len(env.functions))
	for _, s := range env.sources {
		for _, f := range env.functions {
			pairs <- [2]string{s, f}
		}
	}
	close(pairs)
	var wg sync.WaitGroup
	errs := make(chan error, len(workers))
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for n := 0; (n < ops || uncovered()) && time.Now().Before(deadline); n++ {
				time.Sleep(time.Duration(rng.Int64N(int64(pace)))) // the load's pace, not a synchronisation
				var r rawResponse
				var err error
				op := "update"
				id, live := pick(rng)
				switch k := rng.IntN(10); {
				case id == "" || k == 0:
					p, ok := <-pairs
					if !ok {
						continue
					}
					op = "create"
					if r, err = w.try("POST", mappings, map[string]any{"FunctionName": p[1], "EventSourceArn": p[0], "StartingPosition": "TRIM_HORIZON"}); err == nil && r.status == 202 {
						mu.Lock()
						ids = append(ids, r.body["UUID"].(string))
						mu.Unlock()
					}
				case k == 1 && live > 1:
					op = "delete"
					if r, err = w.try("DELETE", mappings+id, nil); err == nil && r.status == 202 {
						mu.Lock()
						ids = slices.DeleteFunc(ids, func(x string) bool { return x == id })
						mu.Unlock()
					}
				default:
					r, err = w.try("PUT", mappings+id, map[string]any{"BatchSize": 1 + rng.IntN(50)})
				}
				if err != nil {
					errs <- err
					return
				}
				switch {
				case r.status == 202:
					count(op + " accepted")
				case refused(r):
					count(op + " refused")
				case r.status == 404:
					count(op + " of a deleted mapping")
				default:
					errs <- fmt.Errorf("%s: %d %s %v", op, r.status, r.errorType, r.body)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Convergence: every worker runs the catalog's mappings with its settings, none changing.
	last := time.Now()
	var diff string
	defer func() {
		if t.Failed() {
			t.Logf("last difference: %s", diff)
		}
	}()
	testkit.WaitFor(t, "every worker to run the catalog's mappings", 20*interval+20*time.Second, func() bool {
		recs, err := env.log.Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]float64{}
		for _, r := range recs {
			if r.Deleting {
				diff = "a mapping is still Deleting"
				return false
			}
			want[r.Mapping.UUID] = float64(r.Mapping.BatchSize)
		}
		for i, w := range workers {
			r, err := w.try("GET", mappings+"?MaxItems=1000", nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			list, _ := r.body["EventSourceMappings"].([]any)
			for _, v := range list {
				v := v.(map[string]any)
				if st := v["State"].(string); st != "Enabled" && st != "Disabled" {
					diff = fmt.Sprintf("worker %d: %s is %s", i, v["UUID"], st)
					return false
				}
				got[v["UUID"].(string)] = v["BatchSize"].(float64)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				diff = fmt.Sprintf("worker %d runs %v, the catalog holds %v", i, got, want)
				return false
			}
		}
		return true
	})
	t.Logf("every worker ran the catalog's mappings %s after the last change (sync interval %s)", time.Since(last).Round(time.Millisecond), interval)
	env.log.check(t)
	t.Logf("operations: %v; writes refused by the catalog: %d", counts, env.log.refusedWrites())
	for k, n := range minimum {
		if counts[k] < n {
			t.Fatalf("%d %q among %v, want %d: the scenario did not exercise it", counts[k], k, counts, n)
		}
	}
	if env.log.refusedWrites() == 0 {
		t.Fatal("no write was made from a replaced revision: the scenario raced nothing")
	}

	if env.progressGone != nil {
		live := map[string]bool{}
		recs, _ := env.log.Load(context.Background())
		for _, r := range recs {
			live[r.Mapping.UUID] = true
		}
		mu.Lock()
		all := slices.Clone(ids)
		mu.Unlock()
		for _, id := range all {
			if !live[id] {
				testkit.WaitFor(t, "a deleted mapping's progress to be gone", 20*time.Second, func() bool { return env.progressGone(id) })
			}
		}
	}
}

// fakeRaceEnv is raceEnv on the in-memory DynamoDB, with no poller.
func fakeRaceEnv(t *testing.T) raceEnv { return fakeRaceEnvOn(t, nil) }

// fakeRaceEnvOn is fakeRaceEnv with the catalog wrapped by wrap, when given.
func fakeRaceEnvOn(t *testing.T, wrap func(esmapi.Catalog) esmapi.Catalog) raceEnv {
	db := fakedynamo.New()
	var catalog esmapi.Catalog = esmapi.DynamoCatalog{API: db, Table: "mappings"}
	if err := catalog.(esmapi.DynamoCatalog).Ensure(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		catalog = wrap(catalog)
	}
	log := &writeLog{Catalog: catalog}
	fns := []string{"fa", "fb", "fc"}
	return raceEnv{
		log: log,
		worker: func(t *testing.T, interval time.Duration) *server {
			var functions []esmapi.Function
			for _, f := range fns {
				functions = append(functions, esmapi.Function{Name: f, Invoker: inprocess.New((&recorder{}).handle)})
			}
			progress := esmapi.ProgressFuncs{
				StoreFunc:  func(context.Context, string) (poller.Store, error) { return poller.NewMemoryStore(), nil },
				DeleteFunc: func(context.Context, string) error { return nil },
			}
			return startEngine(t, stubRunner(t), log, progress, esmapi.WithFunctions(functions...),
				esmapi.WithSyncInterval(interval), esmapi.WithRestartBackoff(time.Hour))
		},
		sources: []string{
			"arn:aws:kinesis:us-east-1:000000000000:stream/s1", "arn:aws:kinesis:us-east-1:000000000000:stream/s2",
			"arn:aws:kinesis:us-east-1:000000000000:stream/s3", "arn:aws:kinesis:us-east-1:000000000000:stream/s4"},
		functions: fns,
	}
}

// TestConditionalCatalogFake runs the scenarios on the in-memory DynamoDB.
func TestConditionalCatalogFake(t *testing.T) {
	t.Run("lost updates", func(t *testing.T) { testLostUpdates(t, fakeRaceEnv(t)) })
	t.Run("concurrent changes", func(t *testing.T) {
		testConcurrentChanges(t, fakeRaceEnv(t), 50*time.Millisecond, 12*time.Millisecond, 60)
	})
}

// dynaliteRaceEnv is raceEnv on dynalite, each mapping's shards leased through its own table
// and read by real pollers on kinesis-local.
func dynaliteRaceEnv(t *testing.T) raceEnv {
	ctx := context.Background()
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(dynamoEndpoint) })
	table := fmt.Sprintf("esmapi-race-%d-%d", os.Getpid(), streamSeq.Add(1))
	catalog := esmapi.DynamoCatalog{API: ddb, Table: table}
	if err := catalog.Ensure(ctx, true); err != nil {
		t.Fatal(err)
	}
	log := &writeLog{Catalog: catalog}
	var sources []string
	for range 3 {
		_, arn := newStream(t)
		sources = append(sources, arn)
	}
	fns := []string{"fa", "fb"}
	workerSeq := 0
	return raceEnv{
		log: log,
		worker: func(t *testing.T, interval time.Duration) *server {
			workerSeq++
			name := fmt.Sprintf("worker-%d", workerSeq)
			var functions []esmapi.Function
			for _, f := range fns {
				functions = append(functions, esmapi.Function{Name: f, Invoker: inprocess.New((&recorder{}).handle)})
			}
			return startOpen(t, log, leaseProgress(ddb, table, name), esmapi.WithFunctions(functions...), esmapi.WithSyncInterval(interval),
				esmapi.WithBase(poller.Config{PollInterval: 50 * time.Millisecond, MinPollSpacing: 20 * time.Millisecond, ShutdownGrace: 5 * time.Second}),
				esmapi.WithRestartBackoff(100*time.Millisecond))
		},
		sources:   sources,
		functions: fns,
		progressGone: func(id string) bool {
			_, err := ddb.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table + "-" + id)})
			var nf *ddbtypes.ResourceNotFoundException
			return errors.As(err, &nf)
		},
	}
}

// TestConditionalCatalogDynalite runs the scenarios on dynalite with real pollers.
func TestConditionalCatalogDynalite(t *testing.T) {
	t.Run("lost updates", func(t *testing.T) { testLostUpdates(t, dynaliteRaceEnv(t)) })
	t.Run("concurrent changes", func(t *testing.T) {
		testConcurrentChanges(t, dynaliteRaceEnv(t), 300*time.Millisecond, 300*time.Millisecond, 50)
	})
}

// unreadable is a catalog whose Load fails while fail is set.
type unreadable struct {
	esmapi.Catalog
	fail atomic.Bool
}

func (u *unreadable) Load(ctx context.Context) ([]esmapi.Record, error) {
	if u.fail.Load() {
		return nil, errors.New("the catalog cannot be read")
	}
	return u.Catalog.Load(ctx)
}

// TestConflictAnswers golden-tests what a change made from a replaced revision is answered, in the
// snapshot form of AWS's recorded errors (testdata/conflicts.json; ESM_UPDATE_GOLDEN=1 rewrites
// it): ResourceInUseException with the state the other worker's change left the mapping in
// (Updating, Deleting), and ResourceConflictException when the catalog could not be read again.
func TestConflictAnswers(t *testing.T) {
	var cat *unreadable
	env := fakeRaceEnvOn(t, func(c esmapi.Catalog) esmapi.Catalog {
		cat = &unreadable{Catalog: c}
		return cat
	})
	a, b := env.worker(t, 0), env.worker(t, 0)
	fresh := func(src string) string { return createSynced(t, a, b, src, "fa") }
	got := map[string]any{}

	id := fresh(env.sources[0])
	a.call(t, "PUT", mappings+id, map[string]any{"BatchSize": 3})
	got["update_from_replaced_revision"] = snapshot(t, b.call(t, "PUT", mappings+id, map[string]any{"BatchSize": 7}), id, "<uuid:1>")

	id = fresh(env.sources[1])
	a.call(t, "DELETE", mappings+id, nil)
	settled(t, a, id, true)
	got["update_of_mapping_deleted_elsewhere"] = snapshot(t, b.call(t, "PUT", mappings+id, map[string]any{"BatchSize": 7}), id, "<uuid:1>")

	id = fresh(env.sources[2])
	a.call(t, "PUT", mappings+id, map[string]any{"BatchSize": 4})
	cat.fail.Store(true)
	got["delete_from_replaced_revision_catalog_unreadable"] = snapshot(t, b.call(t, "DELETE", mappings+id, nil), id, "<uuid:1>")
	cat.fail.Store(false)

	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(got); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "conflicts.json", out.Bytes())
}

// TestCatalogConditions: both catalogs take a write only from the revision the catalog holds,
// and a removal only at it (or of a record already gone).
func TestCatalogConditions(t *testing.T) {
	dynamo := esmapi.DynamoCatalog{API: fakedynamo.New(), Table: "mappings"}
	if err := dynamo.Ensure(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]esmapi.Catalog{"file": esmapi.FileCatalog{Dir: t.TempDir()}, "dynamo": dynamo} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rec := func(rev int64, batch int) esmapi.Record {
				r := esmapi.Record{Revision: rev, FunctionName: "fa"}
				r.Mapping.UUID, r.Mapping.BatchSize = "00000000-1111-4222-8333-444444444444", batch
				return r
			}
			steps := []struct {
				what     string
				do       func() error
				conflict bool
			}{
				{"create", func() error { return c.Put(ctx, rec(0, 1)) }, false},
				{"create again", func() error { return c.Put(ctx, rec(0, 2)) }, true},
				{"update from 0", func() error { return c.Put(ctx, rec(1, 3)) }, false},
				{"update from 0 again", func() error { return c.Put(ctx, rec(1, 4)) }, true},
				{"update from 2, not written yet", func() error { return c.Put(ctx, rec(3, 5)) }, true},
				{"remove at 0", func() error { return c.Delete(ctx, rec(0, 0).Mapping.UUID, 0) }, true},
				{"remove at 1", func() error { return c.Delete(ctx, rec(0, 0).Mapping.UUID, 1) }, false},
				{"remove again", func() error { return c.Delete(ctx, rec(0, 0).Mapping.UUID, 1) }, false},
				{"update of a removed record", func() error { return c.Put(ctx, rec(2, 6)) }, true},
			}
			for _, s := range steps {
				err := s.do()
				if s.conflict != errors.Is(err, esmapi.ErrConflict) || !s.conflict && err != nil {
					t.Errorf("%s: %v, want conflict %t", s.what, err, s.conflict)
				}
				if s.what == "update from 0 again" {
					if r := catalogRecord(t, c, rec(0, 0).Mapping.UUID); r == nil || r.Revision != 1 || r.Mapping.BatchSize != 3 {
						t.Errorf("after %s the catalog holds %+v, want revision 1 with BatchSize 3", s.what, r)
					}
				}
			}
			if recs, err := c.Load(ctx); err != nil || len(recs) != 0 {
				t.Errorf("the catalog holds %v (%v), want nothing", recs, err)
			}
		})
	}
}

// heldRead is a catalog whose next Load, once armed, reads and then waits for release before it
// returns: a read that began before later ones were applied.
type heldRead struct {
	esmapi.Catalog
	mu      sync.Mutex
	armed   bool
	read    chan struct{} // closed once the held Load has read
	release chan struct{}
}

func (h *heldRead) arm() {
	h.mu.Lock()
	h.armed, h.read, h.release = true, make(chan struct{}), make(chan struct{})
	h.mu.Unlock()
}

func (h *heldRead) Load(ctx context.Context) ([]esmapi.Record, error) {
	h.mu.Lock()
	held := h.armed
	h.armed = false
	read, release := h.read, h.release
	h.mu.Unlock()
	recs, err := h.Catalog.Load(ctx)
	if held {
		close(read)
		<-release
	}
	return recs, err
}

// TestOlderReadNotApplied: a worker's periodic read of the catalog that began before a
// conflicting write made it read the catalog again is not applied over that newer read. Here the
// newer read brought a mapping another worker created (its clock behind this one's), which the
// older read does not hold: applied, it would stop that mapping here as deleted elsewhere and
// drop its progress.
func TestOlderReadNotApplied(t *testing.T) {
	var h *heldRead
	env := fakeRaceEnvOn(t, func(c esmapi.Catalog) esmapi.Catalog {
		h = &heldRead{Catalog: c}
		return h
	})
	a, b := env.worker(t, 0), env.worker(t, 0)
	x := createSynced(t, a, b, env.sources[0], "fa")
	if r := a.call(t, "PUT", mappings+x, map[string]any{"BatchSize": 3}); r.status != 202 {
		t.Fatalf("update on a: %d %v", r.status, r.body)
	}

	h.arm()
	synced := make(chan error, 1)
	go func() { synced <- b.m.Sync(context.Background()) }()
	<-h.read // b's periodic read has read the catalog, without the mapping below

	// Another worker, its clock an hour behind, creates a mapping.
	late := esmapi.Record{FunctionName: "fb", Enabled: false, Created: time.Now().Add(-time.Hour)}
	late.Mapping.UUID = "00000000-1111-4222-8333-555555555555"
	late.Mapping.EventSourceArn, late.Mapping.FunctionArn = env.sources[1], "arn:aws:lambda:us-east-1:000000000000:function:fb"
	if err := env.log.Put(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	// b's stale update conflicts: b reads the catalog again, and learns of the new mapping.
	if r := b.call(t, "PUT", mappings+x, map[string]any{"BatchSize": 7}); !refused(r) {
		t.Fatalf("stale update on b: %d %s %v", r.status, r.errorType, r.body)
	}
	if r := b.call(t, "GET", mappings+late.Mapping.UUID, nil); r.status != 200 {
		t.Fatalf("b does not know the new mapping after reading the catalog again: %d %v", r.status, r.body)
	}
	close(h.release)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if r := b.call(t, "GET", mappings+late.Mapping.UUID, nil); r.status != 200 || r.body["State"] == "Deleting" {
		t.Fatalf("after applying its older read, b has the new mapping as %d %v", r.status, r.body)
	}
	syncAll(t, b)
	if r := settled(t, b, late.Mapping.UUID, false); r["UUID"] != late.Mapping.UUID {
		t.Fatalf("b lost the new mapping: %v", r)
	}
}

// slowPut is a catalog whose next Put, once armed, waits for a Load that began meanwhile to have
// read before it writes.
type slowPut struct {
	esmapi.Catalog
	mu      sync.Mutex
	armed   bool
	putting chan struct{} // closed when the held Put begins
	loaded  chan struct{} // closed when a Load during it has read
}

func (p *slowPut) Put(ctx context.Context, r esmapi.Record) error {
	p.mu.Lock()
	held := p.armed
	p.armed = false
	putting, loaded := p.putting, p.loaded
	p.mu.Unlock()
	if held {
		close(putting)
		<-loaded
	}
	return p.Catalog.Put(ctx, r)
}

func (p *slowPut) Load(ctx context.Context) ([]esmapi.Record, error) {
	recs, err := p.Catalog.Load(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.putting != nil && p.loaded != nil {
		select {
		case <-p.putting:
			close(p.loaded)
			p.loaded = nil
		default:
		}
	}
	return recs, err
}

// TestSyncDuringCreate: a periodic read of the catalog that began while this worker was writing a
// new mapping, and so lacks it, does not take that mapping for deleted elsewhere.
func TestSyncDuringCreate(t *testing.T) {
	var p *slowPut
	env := fakeRaceEnvOn(t, func(c esmapi.Catalog) esmapi.Catalog {
		p = &slowPut{Catalog: c}
		return p
	})
	a := env.worker(t, 0)
	p.mu.Lock()
	p.armed, p.putting, p.loaded = true, make(chan struct{}), make(chan struct{})
	p.mu.Unlock()
	created := make(chan rawResponse, 1)
	go func() {
		r, err := a.try("POST", mappings, map[string]any{"FunctionName": "fa", "EventSourceArn": env.sources[0], "StartingPosition": "TRIM_HORIZON"})
		if err != nil {
			t.Error(err)
		}
		created <- r
	}()
	<-p.putting
	if err := a.m.Sync(context.Background()); err != nil { // reads while the create writes; applies after it
		t.Fatal(err)
	}
	r := <-created
	if r.status != 202 {
		t.Fatalf("create: %d %v", r.status, r.body)
	}
	id := r.body["UUID"].(string)
	if g := a.call(t, "GET", mappings+id, nil); g.status != 200 || g.body["State"] == "Deleting" {
		t.Fatalf("the new mapping after a read that began before it was written: %d %v", g.status, g.body)
	}
	syncAll(t, a)
	settled(t, a, id, false)
}
