package poller

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// BenchmarkPollerThroughput measures the poller's own cost per record: reading from the in-memory
// fake, building Lambda's event JSON, invoking a no-op handler in-process through aws-lambda-go
// (which decodes the event into events.KinesisEvent) and checkpointing. One op is one 1 KiB record.
func BenchmarkPollerThroughput(b *testing.B) {
	benchPoller(b, func(target int64, done chan struct{}) Invoker {
		var seen atomic.Int64
		return inprocess.New(func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
			if seen.Add(int64(len(e.Records))) == target {
				close(done)
			}
			return events.KinesisEventResponse{}, nil
		})
	})
}

// BenchmarkPollerOverhead measures the poller alone (read, batch, encode, checkpoint): the invoker
// accepts every batch without decoding it.
func BenchmarkPollerOverhead(b *testing.B) {
	benchPoller(b, func(target int64, done chan struct{}) Invoker {
		return &countingInvoker{target: target, done: done}
	})
}

// BenchmarkPollerOverheadEFO is BenchmarkPollerOverhead with the records pushed through an
// enhanced fan-out subscription: the event stream's encoding and the SDK's decoding included.
func BenchmarkPollerOverheadEFO(b *testing.B) {
	benchPoller(b, func(target int64, done chan struct{}) Invoker {
		return &countingInvoker{target: target, done: done}
	}, func(f *fakekinesis.Fake) kinesissrc.Option {
		return kinesissrc.WithConsumer(f.RegisterConsumer("bench", "esm"))
	})
}

// benchPoller runs a mapping over b.N 1 KiB records of one shard, with the invoker newInvoker
// makes (it closes done once it has seen target records), at BatchSize 100 and 10,000.
func benchPoller(b *testing.B, newInvoker func(target int64, done chan struct{}) Invoker, tune ...func(*fakekinesis.Fake) kinesissrc.Option) {
	for _, batch := range []int{100, 10000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			f := fakekinesis.New()
			arn := f.CreateStream("bench", 1)
			data := bytes.Repeat([]byte("x"), 1024)
			entries := make([]fakekinesis.Entry, 0, 1000)
			for i := 0; i < b.N; i += len(entries) {
				entries = entries[:0]
				for j := 0; j < 1000 && i+j < b.N; j++ {
					entries = append(entries, fakekinesis.Entry{PartitionKey: "k", Data: data})
				}
				f.PutMany("bench", entries)
			}
			done := make(chan struct{})
			cfg := Config{StartingPosition: TrimHorizon, BatchSize: batch, MinPollSpacing: time.Nanosecond,
				PollInterval: time.Millisecond, ShardSyncInterval: time.Hour}
			var opts []kinesissrc.Option
			for _, fn := range tune {
				opts = append(opts, fn(f))
			}
			p, err := New(kinesisSource(f, arn, opts...), cfg, NewMemoryStore(), newInvoker(int64(b.N), done))
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			go func() { errc <- p.Run(ctx) }()
			<-done
			elapsed := time.Since(start)
			b.StopTimer()
			cancel()
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
		})
	}
}

// countingInvoker accepts every batch without decoding it.
type countingInvoker struct {
	seen   atomic.Int64
	target int64
	done   chan struct{}
}

var recordMarker = []byte(`{"kinesis":`)

func (c *countingInvoker) Invoke(_ context.Context, payload []byte) (invoke.Response, error) {
	if c.seen.Add(int64(bytes.Count(payload, recordMarker))) == c.target {
		close(c.done)
	}
	return invoke.Response{StatusCode: 200, Payload: []byte("null")}, nil
}
