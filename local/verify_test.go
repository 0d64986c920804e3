package local

import (
	"strings"
	"testing"

	"github.com/kinesis-esm/esm/example"
)

func TestVerifyDeliveries(t *testing.T) {
	d := func(shard, data string) example.Delivery {
		k, _, _ := strings.Cut(data, ":")
		return example.Delivery{ShardID: shard, PartitionKey: k, Data: data}
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := FailedChecks(VerifyDeliveries(tt.got, written, lineage))
			if (tt.bad == "") != (bad == "") || !strings.Contains(bad, tt.bad) {
				t.Fatalf("failed checks %q, want %q", bad, tt.bad)
			}
		})
	}
}
