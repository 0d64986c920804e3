package poller

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// BenchmarkPutToInvokeLatency measures, on the in-memory fake, the time from putting a record to
// the in-process handler receiving it: enhanced fan-out (a subscription pushes it) against
// polling at Lambda's 1 s and at 200 ms. One op is one record; p50 and p99 are reported in ms.
func BenchmarkPutToInvokeLatency(b *testing.B) {
	for _, tt := range []struct {
		name     string
		interval time.Duration // the poll interval; the cycle puts are spread over
		efo      bool
	}{
		{name: "efo", interval: time.Second, efo: true},
		{name: "poll=1s", interval: time.Second},
		{name: "poll=200ms", interval: 200 * time.Millisecond},
	} {
		b.Run(tt.name, func(b *testing.B) {
			f := fakekinesis.New()
			cfg := Config{StartingPosition: Latest, PollInterval: tt.interval, ShardSyncInterval: time.Hour}
			var opts []kinesissrc.Option
			arn := f.CreateStream("lat", 1)
			if tt.efo {
				opts = append(opts, kinesissrc.WithConsumer(f.RegisterConsumer("lat", "esm")))
			}
			received := make(chan time.Time, 1)
			inv := inprocess.New(func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
				now := time.Now()
				for range e.Records {
					received <- now
				}
				return events.KinesisEventResponse{}, nil
			})
			p, err := New(kinesisSource(f, arn, opts...), cfg, NewMemoryStore(), inv)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- p.Run(ctx) }()
			// The first record proves the shard is being read (LATEST is taken by then); not measured.
			for warm := false; !warm; {
				f.Put("lat", "k", []byte("warm"))
				select {
				case <-received:
					warm = true
				case <-time.After(3 * tt.interval):
				}
			}
			testkit.PutToInvoke(b, tt.interval, func(i int) { f.Put("lat", "k", []byte(strconv.Itoa(i))) }, received)
			cancel()
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
	}
}
