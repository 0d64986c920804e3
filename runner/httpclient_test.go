package runner

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// TestClientsKeepAConnectionPerShard: 200 GetRecords calls at once (200 shards polled together)
// open 200 connections, and the next 200 reuse them all, as the next second's polls of idle
// shards do. With the SDK's default pool (10 idle connections per host) the second round opened
// at least 190 new ones.
func TestClientsKeepAConnectionPerShard(t *testing.T) {
	const shards = 200
	var (
		conns   atomic.Int64
		arrived sync.WaitGroup
		release atomic.Pointer[chan struct{}] // the round's: closed once all its calls are in flight
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-*release.Load() // hold every call until all are in flight, each on its own connection
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte(`{"Records":[],"NextShardIterator":"next","MillisBehindLatest":0}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_PROFILE", "")
	cfg, err := AWSConfig(context.Background(), "us-east-1", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	kin := kinesis.NewFromConfig(cfg) // AWSConfig set the endpoint
	round := func() int64 {
		before := conns.Load()
		ch := make(chan struct{})
		release.Store(&ch)
		arrived.Add(shards)
		var done sync.WaitGroup
		for range shards {
			done.Go(func() {
				if _, err := kin.GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: aws.String("it")}); err != nil {
					t.Error(err)
				}
			})
		}
		arrived.Wait()
		close(ch)
		done.Wait()
		return conns.Load() - before
	}
	if first := round(); first != shards {
		t.Fatalf("the first round opened %d connections; want %d (one per call in flight)", first, shards)
	}
	if second := round(); second != 0 {
		t.Fatalf("the second round opened %d new connections; want 0 (the %d idle ones reused)", second, shards)
	}
}
