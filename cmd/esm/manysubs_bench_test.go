package main

import (
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

var (
	subLifetime  = flag.Duration("subscription-lifetime", 30*time.Second, "BenchmarkManyIdleSubscriptionsFakeKinesis: how long a subscription lasts before esm renews it (Kinesis: 5 minutes)")
	subHeartbeat = flag.Duration("subscription-heartbeat", time.Second, "BenchmarkManyIdleSubscriptionsFakeKinesis: how long an idle subscription waits before it sends an empty event")
)

// BenchmarkManyIdleSubscriptionsFakeKinesis is BenchmarkManyIdleShardsFakeKinesis through an
// enhanced fan-out consumer: "esm run --stream CONSUMER_ARN" of the built binary holds one
// SubscribeToShard subscription per idle shard of fake/fakekinesis, served over HTTP by this
// test process, which sends each subscription an empty event every second (-subscription-heartbeat;
// Kinesis sends one every few seconds) and ends it after -subscription-lifetime (default 30 s, so that the
// window sees renewals; Kinesis ends them after 5 minutes), when esm subscribes again. Once every
// shard is owned and subscribed, the esm process alone is measured over -idle-window: RSS,
// cpu-%core, event/s and cpu-us/event (CPU time per event received, renewals included), with
// subscribes/s (renewals) and conns/s. -shards, -esm-base, -tls and -esm-env as for
// BenchmarkManyIdleShardsFakeKinesis.
//
//	go test -run '^$' -bench ManyIdleSubscriptionsFakeKinesis -benchtime 1x ./cmd/esm/ -args -shards=1000
func BenchmarkManyIdleSubscriptionsFakeKinesis(b *testing.B) {
	testkit.ForEachCount(b, *manyShards, func(b *testing.B, n int) {
		forEachESM(b, func(b *testing.B, bin string) { measureIdleSubscriptions(b, bin, n) })
	})
}

func measureIdleSubscriptions(b *testing.B, bin string, n int) {
	f := fakekinesis.New(fakekinesis.WithSubscriptionTiming(*subLifetime, 5*time.Second), fakekinesis.WithSubscriptionHeartbeat(*subHeartbeat))
	f.CreateStream("idle", n)
	consumer := f.RegisterConsumer("idle", "esm")
	var subscribes, streaming, conns atomic.Int64
	h := fakeKinesisHTTP(f)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".SubscribeToShard") {
			subscribes.Add(1)
			streaming.Add(1)
			defer streaming.Add(-1)
		}
		h.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	p := runIdleESM(b, bin, srv, consumer, n, "subscribed", func() bool { return streaming.Load() == int64(n) })
	b.ResetTimer()
	subs0, conns0, from := subscribes.Load(), conns.Load(), time.Now()
	stopProfile := profileWindow(b, bin, p)
	testkit.MeasureProcPer(b, p.cmd.Process.Pid, *idleWindow, "event", func() int64 { return int64(f.Calls(fakekinesis.OpSubscribeToShardEvent)) })
	b.StopTimer()
	stopProfile()
	window := time.Since(from).Seconds()
	b.ReportMetric(float64(subscribes.Load()-subs0)/window, "subscribes/s")
	b.ReportMetric(float64(conns.Load()-conns0)/window, "conns/s")
	if code := p.stop(b); code != 0 {
		b.Fatalf("esm exit code %d\n%s", code, tail(p.stderr.String(), 30))
	}
}
