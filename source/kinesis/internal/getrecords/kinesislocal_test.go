package getrecords

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// kinesisLocalTLS is an SDK client of kinesis-local's HTTPS endpoint, where its TLS handshake
// picks HTTP/2.
func kinesisLocalTLS(t *testing.T, ctx context.Context) *kinesis.Client {
	t.Helper()
	endpoint, stop, err := testenv.KinesisTLSEndpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return kinesis.NewFromConfig(cfg, func(o *kinesis.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.TLSClientConfig.InsecureSkipVerify = true // kinesis-local's certificate is self-signed
		})
	})
}

// TestKinesisLocalOverHTTP2 reads a shard of kinesis-local over its HTTPS endpoint, where its
// TLS handshake picks HTTP/2 (a server that is not Go's): the wire's HTTP/2 streams get the same
// records as the SDK client's own call on the same iterator, and the idle polls after them are
// answered too. It needs kinesis-local ("make test" has one; go test without -short starts one).
func TestKinesisLocalOverHTTP2(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kinesis-local: make test runs it")
	}
	ctx := context.Background()
	kin := kinesisLocalTLS(t, ctx)
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

// TestKinesisLocalSubscriptionOverHTTP2 subscribes to a shard of kinesis-local over its HTTPS
// endpoint (HTTP/2, a server that is not Go's, a stream without an initial response) through
// Take: the lean path takes the stream and reads the records put before it, in order.
func TestKinesisLocalSubscriptionOverHTTP2(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kinesis-local: make test runs it")
	}
	ctx := bounded(t)
	kin := kinesisLocalTLS(t, ctx)
	name := fmt.Sprintf("getrecords-efo-%d", os.Getpid())
	arn, err := local.CreateStream(ctx, kin, name, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = kin.DeleteStream(context.Background(), &kinesis.DeleteStreamInput{StreamName: aws.String(name), EnforceConsumerDeletion: aws.Bool(true)})
	})
	var put []string
	for i := range 3 {
		data := fmt.Sprintf("record %d", i)
		if _, err := kin.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String("pk"), Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
		put = append(put, data)
	}
	reg, err := kin.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(arn), ConsumerName: aws.String("lean")})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the consumer active", 30*time.Second, func() bool {
		d, err := kin.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: reg.Consumer.ConsumerARN})
		return err == nil && d.ConsumerDescription.ConsumerStatus == types.ConsumerStatusActive
	})
	take := &Take{}
	out, err := kin.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{ConsumerARN: reg.Consumer.ConsumerARN,
		ShardId: aws.String("shardId-000000000000"), StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}}, take.Option)
	if err != nil {
		t.Fatal(err)
	}
	defer out.GetStream().Close()
	st := take.Stream()
	if st == nil {
		t.Fatal("the lean path did not take kinesis-local's HTTP/2 stream")
	}
	defer st.Close()
	var got []string
	for len(got) < len(put) {
		ev, err := st.Next()
		if err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		if e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent); ok {
			for _, r := range e.Value.Records {
				got = append(got, string(r.Data))
			}
		}
	}
	if !reflect.DeepEqual(got, put) {
		t.Fatalf("records %q, want %q", got, put)
	}
}
