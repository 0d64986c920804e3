package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/poller"
)

// A FileStore keeps each mapping's progress in one bbolt file of the state directory, locked
// while the process runs; a poller is given the store of its mapping. A second open of the
// directory fails with ErrLocked, and the progress survives Close.
func ExampleOpenFile() {
	dir, err := os.MkdirTemp("", "esm-state-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := checkpoint.OpenFile(dir)
	if err != nil {
		log.Fatal(err)
	}
	key := checkpoint.MappingKey("arn:aws:kinesis:us-east-1:123456789012:stream/orders", "orders-fn")
	var progress poller.Store = store.Mapping(key) // what poller.New takes
	ctx := context.Background()
	err = progress.Save(ctx, map[string]poller.ShardProgress{
		"shardId-000000000000": {Checkpoint: "49590338271490256608559692538361571095921575989136588898", UpdatedAt: time.Now()},
		"shardId-000000000001": {Finished: true, UpdatedAt: time.Now()},
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := checkpoint.OpenFile(dir); err != nil {
		fmt.Println("second open locked:", errors.Is(err, checkpoint.ErrLocked))
	}
	if err := store.Close(); err != nil {
		log.Fatal(err)
	}

	saved, err := checkpoint.ReadFile(dir, key) // reads without writing anything
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("checkpoint:", saved["shardId-000000000000"].Checkpoint)
	fmt.Println("finished:", saved["shardId-000000000001"].Finished)
	// Output:
	// second open locked: true
	// checkpoint: 49590338271490256608559692538361571095921575989136588898
	// finished: true
}
