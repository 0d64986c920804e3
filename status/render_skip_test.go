package status

import (
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/metrics/live"
)

// TestShardLineShowsLastSkip: a shard's line says which batch an operator skipped last, where it
// went and when.
func TestShardLineShowsLastSkip(t *testing.T) {
	at := time.Date(2026, 5, 4, 12, 31, 50, 0, time.UTC)
	s := Shard{ShardID: "shardId-000000000001", State: "reading", LastSkip: &live.SkipView{First: "7", Last: "9", Records: 3, At: &at}}
	if got, want := s.line(""), "(last skip at 12:31:50: batch 7..9, 3 records dropped)"; !strings.Contains(got, want) {
		t.Fatalf("line %q lacks %q", got, want)
	}
	s.LastSkip.Destination = "arn:aws:sqs:us-east-1:000000000000:q"
	if got, want := s.line(""), "3 records sent to arn:aws:sqs:us-east-1:000000000000:q)"; !strings.Contains(got, want) {
		t.Fatalf("line %q lacks %q", got, want)
	}
	s.SkipPending = "10..12"
	if got, want := s.line(""), "(skip of batch 10..12 under way)"; !strings.Contains(got, want) {
		t.Fatalf("line %q lacks %q", got, want)
	}
}
