package fakekinesis

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

func TestUpdateShardCountScalesUniformly(t *testing.T) {
	f := New()
	f.CreateStream("s", 2)
	if got := f.UpdateShardCount("s", 4); len(got) != 4 {
		t.Fatalf("2 → 4 created %v, want 4 children of 2 splits", got)
	}
	if n := len(f.OpenShards("s")); n != 4 {
		t.Fatalf("%d open shards after scaling to 4", n)
	}
	if got := f.UpdateShardCount("s", 3); len(got) != 1 {
		t.Fatalf("4 → 3 created %v, want one merged child", got)
	}
	if n, c := len(f.OpenShards("s")), len(f.ClosedShards("s")); n != 3 || c != 4 {
		t.Fatalf("%d open and %d closed shards after 2 → 4 → 3", n, c)
	}
	// Every key still routes to exactly one open shard.
	for i := range 100 {
		f.Put("s", string(rune('a'+i%26))+string(rune('a'+i/26)), nil)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("scaling 3 → 7 did not panic")
		}
	}()
	f.UpdateShardCount("s", 7)
}

func TestListShardsPageSize(t *testing.T) {
	f := New(WithListShardsPageSize(2))
	arn := f.CreateStream("s", 5)
	out, err := f.ListShards(context.Background(), &kinesis.ListShardsInput{StreamARN: &arn})
	if err != nil || len(out.Shards) != 2 || out.NextToken == nil {
		t.Fatalf("first page: %d shards, token %v, err %v", len(out.Shards), out.NextToken, err)
	}
}
