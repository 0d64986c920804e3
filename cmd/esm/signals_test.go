package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// TestIteratorAgeAfterCatchingUp (issue 40) runs the binary on a backlog 3 s old: once every
// record was handled, the mapping's iterator age (esm_mapping_iterator_age_milliseconds) and each
// shard's IteratorAge are under a second within two poll intervals. They were set only when a
// batch was sent, so they kept the last batch's age, over 3 s, for as long as the stream stayed
// idle.
func TestIteratorAgeAfterCatchingUp(t *testing.T) {
	const records, pollInterval = 20, time.Second
	stream := newStream(t, 2)
	data := make([]string, records)
	for i := range data {
		data[i] = fmt.Sprint("r", i)
	}
	putRecords(t, stream, data...)
	time.Sleep(3 * time.Second) // the backlog's age when esm starts
	dir := t.TempDir()
	addr := freeAddr(t)
	proc := startESM(t, nil, "--template", writeTemplate(t, dir, stream, "BatchSize: 5"), "--state-dir", filepath.Join(dir, "state"),
		"--metrics-addr", addr, "--poll-interval", pollInterval.String())
	testkit.WaitFor(t, "/healthz", 30*time.Second, func() bool { return httpStatus(addr, "/healthz") == http.StatusOK })
	testkit.WaitFor(t, "every record handled", 60*time.Second, func() bool {
		m := scrape(t, addr)
		return m["InvokedEventCount"] == records && m["FailedInvokeEventCount"] == 0
	})
	handled := time.Now()
	var m map[string]float64
	testkit.WaitFor(t, "the iterator age under a second", 2*pollInterval, func() bool {
		m = scrape(t, addr)
		_, ok := m["esm_mapping_iterator_age_milliseconds"]
		return ok && m["esm_mapping_iterator_age_milliseconds"] < 1000 && m["IteratorAge"] < 2*1000 // the sum of 2 shards
	})
	t.Logf("under a second %s after every record was handled (mapping %v ms, shards' sum %v ms)",
		time.Since(handled).Round(time.Millisecond), m["esm_mapping_iterator_age_milliseconds"], m["IteratorAge"])
	if code := proc.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestBlockedWhileOneInvocationHangs (issue 40) runs the binary with a function that takes 30 s
// and --blocked-after 3s: the shard is reported blocked (esm_shard_blocked) within --blocked-after
// + 1 s of its record being read, while that one invocation still runs. It was reported only when
// the invocation ended.
func TestBlockedWhileOneInvocationHangs(t *testing.T) {
	const blockedAfter = 3 * time.Second
	stream := newStream(t, 1)
	putRecords(t, stream, "slow")
	dir := t.TempDir()
	addr := freeAddr(t)
	proc := startESM(t, []string{"EXAMPLE_DELAY=30s"}, "--template", writeTemplate(t, dir, stream), "--state-dir", filepath.Join(dir, "state"),
		"--metrics-addr", addr, "--timeout", "60s", "--blocked-after", blockedAfter.String(), "--shutdown-grace", "1s")
	testkit.WaitFor(t, "/healthz", 30*time.Second, func() bool { return httpStatus(addr, "/healthz") == http.StatusOK })
	testkit.WaitFor(t, "the record read", 30*time.Second, func() bool { return scrape(t, addr)["PolledEventCount"] == 1 })
	read := time.Now() // the invocation starts at once (scraped every 10 ms)
	var m map[string]float64
	testkit.WaitFor(t, "the shard reported blocked", blockedAfter+time.Second, func() bool {
		m = scrape(t, addr)
		return m["esm_shard_blocked"] == 1
	})
	if m["InvokedEventCount"] != 0 {
		t.Fatalf("the invocation ended before the shard was reported blocked: %v", m)
	}
	t.Logf("blocked reported %s after the record was read (--blocked-after %s)", time.Since(read).Round(time.Millisecond), blockedAfter)
	if code := proc.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
