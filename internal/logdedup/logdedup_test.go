package logdedup

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRepeatedWarningsAreRateLimited(t *testing.T) {
	var buf bytes.Buffer
	h := New(slog.NewTextHandler(&buf, nil), time.Minute)
	now := time.Unix(0, 0)
	h.now = func() time.Time { return now }
	log := slog.New(h).With("stream", "s")
	for range 5 {
		log.Warn("get records failed", "shard_id", "shardId-1", "err", errors.New("boom"))
		now = now.Add(time.Second)
	}
	log.Warn("get records failed", "shard_id", "shardId-2", "err", errors.New("boom")) // another shard: its own line
	log.Info("shard started", "shard_id", "shardId-1")
	log.Info("shard started", "shard_id", "shardId-1") // info is never limited
	now = now.Add(time.Minute)
	log.Warn("get records failed", "shard_id", "shardId-1", "err", errors.New("boom"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[4], `repeated="4 times in the last 1m0s"`) {
		t.Fatalf("last line does not report the suppressed repeats: %s", lines[4])
	}
}
