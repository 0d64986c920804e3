package runner

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/lambdaapi"
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

// The SDK clients' transports bound connects, TLS handshakes and silent connections, and the
// DynamoDB clients' wait for headers; the Lambda Invoke client waits for headers longer than the
// invocation bound and has no rolling read timeout (it would end long invocations).
func TestClientTimeouts(t *testing.T) {
	shared := httpClient()
	if tr := shared.GetTransport(); tr.TLSHandshakeTimeout != TLSHandshakeTimeout || tr.ResponseHeaderTimeout != 0 {
		t.Errorf("shared transport: TLS handshake %v, response headers %v", tr.TLSHandshakeTimeout, tr.ResponseHeaderTimeout)
	}
	if d := shared.GetDialer(); d.Timeout != ConnectTimeout {
		t.Errorf("shared dialer: connect timeout %v", d.Timeout)
	}
	if d, ok := shared.GetReadTimeout(); !ok || d != ReadTimeout {
		t.Errorf("shared read timeout %v %v", d, ok)
	}
	calls, ok := callClient(shared)
	if tr := calls.GetTransport(); !ok || tr.ResponseHeaderTimeout != CallHeaderTimeout {
		t.Errorf("DynamoDB transport: response headers %v", tr.ResponseHeaderTimeout)
	}
	inv := InvokeHTTPClient(900 * time.Second)
	if tr := inv.GetTransport(); tr.ResponseHeaderTimeout != 910*time.Second+InvokeHeaderMargin || tr.DialContext == nil || tr.DialTLSContext == nil {
		t.Errorf("invoke transport: response headers %v", tr.ResponseHeaderTimeout)
	}
	if d, ok := inv.GetReadTimeout(); ok && d > 0 {
		t.Errorf("invoke client: read timeout %v", d)
	}
}

// A DynamoDB call to a connection that never answers fails after CallHeaderTimeout instead of
// hanging (the audit's defect 3, at the transport level). Fails without callClient.
func TestHungDynamoDBCallTimesOut(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-stop }))
	defer srv.Close()
	defer close(stop)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_PROFILE", "")
	cfg, err := AWSConfig(context.Background(), "us-east-1", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*CallHeaderTimeout)
	defer cancel()
	started := time.Now()
	_, err = r.DynamoDB().GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"),
		Key: map[string]ddbtypes.AttributeValue{"k": &ddbtypes.AttributeValueMemberS{Value: "v"}}}, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	if err == nil || ctx.Err() != nil || time.Since(started) > 2*CallHeaderTimeout {
		t.Fatalf("err %v after %v: want the call to fail after about %v", err, time.Since(started), CallHeaderTimeout)
	}
}

// The Lambda Invoke client asks the invocation's start check again once a new connection is
// ready: a lease lost during a slow connect or handshake sends nothing (suspicion S1). Fails
// without invoke.CheckedDial.
func TestInvokeClientAsksTheStartCheckOnANewConnection(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	client := awslambda.New(awslambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), HTTPClient: InvokeHTTPClient(3 * time.Second),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), RetryMaxAttempts: 1})
	asked := 0
	ctx := invoke.WithStartCheck(context.Background(), func() bool { asked++; return asked == 1 }) // lost after the first ask
	_, err := lambdaapi.New(client, "f").Invoke(ctx, []byte(`{}`))
	if !errors.Is(err, invoke.ErrNotStarted) || requests.Load() != 0 || asked != 2 {
		t.Fatalf("err %v, %d requests, the check asked %d times: want it asked again on the new connection, and nothing sent", err, requests.Load(), asked)
	}
	if _, err := lambdaapi.New(client, "f").Invoke(context.Background(), []byte(`{}`)); err != nil || requests.Load() != 1 {
		t.Fatalf("err %v, %d requests", err, requests.Load())
	}
}
