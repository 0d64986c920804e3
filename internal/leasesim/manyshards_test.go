package leasesim

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/fakedynamo"
	"github.com/kinesis-esm/esm/internal/fakekinesis"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
)

var manyShards = flag.Int("manyshards", 0, "TestOneProcessManyShards: shards one worker reads, in real time (0: skip)")

// TestOneProcessManyShards measures one worker reading many idle shards in real time (not a
// bubble): its resident memory and CPU, the in-memory Kinesis and DynamoDB included (so an
// upper bound for esm itself). Run with -args -manyshards=1000.
func TestOneProcessManyShards(t *testing.T) {
	if *manyShards == 0 {
		t.Skip("-manyshards N")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kin := fakekinesis.New()
	arn := kin.CreateStream("many", *manyShards)
	db := fakedynamo.New()
	if err := lease.EnsureTable(ctx, db, "many", true); err != nil {
		t.Fatal(err)
	}
	d, err := lease.NewDynamo(db, "many", "solo")
	if err != nil {
		t.Fatal(err)
	}
	p, err := poller.New(poller.Config{StreamARN: arn, StartingPosition: poller.TrimHorizon, ClaimInterval: d.ClaimInterval()}, kin, d,
		invoke.InvokerFunc(func(context.Context, []byte) (invoke.Response, error) {
			return invoke.Response{StatusCode: 200, Payload: []byte("null")}, nil
		}), poller.WithCoordinator(d), poller.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	dctx, stopLeases := context.WithCancel(context.Background())
	dDone := make(chan error, 1)
	go func() { dDone <- d.Run(dctx) }()
	pDone := make(chan error, 1)
	go func() { pDone <- p.Run(ctx) }()
	time.Sleep(20 * time.Second) // warm up: every shard read and idle
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	const window = 30 * time.Second
	time.Sleep(window)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := float64(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) / float64(window)
	t.Logf("%d idle shards in one worker: RSS %d MB, CPU %.1f%% of a core (GOMAXPROCS %d), %d GetRecords/s",
		*manyShards, rssMB(), 100*cpu, runtime.GOMAXPROCS(0), kin.Calls("GetRecords")/50)
	cancel()
	<-pDone
	stopLeases()
	<-dDone
}

func rssMB() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			var kb int
			_, _ = fmtSscan(strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:")), &kb)
			return kb / 1024
		}
	}
	return -1
}

func fmtSscan(s string, kb *int) (int, error) { return fmt.Sscan(strings.TrimSuffix(s, " kB"), kb) }
