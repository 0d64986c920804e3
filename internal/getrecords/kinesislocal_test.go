package getrecords

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/internal/local"
	"github.com/kinesis-esm/esm/internal/testenv"
)

// TestKinesisLocalOverHTTP2 reads a shard of kinesis-local over its HTTPS endpoint, where its
// TLS handshake picks HTTP/2 (a server that is not Go's): the wire's HTTP/2 streams get the same
// records as the SDK client's own call on the same iterator, and the idle polls after them are
// answered too. It needs kinesis-local ("make test" has one; go test without -short starts one).
func TestKinesisLocalOverHTTP2(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kinesis-local: make test runs it")
	}
	ctx := context.Background()
	endpoint, stop, err := testenv.KinesisTLSEndpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	kin := kinesis.NewFromConfig(cfg, func(o *kinesis.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.TLSClientConfig.InsecureSkipVerify = true // kinesis-local's certificate is self-signed
		})
	})
	name := fmt.Sprintf("getrecords-h2-%d", os.Getpid())
	if _, err := local.CreateStream(ctx, kin, name, 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = kin.DeleteStream(context.Background(), &kinesis.DeleteStreamInput{StreamName: aws.String(name)})
	})
	for i := range 3 {
		if _, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String("pk"), Data: fmt.Appendf(nil, "record %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	shards, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil || len(shards.Shards) != 1 {
		t.Fatalf("ListShards: %v", err)
	}
	it, err := kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: shards.Shards[0].ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}

	lean := New(kin)
	in := &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(100)}
	want, err := kin.GetRecords(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := lean.GetRecords(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Records) != 3 || !reflect.DeepEqual(got.Records, want.Records) {
		t.Fatalf("records over HTTP/2:\n%+v\nthe SDK's:\n%+v", got.Records, want.Records)
	}
	next := got.NextShardIterator
	for range 3 { // caught up: idle polls
		out, err := lean.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: next, Limit: aws.Int32(100)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Records) != 0 || out.NextShardIterator == nil {
			t.Fatalf("an idle poll got %d records, next iterator %v", len(out.Records), out.NextShardIterator)
		}
		next = out.NextShardIterator
	}
	w := lean.tmpl.wire
	t.Cleanup(w.close)
	w.mu.Lock()
	proto, conns := w.proto, len(w.h2conns)
	w.mu.Unlock()
	if proto != protoH2 || conns != 1 || w.sent.Load() != 4 {
		t.Errorf("the wire spoke %v on %d HTTP/2 connections and sent %d requests, want HTTP/2 on 1 and 4", proto, conns, w.sent.Load())
	}
	t.Logf("%d of 3 idle answers decoded by the wire itself", w.quick.Load())
}
