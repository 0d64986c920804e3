package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kinesis-esm/esm/example"
)

func TestVerifyDeliveries(t *testing.T) {
	// Each delivery is its own invocation, 10 ns long, invoked in list order, unless at says
	// otherwise.
	n := int64(0)
	d := func(shard, data string) example.Delivery {
		k, _, _ := strings.Cut(data, ":")
		n += 100
		return example.Delivery{ShardID: shard, PartitionKey: k, Data: data, InvokedAt: n, DoneAt: n + 10}
	}
	at := func(e example.Delivery, start, end int64) example.Delivery {
		e.InvokedAt, e.DoneAt = start, end
		return e
	}
	written := map[string]int{"a": 2, "b": 1}
	lineage := map[string][]string{"s1": {"s0"}}
	tests := []struct {
		name string
		got  []example.Delivery
		bad  string // "" when every check passes
	}{
		{"good", []example.Delivery{d("s0", "a:0"), d("s0", "b:0"), d("s1", "a:1")}, ""},
		{"duplicate is fine", []example.Delivery{d("s0", "a:0"), d("s0", "a:0"), d("s0", "b:0"), d("s1", "a:1")}, ""},
		{"lost", []example.Delivery{d("s0", "a:0"), d("s1", "a:1")}, "every record delivered"},
		{"reordered", []example.Delivery{d("s1", "a:1"), d("s0", "a:0"), d("s0", "b:0")}, "order per partition key"},
		{"child before parent", []example.Delivery{d("s0", "a:0"), d("s1", "a:1"), d("s0", "b:0")}, "parents drained before children"},
		// Written after the parent's line, but invoked while the parent's last invocation ran.
		{"child invoked during the parent's last invocation", []example.Delivery{at(d("s0", "a:0"), 0, 50), at(d("s0", "b:0"), 10, 100), at(d("s1", "a:1"), 60, 110)}, "parents drained before children"},
		{"no pair judged", []example.Delivery{d("s0", "a:0"), d("s0", "b:0"), d("s0", "a:1")}, "nothing was judged"},
		{"no times", []example.Delivery{{ShardID: "s0", PartitionKey: "a", Data: "a:0"}, {ShardID: "s0", PartitionKey: "b", Data: "b:0"}, {ShardID: "s1", PartitionKey: "a", Data: "a:1"}}, "no invocation times"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := Failed(Deliveries(tt.got, written, lineage))
			if (tt.bad == "") != (bad == "") || !strings.Contains(bad, tt.bad) {
				t.Fatalf("failed checks %q, want %q", bad, tt.bad)
			}
		})
	}
}

// TestReadDeliveriesSkipsALineStillBeingWritten: a reader polling the file while the function
// appends to it can see the first part of a line (one write per invocation is not atomic for a
// concurrent reader); that line is read once its newline is there, never reported as bad.
func TestReadDeliveriesSkipsALineStillBeingWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "deliveries.jsonl")
	if err := os.WriteFile(path, []byte(`{"shardId":"s0","data":"a:0"}`+"\n"+`{"shardId":"s0","da`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDeliveries(path)
	if err != nil || len(got) != 1 || got[0].Data != "a:0" {
		t.Fatalf("ReadDeliveries = %+v, %v; want the complete line only", got, err)
	}
	if err := os.WriteFile(path, []byte(`{"shardId":"s0","data":"a:0"}`+"\n"+`{"shardId":"s0","data":"a:1"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadDeliveries(path); err != nil || len(got) != 2 || got[1].Data != "a:1" {
		t.Fatalf("ReadDeliveries = %+v, %v; want both lines once the second is complete", got, err)
	}
	// A complete line that is not JSON is still an error.
	if err := os.WriteFile(path, []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDeliveries(path); err == nil {
		t.Fatal("ReadDeliveries of a bad complete line: no error")
	}
}
