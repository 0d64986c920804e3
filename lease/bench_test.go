package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/poller"
)

// countingAPI counts the DynamoDB calls of a worker and, once cut, fails them all as an
// unreachable or dead worker's would.
type countingAPI struct {
	DynamoAPI
	calls atomic.Int64
	cut   atomic.Bool
}

var errCut = errors.New("connection refused")

func (c *countingAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.calls.Add(1)
	if c.cut.Load() {
		return nil, errCut
	}
	return c.DynamoAPI.PutItem(ctx, in, o...)
}

func (c *countingAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.calls.Add(1)
	if c.cut.Load() {
		return nil, errCut
	}
	return c.DynamoAPI.UpdateItem(ctx, in, o...)
}

func (c *countingAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.calls.Add(1)
	if c.cut.Load() {
		return nil, errCut
	}
	return c.DynamoAPI.GetItem(ctx, in, o...)
}

func (c *countingAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.calls.Add(1)
	if c.cut.Load() {
		return nil, errCut
	}
	return c.DynamoAPI.BatchGetItem(ctx, in, o...)
}

func (c *countingAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.calls.Add(1)
	if c.cut.Load() {
		return nil, errCut
	}
	return c.DynamoAPI.DeleteItem(ctx, in, o...)
}

func (c *countingAPI) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.calls.Add(1)
	if c.cut.Load() {
		return nil, errCut
	}
	return c.DynamoAPI.Scan(ctx, in, o...)
}

// BenchmarkLeases100Shards measures, with four in-process workers (real pollers on the in-memory
// Kinesis fake, leases on dynalite, the default lease duration and the claim interval esm run
// uses with it): the time for
// four workers started together to own 25 of 100 shards each, the time for a fourth worker
// joining three balanced ones to get its share, the DynamoDB calls per shard per minute of an
// idle, balanced mapping, and the time for the others to take over a worker that died (its
// DynamoDB calls all fail from then on). Run with -benchtime 1x; it takes about a minute.
func BenchmarkLeases100Shards(b *testing.B) {
	const shards = 100
	for range b.N {
		fake := fakekinesis.New()
		arn := fake.CreateStream(uniqueName("bench"), shards)
		table := newTable(b)
		log, _ := testLogger(b)
		probe, _ := NewDynamo(ddb, table, "probe")
		cfg := poller.Config{StartingPosition: poller.TrimHorizon, ClaimInterval: probe.ClaimInterval()}
		inv := invoke.InvokerFunc(func(context.Context, []byte) (invoke.Response, error) {
			return invoke.Response{StatusCode: 200, Payload: []byte("null")}, nil
		})
		var apis []*countingAPI
		var ws []*worker
		var ids []string
		start := func(i int) {
			api := &countingAPI{DynamoAPI: ddb}
			id := fmt.Sprintf("w%d", i)
			apis, ids = append(apis, api), append(ids, id)
			ws = append(ws, startWorker(b, cfg, fake, arn, api, table, id, inv, log))
		}
		isBalanced := func(ids []string) func() bool {
			return func() bool { o, n := openOwners(b, table); return n == shards && balanced(o, n, ids) }
		}

		// Cold start: four workers at once.
		t0 := time.Now()
		for i := range 4 {
			start(i)
		}
		testkit.WaitFor(b, "4 workers balanced", 2*time.Minute, isBalanced(ids))
		cold := time.Since(t0)
		for _, w := range ws {
			w.stop(b)
		}

		// A fourth worker joins three balanced ones.
		apis, ws, ids = nil, nil, nil
		table = newTable(b)
		for i := range 3 {
			start(i)
		}
		testkit.WaitFor(b, "3 workers balanced", 2*time.Minute, isBalanced(ids))
		t0 = time.Now()
		start(3)
		testkit.WaitFor(b, "the fourth worker's share", 2*time.Minute, isBalanced(ids))
		join := time.Since(t0)

		// Steady state: what an idle, balanced mapping costs.
		var before int64
		for _, a := range apis {
			before += a.calls.Load()
		}
		const window = 20 * time.Second
		time.Sleep(window) // measuring a rate over a fixed window, not waiting for a condition
		var after int64
		for _, a := range apis {
			after += a.calls.Load()
		}
		perShardMinute := float64(after-before) / shards / window.Minutes()

		// A worker dies: its counters stop.
		var victims []string
		for _, l := range leasesOfTable(b, table) {
			if l.Owner == "w0" {
				victims = append(victims, l.ShardID)
			}
		}
		t0 = time.Now()
		apis[0].cut.Store(true)
		testkit.WaitFor(b, "the dead worker's shards taken over", time.Minute, func() bool {
			ls := leasesOf(b, table)
			for _, id := range victims {
				if o := ls[id].Owner; o == "" || o == "w0" {
					return false
				}
			}
			return true
		})
		takeover := time.Since(t0)
		for _, w := range ws {
			w.stop(b)
		}

		b.ReportMetric(cold.Seconds(), "cold-balance-s")
		b.ReportMetric(join.Seconds(), "join-balance-s")
		b.ReportMetric(perShardMinute, "ddb-calls/shard/min")
		b.ReportMetric(takeover.Seconds(), "takeover-s")
	}
}
