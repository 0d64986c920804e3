package cli

import (
	"testing"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/metrics/live"
	"github.com/kinesis-esm/esm/metrics/prom"
)

// TestDeletedMappingLeavesThePage: a mapping deleted under esm serve leaves the live page (it
// stayed there until a restart); the other mapping stays.
func TestDeletedMappingLeavesThePage(t *testing.T) {
	o := &serveObservers{reg: prom.NewRegistry(), board: live.New(), pages: map[string]*live.Mapping{}}
	for _, id := range []string{"u1", "u2"} {
		o.observe(esmapi.EventSourceMapping{UUID: id, FunctionArn: "arn:aws:lambda:us-east-1:000000000000:function:fn",
			EventSourceArn: "arn:aws:kinesis:us-east-1:000000000000:stream/s-" + id})
	}
	if n := len(o.board.Snapshot().Mappings); n != 2 {
		t.Fatalf("%d mappings on the page, want 2", n)
	}
	o.deleted("u1")
	ms := o.board.Snapshot().Mappings
	if len(ms) != 1 || ms[0].UUID != "u2" {
		t.Fatalf("after u1's deletion the page shows %+v, want u2 alone", ms)
	}
	o.deleted("u1") // told again (another worker's deletion seen late): nothing more
	if len(o.board.Snapshot().Mappings) != 1 {
		t.Fatal("a second deletion notice removed another mapping")
	}
}
