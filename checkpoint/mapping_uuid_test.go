package checkpoint

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/poller"
)

func checkV4(t *testing.T, id string) {
	t.Helper()
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 {
		t.Fatalf("mapping UUID %q is not a random (version 4) UUID: %v", id, err)
	}
}

// TestFileMappingUUID: created once per mapping, kept with its progress across a reopen, one
// per mapping, and never taken for a shard by Load.
func TestFileMappingUUID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	ctx := context.Background()
	s, err := OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := s.Mapping(MappingKey("arn:s", "f1"))
	if err := a.Save(ctx, map[string]poller.ShardProgress{"shardId-0": {Checkpoint: "42"}}); err != nil {
		t.Fatal(err)
	}
	first, err := a.MappingUUID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkV4(t, first)
	other, err := s.Mapping(MappingKey("arn:s", "f2")).MappingUUID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if other == first {
		t.Fatal("two mappings share a UUID")
	}
	if got, _ := a.Load(ctx); len(got) != 1 || got["shardId-0"].Checkpoint != "42" {
		t.Fatalf("Load = %v, want the one shard only", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(dir, MappingKey("arn:s", "f1")); err != nil || len(got) != 1 {
		t.Fatalf("ReadFile = %v, %v; want the one shard only", got, err)
	}
	s, err = OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	again, err := s.Mapping(MappingKey("arn:s", "f1")).MappingUUID(ctx)
	if err != nil || again != first {
		t.Fatalf("after a reopen the UUID is %q (%v), want %q", again, err, first)
	}
}
