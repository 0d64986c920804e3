package lease_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
)

// A worker joins the lease table, claims the shards placed on it, and checkpoints only what it
// holds; the lease item names it as the owner, with KCL's attributes. The table here is
// esm's in-memory DynamoDB; a *dynamodb.Client takes its place in production, and the poller
// (poller.WithCoordinator) makes the Load, Claim and Save calls shown here.
func ExampleNewDynamo() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ddb := fakedynamo.New()
	if err := lease.EnsureTable(ctx, ddb, "orders-leases", true); err != nil {
		log.Fatal(err)
	}
	w, err := lease.NewDynamo(ddb, "orders-leases", "worker-1", lease.WithLeaseDuration(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }() // the heartbeat
	defer func() { stop(); <-ran }()

	shard := "shardId-000000000000"
	if err := w.Register(ctx, []poller.ShardInfo{{ShardID: shard}}); err != nil {
		log.Fatal(err)
	}
	for !w.Held(shard) { // a claim cycle, as the poller runs one every ClaimInterval
		if _, err := w.Load(ctx); err != nil {
			log.Fatal(err)
		}
		if _, err := w.Claim(ctx, []string{shard}); err != nil {
			log.Fatal(err)
		}
		time.Sleep(w.ClaimInterval())
	}
	if err := w.Save(ctx, map[string]poller.ShardProgress{shard: {Checkpoint: "49590338271490256608559692538361571095921575989136588802"}}); err != nil {
		log.Fatal(err)
	}
	leases, err := lease.ListLeases(ctx, ddb, "orders-leases")
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range leases {
		fmt.Printf("%s owned by %s, checkpoint %s\n", l.ShardID, l.Owner, l.Checkpoint)
	}
	// Output:
	// shardId-000000000000 owned by worker-1, checkpoint 49590338271490256608559692538361571095921575989136588802
}
