package esmapi_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
)

// TestLastProcessingResultSurvivesRestart: with WithResults, a mapping whose batches succeeded
// shows LastProcessingResult "OK" after a restart, before it handles anything new (without it,
// "No records processed"); a deleted mapping's result is forgotten.
func TestLastProcessingResultSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	name, arn := newStream(t)
	results := esmapi.FileResults{Dir: dir + "/results"}
	open := func(fn *recorder) (*server, func()) {
		store, err := checkpoint.OpenFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		s := startOpen(t, esmapi.FileCatalog{Dir: dir + "/mappings"}, esmapi.ProgressFuncs{
			StoreFunc:  func(_ context.Context, id string) (poller.Store, error) { return store.Mapping(id), nil },
			DeleteFunc: func(_ context.Context, id string) error { return store.DeleteMapping(id) },
		}, esmapi.WithFunctions(esmapi.Function{Name: "fn", Invoker: inprocess.New(fn.handle)}), esmapi.WithResults(results),
			esmapi.WithBase(poller.Config{PollInterval: 50 * time.Millisecond, MinPollSpacing: 20 * time.Millisecond}))
		return s, func() { s.close(); _ = store.Close() }
	}
	fn := &recorder{}
	s, closeS := open(fn)
	out, err := s.client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("fn"), EventSourceArn: aws.String(arn), StartingPosition: types.EventSourcePositionTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.UUID)
	put(t, name, uniq("r", 3)...)
	testkit.WaitFor(t, "the records", 20*time.Second, fn.has(uniq("r", 3)...))
	testkit.WaitFor(t, "LastProcessingResult OK", 5*time.Second, func() bool {
		return aws.ToString(s.waitState(t, id, "Enabled").LastProcessingResult) == esmapi.ResultOK
	})
	closeS()

	s, closeS = open(&recorder{})
	defer closeS()
	got, err := s.client.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(id)})
	if err != nil {
		t.Fatal(err)
	}
	if r := aws.ToString(got.LastProcessingResult); r != esmapi.ResultOK {
		t.Fatalf("LastProcessingResult after a restart: %q, want %q", r, esmapi.ResultOK)
	}
	s.waitState(t, id, "Enabled")
	if _, err := s.client.DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: aws.String(id)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the result forgotten", 20*time.Second, func() bool {
		r, err := results.LoadResult(ctx, id)
		return err == nil && r == ""
	})
}

// TestLastProcessingResultSharedThroughTheCatalogTable: workers on one table (esm serve
// --lease-table) keep LastProcessingResult in the catalog's table, so a worker started after
// the one that processed the batch answers with its result, the catalog reads no result item as
// a mapping, and a delete forgets the result.
func TestLastProcessingResultSharedThroughTheCatalogTable(t *testing.T) {
	ctx := context.Background()
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(dynamoEndpoint) })
	table := fmt.Sprintf("esmapi-results-%d-%d", os.Getpid(), streamSeq.Add(1))
	results := esmapi.DynamoResults{API: ddb, Table: table}
	fa := &recorder{}
	a := sharedWorker(t, ddb, table, "worker-a", fa, esmapi.WithResults(results))
	name, arn := newStream(t)
	out, err := a.client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("fn"), EventSourceArn: aws.String(arn), StartingPosition: types.EventSourcePositionTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.UUID)
	put(t, name, uniq("r", 3)...)
	testkit.WaitFor(t, "the records", 20*time.Second, fa.has(uniq("r", 3)...))
	testkit.WaitFor(t, "the result kept in the table", 10*time.Second, func() bool {
		r, err := results.LoadResult(ctx, id)
		return err == nil && r == esmapi.ResultOK
	})
	a.close()

	b := sharedWorker(t, ddb, table, "worker-b", &recorder{}, esmapi.WithResults(results))
	defer b.close()
	got, err := b.client.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(id)})
	if err != nil {
		t.Fatal(err)
	}
	if r := aws.ToString(got.LastProcessingResult); r != esmapi.ResultOK {
		t.Fatalf("LastProcessingResult on a worker started after the batch: %q, want %q", r, esmapi.ResultOK)
	}
	records, err := esmapi.DynamoCatalog{API: ddb, Table: table}.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 1 || records[0].Mapping.UUID != id {
		t.Fatalf("the catalog reads %d mappings (%+v), want the one mapping %s", len(records), records, id)
	}
	b.waitState(t, id, "Enabled")
	if _, err := b.client.DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: aws.String(id)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the result forgotten", 20*time.Second, func() bool {
		r, err := results.LoadResult(ctx, id)
		return err == nil && r == ""
	})
}
