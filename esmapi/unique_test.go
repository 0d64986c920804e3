package esmapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// These tests hold the catalog to Lambda's rule that an event source has at most one mapping to a
// function, whichever workers of a shared catalog the calls reach, and in whatever order.

const (
	uniqueStream   = "arn:aws:kinesis:us-east-1:000000000000:stream/orders"
	uniqueFunction = "golden-function"
	uniqueFnARN    = "arn:aws:lambda:us-east-1:000000000000:function:" + uniqueFunction
)

// fakeCatalog is a DynamoCatalog on the in-memory DynamoDB.
func fakeCatalog(t *testing.T) esmapi.DynamoCatalog {
	t.Helper()
	c := esmapi.DynamoCatalog{API: fakedynamo.New(), Table: "mappings"}
	if err := c.Ensure(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	return c
}

// dynaliteCatalog is a DynamoCatalog in a new table on dynalite.
func dynaliteCatalog(t *testing.T) esmapi.DynamoCatalog {
	t.Helper()
	ctx := context.Background()
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(dynamoEndpoint) })
	c := esmapi.DynamoCatalog{API: ddb, Table: fmt.Sprintf("esmapi-unique-%d-%d", os.Getpid(), streamSeq.Add(1))}
	if err := c.Ensure(ctx, true); err != nil {
		t.Fatal(err)
	}
	return c
}

// uniqueWorker is one "esm serve --lease-table" worker on cat that runs no poller (every stream
// is found, none has a shard), syncing only when told.
func uniqueWorker(t *testing.T, cat esmapi.Catalog) *server {
	t.Helper()
	progress := esmapi.ProgressFuncs{
		StoreFunc:  func(context.Context, string) (poller.Store, error) { return poller.NewMemoryStore(), nil },
		DeleteFunc: func(context.Context, string) error { return nil },
	}
	var fns []esmapi.Function
	for _, name := range []string{uniqueFunction, "fb", "fc"} {
		fns = append(fns, esmapi.Function{Name: name, Invoker: inprocess.New((&recorder{}).handle)})
	}
	return startEngine(t, stubRunner(t), cat, progress, esmapi.WithFunctions(fns...), esmapi.WithRestartBackoff(time.Hour))
}

// mappingsOf are the UUIDs of the catalog's records of source → function.
func mappingsOf(t *testing.T, cat esmapi.Catalog, source, function string) []string {
	t.Helper()
	recs, err := cat.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		if r.Mapping.EventSourceArn == source && r.Mapping.FunctionArn == function {
			ids = append(ids, r.Mapping.UUID)
		}
	}
	return ids
}

// duplicateMessage is Lambda's message for a second mapping of one source and function.
var duplicateMessage = regexp.MustCompile(`^The event source arn \(" (\S+) "\) and function \(" (\S+) "\) provided mapping already exists\. Please update or delete the existing mapping with UUID (\S+)$`)

// TestTemplateStartOnTwoWorkersMakesOneMapping: two "esm serve --template" workers start at
// once: both read the catalog (empty), then both ensure the template's mapping. One creates it,
// the other adopts it, and both run it.
func TestTemplateStartOnTwoWorkersMakesOneMapping(t *testing.T) {
	ctx := context.Background()
	cat := fakeCatalog(t)
	a, b := uniqueWorker(t, cat), uniqueWorker(t, cat) // both opened before either ensured
	rm := runner.Mapping{Source: runner.Source{Stream: uniqueStream}, Function: runner.Function{Name: uniqueFunction, ARN: uniqueFnARN},
		Config: poller.Config{StartingPosition: poller.TrimHorizon, BatchSize: 100}}
	va, ca, err := a.m.EnsureMapping(ctx, rm)
	if err != nil {
		t.Fatal(err)
	}
	vb, cb, err := b.m.EnsureMapping(ctx, rm)
	if err != nil {
		t.Fatal(err)
	}
	if !ca || cb || va.UUID != vb.UUID {
		t.Errorf("worker a: created %t, %s; worker b: created %t, %s; want a to create it and b to adopt it", ca, va.UUID, cb, vb.UUID)
	}
	if ids := mappingsOf(t, cat, uniqueStream, uniqueFnARN); len(ids) != 1 {
		t.Fatalf("the catalog holds %d mappings of %s to %s after two workers started with the template, want 1: %v", len(ids), uniqueStream, uniqueFnARN, ids)
	}
	for name, w := range map[string]*server{"a": a, "b": b} {
		if _, e := w.m.Get(va.UUID); e != nil {
			t.Errorf("worker %s does not run the template's mapping %s: %v", name, va.UUID, e)
		}
	}
}

// TestCreateOnTwoWorkersConflicts: CreateEventSourceMapping of one stream and function sent to
// two workers (a load balancer in front of the fleet, a client retrying on another worker), the
// second before it synced: it answers Lambda's 409, its body as AWS recorded it.
func TestCreateOnTwoWorkersConflicts(t *testing.T) {
	cat := fakeCatalog(t)
	a, b := uniqueWorker(t, cat), uniqueWorker(t, cat)
	body := map[string]any{"FunctionName": uniqueFunction, "EventSourceArn": uniqueStream, "StartingPosition": "TRIM_HORIZON"}
	first := a.call(t, "POST", mappings, body)
	if first.status != 202 {
		t.Fatalf("create on worker a: %d %v", first.status, first.body)
	}
	id := first.body["UUID"].(string)
	second := b.call(t, "POST", mappings, body)
	if ids := mappingsOf(t, cat, uniqueStream, uniqueFnARN); len(ids) != 1 {
		t.Fatalf("the catalog holds %d mappings of one stream and function (answers %d, %d), want 1", len(ids), first.status, second.status)
	}
	want := recorded(t, "errors.json").(map[string]any)["duplicate"]
	compareGolden(t, "the second create, on another worker", snapshot(t, second, "orders", "<resource:1>", uniqueFunction, "<resource:2>", id, "<uuid:1>"), want)
	if g := b.call(t, "GET", mappings+id, nil); g.status != 200 {
		t.Errorf("worker b, having answered 409 naming %s, does not know it: %d %v", id, g.status, g.body)
	}
}

// concurrentCreates sends, round after round, one Create of a new stream's mapping to each of two
// workers at the same instant: each round, exactly one answers 202 and the other Lambda's 409
// naming the mapping the first made, and the catalog holds that one mapping.
func concurrentCreates(t *testing.T, cat esmapi.Catalog, rounds int) {
	a, b := uniqueWorker(t, cat), uniqueWorker(t, cat)
	won := map[string]int{}
	for i := range rounds {
		source := fmt.Sprintf("arn:aws:kinesis:us-east-1:000000000000:stream/race-%d", i)
		body := map[string]any{"FunctionName": uniqueFunction, "EventSourceArn": source, "StartingPosition": "TRIM_HORIZON"}
		var answers [2]rawResponse
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j, w := range []*server{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := w.try("POST", mappings, body)
				if err != nil {
					t.Error(err)
				}
				answers[j] = r
			}()
		}
		close(start)
		wg.Wait()
		winner, loser := answers[0], answers[1]
		won["a"]++
		if winner.status != 202 {
			winner, loser = loser, winner
			won["a"], won["b"] = won["a"]-1, won["b"]+1
		}
		if winner.status != 202 || loser.status != 409 || loser.errorType != "ResourceConflictException" {
			t.Fatalf("round %d: answers %d %s and %d %s, want one 202 and one 409 ResourceConflictException", i, answers[0].status, answers[0].errorType, answers[1].status, answers[1].errorType)
		}
		id, _ := winner.body["UUID"].(string)
		msg, _ := loser.body["message"].(string)
		if m := duplicateMessage.FindStringSubmatch(msg); m == nil || m[1] != source || m[2] != uniqueFunction || m[3] != id {
			t.Fatalf("round %d: 409 message %q, want Lambda's naming %s, %s and the mapping made, %s", i, msg, source, uniqueFunction, id)
		}
		if ids := mappingsOf(t, cat, source, uniqueFnARN); len(ids) != 1 || ids[0] != id {
			t.Fatalf("round %d: the catalog holds %v of %s, want only %s", i, ids, source, id)
		}
	}
	t.Logf("%d rounds of two concurrent creates; the 202 came from worker a %d times, b %d times", rounds, won["a"], won["b"])
}

// TestConcurrentCreatesOnTwoWorkers: concurrentCreates on the in-memory DynamoDB.
func TestConcurrentCreatesOnTwoWorkers(t *testing.T) { concurrentCreates(t, fakeCatalog(t), 30) }

// TestConcurrentCreatesOnTwoWorkersDynalite: concurrentCreates on dynalite.
func TestConcurrentCreatesOnTwoWorkersDynalite(t *testing.T) {
	concurrentCreates(t, dynaliteCatalog(t), 15)
}

// TestUpdateAndDeleteKeepPairsUnique: an update that changes FunctionName to a function the
// source already has a mapping to is refused with the same 409, on any worker; one to a free
// function frees the old pair; a deletion frees its pair once the mapping is gone.
func TestUpdateAndDeleteKeepPairsUnique(t *testing.T) {
	cat := fakeCatalog(t)
	a, b := uniqueWorker(t, cat), uniqueWorker(t, cat)
	create := func(w *server, fn string) rawResponse {
		return w.call(t, "POST", mappings, map[string]any{"FunctionName": fn, "EventSourceArn": uniqueStream, "StartingPosition": "TRIM_HORIZON"})
	}
	ra, rb := create(a, uniqueFunction), create(b, "fb")
	if ra.status != 202 || rb.status != 202 {
		t.Fatalf("creates of two functions on one stream: %d %v, %d %v", ra.status, ra.body, rb.status, rb.body)
	}
	x, y := ra.body["UUID"].(string), rb.body["UUID"].(string)
	syncAll(t, a, b)
	settled(t, a, x, false)
	settled(t, b, y, false)

	r := b.call(t, "PUT", mappings+y, map[string]any{"FunctionName": uniqueFunction})
	msg, _ := r.body["message"].(string)
	if m := duplicateMessage.FindStringSubmatch(msg); r.status != 409 || m == nil || m[3] != x {
		t.Fatalf("update of %s to the function %s has: %d %v, want 409 naming %s", y, x, r.status, r.body, x)
	}
	if r := a.call(t, "PUT", mappings+x, map[string]any{"FunctionName": "fc"}); r.status != 202 {
		t.Fatalf("update of %s to a free function: %d %v", x, r.status, r.body)
	}
	settled(t, a, x, false)
	syncAll(t, b)
	settled(t, b, y, false)
	if r := b.call(t, "PUT", mappings+y, map[string]any{"FunctionName": uniqueFunction}); r.status != 202 {
		t.Fatalf("update of %s to the function %s left: %d %v", y, uniqueFunction, r.status, r.body)
	}
	settled(t, b, y, false)
	if r := create(a, uniqueFunction); r.status != 409 {
		t.Fatalf("create of the pair %s now has: %d %v, want 409", y, r.status, r.body)
	}
	if r := b.call(t, "DELETE", mappings+y, nil); r.status != 202 {
		t.Fatalf("delete: %d %v", r.status, r.body)
	}
	settled(t, b, y, true)
	if r := create(a, uniqueFunction); r.status != 202 {
		t.Fatalf("create of the pair of a deleted mapping: %d %v", r.status, r.body)
	}
	for fn, want := range map[string]int{uniqueFnARN: 1, "arn:aws:lambda:us-east-1:000000000000:function:fb": 0, "arn:aws:lambda:us-east-1:000000000000:function:fc": 1} {
		if ids := mappingsOf(t, cat, uniqueStream, fn); len(ids) != want {
			t.Errorf("the catalog holds %v of %s → %s, want %d", ids, uniqueStream, fn, want)
		}
	}
}

// TestOpenWarnsOfDuplicates: a catalog written before esm kept one mapping per source and
// function may hold two; Open names them.
func TestOpenWarnsOfDuplicates(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"00000000-1111-4222-8333-000000000001", "00000000-1111-4222-8333-000000000002"} {
		r := esmapi.Record{FunctionName: uniqueFunction}
		r.Mapping.UUID, r.Mapping.EventSourceArn, r.Mapping.FunctionArn = id, uniqueStream, uniqueFnARN
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs testkit.SyncBuffer
	progress := esmapi.ProgressFuncs{
		StoreFunc:  func(context.Context, string) (poller.Store, error) { return poller.NewMemoryStore(), nil },
		DeleteFunc: func(context.Context, string) error { return nil },
	}
	startEngine(t, stubRunner(t), esmapi.FileCatalog{Dir: dir}, progress, esmapi.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		esmapi.WithFunctions(esmapi.Function{Name: uniqueFunction, Invoker: inprocess.New((&recorder{}).handle)}), esmapi.WithRestartBackoff(time.Hour))
	out := logs.String()
	if !strings.Contains(out, "two mappings of one source and function") || !strings.Contains(out, "8333-000000000001") || !strings.Contains(out, "8333-000000000002") {
		t.Fatalf("Open of a catalog with two mappings of one pair logged:\n%s", out)
	}
}

// TestConcurrentCreatesOnOneWorker: concurrent Creates of one stream and function on one worker
// with its own state directory (the catalog is written without the manager's lock): one 202, the
// other Lambda's 409, round after round.
func TestConcurrentCreatesOnOneWorker(t *testing.T) {
	cat := esmapi.FileCatalog{Dir: t.TempDir()}
	w := uniqueWorker(t, cat)
	for i := range 30 {
		source := fmt.Sprintf("arn:aws:kinesis:us-east-1:000000000000:stream/one-%d", i)
		body := map[string]any{"FunctionName": uniqueFunction, "EventSourceArn": source, "StartingPosition": "TRIM_HORIZON"}
		codes := make(chan int, 4)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := w.try("POST", mappings, body)
				if err != nil {
					t.Error(err)
				}
				codes <- r.status
			}()
		}
		close(start)
		wg.Wait()
		close(codes)
		count := map[int]int{}
		for c := range codes {
			count[c]++
		}
		if count[202] != 1 || count[409] != 3 {
			t.Fatalf("round %d: four concurrent creates of one pair on one worker answered %v, want one 202 and three 409", i, count)
		}
		if ids := mappingsOf(t, cat, source, uniqueFnARN); len(ids) != 1 {
			t.Fatalf("round %d: the catalog holds %v of %s", i, ids, source)
		}
	}
}
