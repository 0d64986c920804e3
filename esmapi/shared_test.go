package esmapi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
)

// sharedWorker is one worker serving the mappings of a DynamoDB table: the catalog in table,
// each mapping's leases in table-<UUID>.
func sharedWorker(t *testing.T, ddb *dynamodb.Client, table, worker string, fn *recorder, opts ...esmapi.Option) *server {
	t.Helper()
	catalog := esmapi.DynamoCatalog{API: ddb, Table: table}
	if err := catalog.Ensure(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	base := []esmapi.Option{
		esmapi.WithDeleteDelay(time.Second),
		esmapi.WithFunctions(esmapi.Function{Name: "fn", Invoker: inprocess.New(fn.handle)}),
		esmapi.WithBase(poller.Config{PollInterval: 50 * time.Millisecond, MinPollSpacing: 20 * time.Millisecond, ShutdownGrace: 5 * time.Second}),
		esmapi.WithSyncInterval(100 * time.Millisecond),
		esmapi.WithRestartBackoff(100 * time.Millisecond),
	}
	return startOpen(t, catalog, leaseProgress(ddb, table, worker), append(base, opts...)...)
}

// leaseProgress keeps each mapping's progress in the lease table table-<UUID>, as worker.
func leaseProgress(ddb *dynamodb.Client, table, worker string) esmapi.Progress {
	return esmapi.ProgressFuncs{
		StoreFunc: func(ctx context.Context, id string) (poller.Store, error) {
			if err := lease.EnsureTable(ctx, ddb, table+"-"+id, true); err != nil {
				return nil, err
			}
			return lease.NewDynamo(ddb, table+"-"+id, worker, lease.WithLeaseDuration(3*time.Second))
		},
		DeleteFunc: func(ctx context.Context, id string) error {
			_, err := ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table + "-" + id)})
			if nf := (*ddbtypes.ResourceNotFoundException)(nil); errors.As(err, &nf) {
				return nil // another worker dropped it first
			}
			return err
		},
	}
}

// TestSharedMappingsAcrossWorkers: two workers on one table serve the same mappings. A mapping
// created on one runs on both, its shards leased between them, every record delivered once; an
// update on the other applies on both; a delete on the first stops it everywhere and drops its
// lease table.
func TestSharedMappingsAcrossWorkers(t *testing.T) {
	ctx := context.Background()
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(dynamoEndpoint) })
	table := fmt.Sprintf("esmapi-shared-%d-%d", os.Getpid(), streamSeq.Add(1))
	fa, fb := &recorder{}, &recorder{}
	var deleted sync.Map // worker → the mappings WithOnDeleted told it of
	onDeleted := func(w string) esmapi.Option {
		return esmapi.WithOnDeleted(func(id string) { deleted.Store(w+"/"+id, true) })
	}
	a := sharedWorker(t, ddb, table, "worker-a", fa, onDeleted("a"))
	b := sharedWorker(t, ddb, table, "worker-b", fb, onDeleted("b"))

	name := fmt.Sprintf("esmapi-%d-%d", os.Getpid(), streamSeq.Add(1))
	arn, err := local.CreateStream(ctx, kin, name, 2)
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("fn"), EventSourceArn: aws.String(arn), StartingPosition: types.EventSourcePositionTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.UUID)
	get := func(s *server) (*lambda.GetEventSourceMappingOutput, error) {
		return s.client.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(id)})
	}
	testkit.WaitFor(t, "worker b to run the mapping", 20*time.Second, func() bool {
		g, err := get(b)
		return err == nil && aws.ToString(g.State) == "Enabled"
	})

	var data []string
	recs := make([]local.Record, 40)
	for i := range recs {
		d := fmt.Sprintf("shared-%02d", i)
		data = append(data, d)
		recs[i] = local.Record{PartitionKey: fmt.Sprintf("pk-%d", i), Data: []byte(d)}
	}
	if _, err := local.PutRecords(ctx, kin, name, recs); err != nil {
		t.Fatal(err)
	}
	both := func() []string { return append(fa.records(), fb.records()...) }
	testkit.WaitFor(t, "every record on one worker or the other", 30*time.Second, func() bool {
		got := both()
		for _, d := range data {
			if !slices.Contains(got, d) {
				return false
			}
		}
		return true
	})
	if got := both(); len(got) != len(data) {
		slices.Sort(got)
		t.Fatalf("%d deliveries for %d records: %v", len(got), len(data), got)
	}

	if _, err := b.client.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: aws.String(id), BatchSize: aws.Int32(3)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "worker a to apply the update", 20*time.Second, func() bool {
		g, err := get(a)
		return err == nil && aws.ToInt32(g.BatchSize) == 3 && aws.ToString(g.State) == "Enabled"
	})

	if _, err := a.client.DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: aws.String(id)}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*server{a, b} {
		testkit.WaitFor(t, "the mapping to be gone", 20*time.Second, func() bool {
			_, err := get(s)
			var nf *types.ResourceNotFoundException
			return errors.As(err, &nf)
		})
	}
	testkit.WaitFor(t, "the mapping's lease table to be dropped", 20*time.Second, func() bool {
		_, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table + "-" + id)})
		var nf *ddbtypes.ResourceNotFoundException
		return errors.As(err, &nf)
	})
	testkit.WaitFor(t, "both workers told of the deletion (WithOnDeleted)", 20*time.Second, func() bool {
		_, okA := deleted.Load("a/" + id)
		_, okB := deleted.Load("b/" + id)
		return okA && okB
	})
}
