package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseRefuses: a host that is not loopback, and out-of-range settings, are refused.
func TestParseRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"-host", "0.0.0.0"}, {"-host", "10.1.2.3"}, {"-host", "localhost"}, {"-port", "70000"},
		{"-rotate", "-1s"}, {"-retention", "0s"}, {"-iterator-ttl", "0s"}, {"-shards", "0"}, {"-shards", "101"},
		{"-shard-reads", "-1"}, {"extra"},
	} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if _, err := parse([]string{"-host", "::1", "-port", "0", "-rotate", "0"}, io.Discard); err != nil {
		t.Errorf("a loopback IPv6 host: %v", err)
	}
}

// TestRunServesAndStops: with -port 0 it writes the address it listens on to -addr-file,
// answers DynamoDB's JSON protocol there, and returns when its context ends.
func TestRunServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addrFile := filepath.Join(t.TempDir(), "addr")
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-port", "0", "-addr-file", addrFile}, io.Discard) }()
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no address written within 10 s")
		}
		b, _ := os.ReadFile(addrFile)
		addr = strings.TrimSpace(string(b))
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("listening on %q", addr)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("{}"))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != `{"TableNames":[]}` {
		t.Fatalf("ListTables: %d %s", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return within 10 s of its context's end")
	}
}
