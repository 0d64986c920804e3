package fakekinesis_test

import (
	"bytes"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
)

// BenchmarkSubscribe measures the fake's SubscribeToShard alone: one op is one 1 KiB record
// encoded into an event stream by the fake and decoded by the SDK.
func BenchmarkSubscribe(b *testing.B) {
	f := fakekinesis.New()
	f.CreateStream("s", 1)
	consumer := f.RegisterConsumer("s", "c")
	data := bytes.Repeat([]byte("x"), 1024)
	entries := make([]fakekinesis.Entry, 1000)
	for i := range entries {
		entries[i] = fakekinesis.Entry{PartitionKey: "k", Data: data}
	}
	for i := 0; i < b.N; i += len(entries) {
		f.PutMany("s", entries)
	}
	b.ResetTimer()
	es := subscribe(b, f, consumer, "shardId-000000000000", types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon})
	for n := 0; n < b.N; {
		n += len(next(b, es).Records)
	}
}
