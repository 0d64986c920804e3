package prom_test

import (
	"fmt"
	"log"
	"time"

	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/metrics/prom"
	"github.com/kinesis-esm/esm/poller"
)

// The observer keeps Lambda's metric names: a scrape of the registry shows the shard's
// PolledEventCount and IteratorAge (in milliseconds, Lambda's unit).
func Example() {
	reg := prom.NewRegistry()
	obs := prom.New(reg, "my-function", "orders")
	obs.ShardState("shardId-000000000000", poller.StateReading)
	obs.RecordsPolled("shardId-000000000000", 3)
	obs.IteratorAge("shardId-000000000000", 1500*time.Millisecond)

	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case metrics.NamePolledEventCount:
			fmt.Println(f.GetName(), f.GetMetric()[0].GetCounter().GetValue())
		case metrics.NameIteratorAge, prom.NameShardOwned:
			fmt.Println(f.GetName(), f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output:
	// IteratorAge 1500
	// PolledEventCount 3
	// esm_shard_owned 1
}
