package status_test

import (
	"os"

	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source"
	"github.com/kinesis-esm/esm/status"
)

// A stream whose first shard was split: the parent was read to its end, one child is being read
// and the other starts at the trim horizon.
func ExampleReport_Render() {
	listing := []source.Shard{
		{ID: "shardId-000000000000"},
		{ID: "shardId-000000000001", Parents: []string{"shardId-000000000000"}},
		{ID: "shardId-000000000002", Parents: []string{"shardId-000000000000"}},
	}
	progress := map[string]poller.ShardProgress{
		"shardId-000000000000": {Checkpoint: "4959", Finished: true},
		"shardId-000000000001": {Checkpoint: "4961"},
		"shardId-000000000002": {Start: "TRIM_HORIZON"},
	}
	rep := status.Report{
		Stream:   "arn:aws:kinesis:us-east-1:123456789012:stream/orders",
		Function: "arn:aws:lambda:us-east-1:123456789012:function:ship",
		StateDir: ".esm",
		Shards:   status.Shards(listing, progress),
	}
	if err := rep.Render(os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// stream    arn:aws:kinesis:us-east-1:123456789012:stream/orders
	// function  arn:aws:lambda:us-east-1:123456789012:function:ship
	// state     .esm
	// shards    3: 2 reading, 1 finished
	//
	// shardId-000000000000                         finished  checkpoint 4959
	// ├─ shardId-000000000001                      reading   checkpoint 4961
	// └─ shardId-000000000002                      reading   starts at TRIM_HORIZON
}
