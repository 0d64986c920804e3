package rie

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// TestThreeRIEInstancesServeSixShards: six shards read at once share a pool of three
// aws-lambda-rie instances. No instance ever gets a second invocation while one is in flight (a
// concurrent invoke would crash it), the instances do work side by side, none crashes, and every
// record arrives in order per key.
func TestThreeRIEInstancesServeSixShards(t *testing.T) {
	t.Parallel()
	const instances, shards, keys, perKey = 3, 6, 24, 5
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	var (
		rs        []*local.RIE
		endpoints []string
		tracePath []string
	)
	for i := range instances {
		tp := filepath.Join(dir, fmt.Sprintf("trace-%d.jsonl", i))
		r := startRIE(t, 3*time.Second, "EXAMPLE_OUTPUT="+out, "EXAMPLE_TRACE="+tp, "EXAMPLE_DELAY=30ms")
		rs, endpoints, tracePath = append(rs, r), append(endpoints, r.Endpoint()), append(tracePath, tp)
	}
	stream := newStream(t, shards)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("key-%d", i)
	}
	written := put(t, stream, names, perKey)

	w := newWire()
	m := runMapping(t, stream, mappingConfig(4), httpInvoker(t, w, 3*time.Second, endpoints...), nil)
	testkit.WaitFor(t, "every record", 60*time.Second, func() bool { return len(deliveries(t, out)) >= keys*perKey })
	m.stop(t)

	checkDelivered(t, out, written)
	for _, r := range rs {
		alive(t, r)
	}
	w.mu.Lock()
	peakPerHost, peak, perHost := w.peakPerHost, w.peak, w.requestsPerHost
	w.mu.Unlock()
	for host, p := range peakPerHost {
		if p != 1 {
			t.Errorf("%s had %d invocations in flight at once, want 1", host, p)
		}
	}
	if peak < 2 {
		t.Errorf("at most %d invocation in flight across the pool: the instances never worked side by side", peak)
	}
	if len(perHost) != instances {
		t.Errorf("requests per instance %v: want all %d used", perHost, instances)
	}

	// What the handlers saw: per instance, each invocation ended before the next began.
	var all []example.Trace
	for i, tp := range tracePath {
		tr := traces(t, tp)
		if len(tr) == 0 {
			t.Fatalf("instance %d ran nothing", i)
		}
		slices.SortFunc(tr, func(a, b example.Trace) int { return cmp.Compare(a.Start, b.Start) })
		for j := 1; j < len(tr); j++ {
			if tr[j].Start < tr[j-1].End {
				t.Fatalf("instance %d: invocation %s started %v before %s ended", i, tr[j].RequestID,
					time.Duration(tr[j-1].End-tr[j].Start), tr[j-1].RequestID)
			}
		}
		all = append(all, tr...)
	}
	if overlap := maxOverlap(all); overlap < 2 {
		t.Errorf("handlers ran at most %d at a time across instances, want several", overlap)
	}
	t.Logf("%d invocations over %d instances, %d records; most in flight at once: %d", len(all), instances, keys*perKey, peak)
}

// maxOverlap is the largest number of invocations running at one instant.
func maxOverlap(tr []example.Trace) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, x := range tr {
		edges = append(edges, edge{x.Start, +1}, edge{x.End, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	n, peak := 0, 0
	for _, e := range edges {
		n += e.delta
		peak = max(peak, n)
	}
	return peak
}
