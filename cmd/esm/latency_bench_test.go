package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/internal/service"
	"github.com/kinesis-esm/esm/local"
	"github.com/kinesis-esm/esm/poller"
)

// BenchmarkPutToInvokeLatency measures, on kinesis-local, the time from a PutRecords call to the
// in-process handler receiving the record, one record at a time, with puts spread evenly over the
// phases of the poll cycle. One op is one record. Reported: p50 and p99 in milliseconds.
func BenchmarkPutToInvokeLatency(b *testing.B) {
	for _, interval := range []time.Duration{time.Second, 200 * time.Millisecond} {
		b.Run("poll="+interval.String(), func(b *testing.B) {
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
			go func() {
				errc <- service.Run(ctx, service.Options{
					Stream: stream, EndpointURL: kinesisEndpoint, StateDir: filepath.Join(b.TempDir(), "state"),
					Mapping: poller.Config{StartingPosition: poller.Latest, PollInterval: interval},
					Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
				}, handler)
			}()
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
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				// The previous record arrived just after a poll: waiting a fraction of the interval
				// puts this one at that phase of the cycle. Golden-ratio fractions cover the cycle
				// evenly, so the median is close to the true one with few samples.
				phase := math.Mod(float64(i+1)*0.6180339887, 1)
				time.Sleep(time.Duration(phase * float64(interval)))
				start := time.Now()
				if _, err := local.PutRecords(ctx, kin, stream, []local.Record{{PartitionKey: "k", Data: []byte(strconv.Itoa(i))}}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, (<-received).Sub(start))
			}
			b.StopTimer()
			cancel()
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
