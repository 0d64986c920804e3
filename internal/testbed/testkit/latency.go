package testkit

import (
	"math"
	"slices"
	"testing"
	"time"
)

// PutToInvoke runs b.N latency samples: for each, it waits a fraction of cycle (golden-ratio
// fractions, so the puts cover the phases of a poll cycle evenly and the median is close to the
// true one with few samples), calls put(i), and waits for the time the handler received that
// record on received. It reports the p50 and p99 latency in milliseconds, not ns/op.
func PutToInvoke(b *testing.B, cycle time.Duration, put func(i int), received <-chan time.Time) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		phase := math.Mod(float64(i+1)*0.6180339887, 1)
		time.Sleep(time.Duration(phase * float64(cycle)))
		start := time.Now()
		put(i)
		lat = append(lat, (<-received).Sub(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}
