package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/internal/ddbcall"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
)

// hangAll is a DynamoDB client none of whose calls ever gets an answer: each returns only when
// its context ends (a connection a middlebox black-holes; the SDK sets no deadline of its own).
type hangAll struct{}

func hang[T any](ctx context.Context) (*T, error) { <-ctx.Done(); return nil, ctx.Err() }

func (hangAll) GetItem(ctx context.Context, _ *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return hang[dynamodb.GetItemOutput](ctx)
}
func (hangAll) BatchGetItem(ctx context.Context, _ *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return hang[dynamodb.BatchGetItemOutput](ctx)
}
func (hangAll) PutItem(ctx context.Context, _ *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return hang[dynamodb.PutItemOutput](ctx)
}
func (hangAll) UpdateItem(ctx context.Context, _ *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return hang[dynamodb.UpdateItemOutput](ctx)
}
func (hangAll) DeleteItem(ctx context.Context, _ *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return hang[dynamodb.DeleteItemOutput](ctx)
}
func (hangAll) Scan(ctx context.Context, _ *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return hang[dynamodb.ScanOutput](ctx)
}

// TestEveryCallHasADeadline: on a table none of whose calls is ever answered, every entry point
// of a Dynamo (Register, Load, Claim, Save, Release, Run and its stop) and the package's
// functions return by their calls' own deadlines, though their contexts never end: no call is
// made without one.
func TestEveryCallHasADeadline(t *testing.T) {
	const L = 3 * time.Second
	d, err := lease.NewDynamo(hangAll{}, "leases", "w1", lease.WithLeaseDuration(L))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	within := func(what string, limit time.Duration, fn func()) {
		t.Helper()
		done := make(chan struct{})
		start := time.Now()
		go func() { fn(); close(done) }()
		select {
		case <-done:
			t.Logf("%s returned after %s", what, time.Since(start).Round(time.Millisecond))
		case <-time.After(limit):
			t.Fatalf("%s still waiting on an unanswered DynamoDB call after %s", what, limit)
		}
	}
	rctx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { _ = d.Run(rctx); close(ran) }()
	within("Register", 10*time.Second, func() {
		_ = d.Register(ctx, []poller.ShardInfo{{ShardID: "shardId-000000000000"}})
	})
	within("Load", 20*time.Second, func() { _, _ = d.Load(ctx) })
	within("Claim", 30*time.Second, func() { _, _ = d.Claim(ctx, []string{"shardId-000000000000"}) })
	within("Save", 10*time.Second, func() {
		_ = d.Save(ctx, map[string]poller.ShardProgress{"shardId-000000000000": {Checkpoint: "1"}})
	})
	within("Release", 10*time.Second, func() { _ = d.Release(ctx, "shardId-000000000000") })
	within("ListLeases", 20*time.Second, func() { _, _ = lease.ListLeases(ctx, hangAll{}, "leases") })
	// A start-up call tries a write that ran out of its time again (calls.go, startup), up to
	// StartupAttempts times in all, each with ddbcall.Item.
	startup := lease.StartupAttempts*ddbcall.Item + 5*time.Second
	within("MappingUUID", startup, func() { _, _ = lease.MappingUUID(ctx, hangAll{}, "leases") })
	within("ReadFleet", 20*time.Second, func() { _, _ = lease.ReadFleet(ctx, hangAll{}, "leases") })
	within("WorkerReader", 10*time.Second, func() { _, _ = lease.NewWorkerReader(hangAll{}, "leases").Workers(ctx) })
	within("ClaimTable", startup, func() {
		_ = lease.ClaimTable(ctx, hangAll{}, "leases", "arn:aws:kinesis:us-east-1:000000000000:stream/s")
	})
	within("Run's stop", 15*time.Second, func() { stop(); <-ran })
}
