package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// BenchmarkPutToInvokeLatency measures, on kinesis-local, the time from a PutRecords call to the
// in-process handler receiving the record, one record at a time, with puts spread evenly over the
// phases of the poll cycle: polling at two intervals, and enhanced fan-out through a registered
// consumer (kinesis-local pushes subscription events about once a second). One op is one record.
// Reported: p50 and p99 in milliseconds.
func BenchmarkPutToInvokeLatency(b *testing.B) {
	for _, tt := range []struct {
		name     string
		interval time.Duration
		efo      bool
	}{{"poll=1s", time.Second, false}, {"poll=200ms", 200 * time.Millisecond, false}, {"efo", time.Second, true}} {
		interval := tt.interval
		b.Run(tt.name, func(b *testing.B) {
			stream := fmt.Sprintf("bench-latency-%d", streamSeq.Add(1))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if _, err := local.CreateStream(ctx, kin, stream, 1); err != nil {
				b.Fatal(err)
			}
			received := make(chan time.Time, 1)
			handler := func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
				now := time.Now()
				for range e.Records {
					received <- now
				}
				return events.KinesisEventResponse{}, nil
			}
			errc := make(chan error, 1)
			awsCfg, err := runner.AWSConfig(ctx, "", kinesisEndpoint)
			if err != nil {
				b.Fatal(err)
			}
			r, err := runner.New(awsCfg, runner.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				b.Fatal(err)
			}
			o := runner.Mapping{
				Source: runner.Source{Stream: stream}, Function: runner.Function{Handler: handler},
				Store:  runner.Store{StateDir: filepath.Join(b.TempDir(), "state")},
				Config: poller.Config{StartingPosition: poller.Latest, PollInterval: interval},
			}
			if tt.efo {
				o.Source.Consumer, o.Source.RegisterConsumer = "bench", true
			}
			go func() { errc <- r.Run(ctx, o) }()
			// The first record proves the shard is being read; it is not measured.
			warm := func() bool {
				if _, err := local.PutRecords(ctx, kin, stream, []local.Record{{PartitionKey: "k", Data: []byte("warm")}}); err != nil {
					b.Fatal(err)
				}
				select {
				case <-received:
					return true
				case <-time.After(3 * interval):
					return false
				}
			}
			for !warm() {
			}
			testkit.PutToInvoke(b, interval, func(i int) {
				if _, err := local.PutRecords(ctx, kin, stream, []local.Record{{PartitionKey: "k", Data: []byte(strconv.Itoa(i))}}); err != nil {
					b.Fatal(err)
				}
			}, received)
			cancel()
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
	}
}
