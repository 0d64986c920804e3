package rie

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/execenv"
)

// TestExecParallelizationFactorFourEnvironments: one shard with ParallelizationFactor 4, run by
// the unmodified bootstrap under exec: (esm's own execution environments): the pool grows to 4
// environments, no more, and all 4 serve the shard at the same time; every invocation is framed
// by START, END and REPORT lines in esm's output.
func TestExecParallelizationFactorFourEnvironments(t *testing.T) {
	t.Parallel()
	stream := newStream(t, 1)
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%02d", i)
	}
	written := put(t, stream, keys, 2)
	total := 0
	for _, n := range written {
		total += n
	}

	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	var out testkit.SyncBuffer
	pool, err := execenv.New([]string{bootstrapBin}, execenv.WithMaxEnvironments(10), execenv.WithOutput(&out),
		execenv.WithEnvironment(map[string]string{"EXAMPLE_TRACE": trace, "EXAMPLE_DELAY": "400ms", "EXAMPLE_OUTPUT": "/dev/null"}))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cfg := mappingConfig(2)
	cfg.ParallelizationFactor = 4
	m := runMapping(t, stream, cfg, pool, nil)
	testkit.WaitFor(t, "every record handled", time.Minute, func() bool {
		n := 0
		for _, tr := range traces(t, trace) {
			n += tr.Records
		}
		return n >= total
	})
	m.stop(t)

	trs := traces(t, trace)
	pids := map[int]bool{}
	for _, tr := range trs {
		pids[tr.PID] = true
	}
	if len(pids) != 4 {
		t.Fatalf("%d processes served the shard, want 4 (shards x ParallelizationFactor, below the maximum of 10)", len(pids))
	}
	if peak := peakOverlap(trs); peak != 4 {
		t.Fatalf("at most %d invocations ran at once, want 4 environments serving the shard together", peak)
	}
	log := out.String()
	for _, tr := range trs {
		for _, want := range []string{"START RequestId: " + tr.RequestID + " Version: $LATEST", "END RequestId: " + tr.RequestID,
			"REPORT RequestId: " + tr.RequestID + "\tDuration: "} {
			if !strings.Contains(log, want) {
				t.Fatalf("no %q in esm's output:\n%s", want, log)
			}
		}
	}
}

// peakOverlap is the most invocations whose [Start, End] intervals overlap at one instant.
func peakOverlap(trs []example.Trace) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, tr := range trs {
		edges = append(edges, edge{tr.Start, 1}, edge{tr.End, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) // an end before a start at the same instant
	})
	cur, peak := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}
