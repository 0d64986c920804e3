package leasesim

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

var manyShards, idleWindow = testkit.IdleShardsFlags()

// BenchmarkManyIdleShards measures one worker reading many idle shards in real time (not a
// bubble): one lease.Dynamo and one poller, polling every second, over fake/fakekinesis and
// fake/fakedynamo in this process. Once the worker holds every shard's lease and has read
// every shard (its first GetRecords answered), the process is measured over -idle-window
// (default 30 s): RSS-MB, peakRSS-MB and cpu-%core, from /proc, and GetRecords/s. The process
// holds the fakes too (the stream, the lease table and their calls), so the figures are an upper
// bound for the worker itself; cmd/esm's BenchmarkManyIdleShards measures the esm binary alone on
// kinesis-local. -shards sets the shard counts (default 1000), e.g.
//
//	go test -run '^$' -bench ManyIdleShards -benchtime 1x ./internal/testbed/leasesim/ -args -shards=500,1000
func BenchmarkManyIdleShards(b *testing.B) {
	testkit.ForEachCount(b, *manyShards, measureIdleShards)
}

func measureIdleShards(b *testing.B, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kin := fakekinesis.New()
	arn := kin.CreateStream("many", n)
	db := fakedynamo.New()
	if err := lease.EnsureTable(ctx, db, "many", true); err != nil {
		b.Fatal(err)
	}
	d, err := lease.NewDynamo(db, "many", "solo")
	if err != nil {
		b.Fatal(err)
	}
	reads := testkit.NewShardReads()
	p, err := poller.New(kinesissrc.MustNew(readsKinesis{kin, reads}, arn), poller.Config{StartingPosition: poller.TrimHorizon, ClaimInterval: d.ClaimInterval()}, d, invoke.InvokerFunc(func(context.Context, []byte) (invoke.Response, error) {
		return invoke.Response{StatusCode: 200, Payload: []byte("null")}, nil
	}), poller.WithCoordinator(d), poller.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	leaseCtx, stopLeases := context.WithCancel(context.Background())
	leaseDone := make(chan error, 1)
	go func() { leaseDone <- d.Run(leaseCtx) }()
	pollDone := make(chan error, 1)
	go func() { pollDone <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-pollDone; err != nil {
			b.Error(err)
		}
		stopLeases()
		<-leaseDone
	}()

	started := time.Now()
	testkit.WaitFor(b, "every shard held and read", 5*time.Minute, func() bool {
		select {
		case err := <-pollDone:
			b.Fatalf("poller stopped: %v", err)
		default:
		}
		if read, _ := reads.Read(); read < n {
			return false
		}
		for i := range n {
			if !d.Held(fmt.Sprintf("shardId-%012d", i)) {
				return false
			}
		}
		return true
	})
	b.Logf("%d shards: all held and read %s after the worker started; load average %s", n,
		time.Since(started).Round(time.Millisecond), testkit.LoadAverage())

	b.ResetTimer()
	testkit.MeasureProc(b, 0, *idleWindow, func() int64 { _, calls := reads.Read(); return calls })
	b.StopTimer()
}

// readsKinesis is the fake Kinesis, its iterators followed by reads.
type readsKinesis struct {
	*fakekinesis.Fake
	reads *testkit.ShardReads
}

func (k readsKinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	out, err := k.Fake.GetShardIterator(ctx, in, opts...)
	if err == nil {
		k.reads.Iterator(aws.ToString(in.ShardId), aws.ToString(out.ShardIterator))
	}
	return out, err
}

func (k readsKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	out, err := k.Fake.GetRecords(ctx, in, opts...)
	if err == nil {
		k.reads.GetRecords(aws.ToString(in.ShardIterator), aws.ToString(out.NextShardIterator))
	}
	return out, err
}
