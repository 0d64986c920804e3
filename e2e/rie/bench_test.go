package rie

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/execenv"
	"github.com/kinesis-esm/esm/invoke/httpinvoke"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

// BenchmarkInvokeOverhead measures what one invocation costs beyond the handler's own work, for
// a 10-record event (100 bytes of data each) and the example handler writing to /dev/null:
// in process (invoke/inprocess), through one aws-lambda-rie instance over HTTP
// (invoke/httpinvoke), and through one of esm's own execution environments (invoke/execenv,
// exec:). It reports invocations per second and the p50 and p99 latency of one
// invocation, as seen by the poller. Run it with "make bench".
func BenchmarkInvokeOverhead(b *testing.B) {
	payload := benchEvent(b, 10, 100)
	b.Run("inprocess", func(b *testing.B) {
		benchInvoker(b, inprocess.New(example.Config{Output: os.DevNull}.Handle), payload)
	})
	b.Run("rie", func(b *testing.B) {
		r, err := local.StartRIE(context.Background(), local.RIEOptions{
			Binary: rieBin, Handler: []string{bootstrapBin}, Env: []string{"EXAMPLE_OUTPUT=" + os.DevNull}, Dir: b.TempDir(),
		})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Stop()
		inv, err := httpinvoke.New([]string{r.Endpoint()})
		if err != nil {
			b.Fatal(err)
		}
		defer inv.CloseIdleConnections()
		if _, err := inv.Invoke(context.Background(), payload); err != nil { // the cold start
			b.Fatal(err)
		}
		benchInvoker(b, inv, payload)
	})
	b.Run("exec", func(b *testing.B) {
		pool, err := execenv.New([]string{bootstrapBin}, execenv.WithMaxEnvironments(1), execenv.WithOutput(io.Discard),
			execenv.WithEnvironment(map[string]string{"EXAMPLE_OUTPUT": os.DevNull}))
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		if _, err := pool.Invoke(context.Background(), payload); err != nil { // the cold start
			b.Fatal(err)
		}
		benchInvoker(b, pool, payload)
	})
}

func benchInvoker(b *testing.B, inv invoke.Invoker, payload []byte) {
	ctx := context.Background()
	took := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		t0 := time.Now()
		resp, err := inv.Invoke(ctx, payload)
		took = append(took, time.Since(t0))
		if err != nil || resp.Failed() {
			b.Fatalf("invoke: %v %s", err, resp.Payload)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "inv/s")
	b.ReportMetric(float64(took[len(took)*50/100].Microseconds()), "p50-us")
	b.ReportMetric(float64(took[min(len(took)*99/100, len(took)-1)].Microseconds()), "p99-us")
}

// benchEvent is a Kinesis event of n records of size bytes each.
func benchEvent(b *testing.B, n, size int) []byte {
	var e events.KinesisEvent
	for i := range n {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte('a' + (i+j)%26)
		}
		seq := fmt.Sprintf("4959000000000000000000000000000000000000000000000000%04d", i)
		e.Records = append(e.Records, events.KinesisEventRecord{
			AwsRegion: "us-east-1", EventID: "shardId-000000000000:" + seq, EventName: "aws:kinesis:record",
			EventSource: "aws:kinesis", EventSourceArn: "arn:aws:kinesis:us-east-1:000000000000:stream/bench",
			EventVersion: "1.0", InvokeIdentityArn: "arn:aws:iam::000000000000:role/esm",
			Kinesis: events.KinesisRecord{Data: data, PartitionKey: fmt.Sprintf("key-%d", i), SequenceNumber: seq,
				KinesisSchemaVersion: "1.0", ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: time.Unix(1700000000, 0)}},
		})
	}
	payload, err := json.Marshal(e)
	if err != nil {
		b.Fatal(err)
	}
	return payload
}
