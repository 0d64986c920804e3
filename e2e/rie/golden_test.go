package rie

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/handler/inproc"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/execenv"
)

// TestRIEEventMatchesInProcess: the same handler, given the same records, decodes the same event
// whether it runs as a bootstrap under aws-lambda-rie (over HTTP), as the same bootstrap in esm's
// own execution environments (exec:, the Runtime API esm hosts), or in this process (the
// in-process invoker through runner.Run, with its fast decoding, and through inproc.Run): the
// events it re-marshals are equal byte for byte.
func TestRIEEventMatchesInProcess(t *testing.T) {
	t.Parallel()
	stream := newStream(t, 2)
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	recs := []local.Record{
		{PartitionKey: "ascii", Data: []byte("plain text")},
		{PartitionKey: "ключ", Data: []byte("unicode: żółw, 日本語, emoji 🦀")},
		{PartitionKey: "🔑", Data: binary},
		{PartitionKey: "json", Data: []byte(`{"nested":{"a":[1,2,3]},"s":"<tag>&amp;"}`)},
		{PartitionKey: "quotes", Data: []byte("line\nbreak \"quoted\" \\ back\tslash")},
		{PartitionKey: "big", Data: bytes.Repeat([]byte("0123456789abcdef"), 4096)},
	}
	for i := range 6 {
		recs = append(recs, local.Record{PartitionKey: "n", Data: []byte{byte('a' + i)}})
	}
	if _, err := local.PutRecords(testContext(t, 10*time.Second), kin, stream, recs); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	rieDump, inProcDump := filepath.Join(dir, "rie.jsonl"), filepath.Join(dir, "inprocess.jsonl")
	execDump := filepath.Join(dir, "exec.jsonl")
	r := startRIE(t, 3*time.Second, "EXAMPLE_EVENT_DUMP="+rieDump)
	pool, err := execenv.New([]string{bootstrapBin}, execenv.WithEnvironment(map[string]string{"EXAMPLE_EVENT_DUMP": execDump}),
		execenv.WithOutput(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	viaExec := runMapping(t, stream, mappingConfig(100), pool, nil)
	// Both mappings read the whole stream; a batch holds every record of a shard.
	viaRIE := runMapping(t, stream, mappingConfig(100), httpInvoker(t, newWire(), 3*time.Second, r.Endpoint()), nil)
	inProc := runMapping(t, stream, mappingConfig(100), nil, example.Config{EventDump: inProcDump}.Handle)
	// And a handler embedded in a program: inproc.Run, configured by its typed options.
	startDump := filepath.Join(dir, "handler-start.jsonl")
	hctx, stopHandler := context.WithCancel(context.Background())
	handlerDone := make(chan error, 1)
	go func() {
		handlerDone <- inproc.Run(hctx, example.Config{EventDump: startDump}.Handle,
			inproc.WithStream(stream), inproc.WithEndpointURL(kinesisEndpoint), inproc.WithStateDir(filepath.Join(dir, "handler-state")),
			inproc.WithStartingPosition("TRIM_HORIZON"), inproc.WithBatchSize(100), inproc.WithPollInterval(100*time.Millisecond), inproc.WithStderr(io.Discard))
	}()
	for _, dump := range []string{rieDump, inProcDump, startDump, execDump} {
		testkit.WaitFor(t, "every record in "+filepath.Base(dump), 30*time.Second, func() bool { return recordCount(t, dump) >= len(recs) })
	}
	viaRIE.stop(t)
	viaExec.stop(t)
	inProc.stop(t)
	stopHandler()
	if err := <-handlerDone; err != nil {
		t.Fatalf("inproc.Run: %v", err)
	}
	if fromStart := sortedLines(t, startDump); !slices.EqualFunc(fromStart, sortedLines(t, rieDump), bytes.Equal) {
		t.Fatalf("events differ between aws-lambda-rie and inproc.Run:\n%s", bytes.Join(fromStart, []byte("\n")))
	}
	if fromExec := sortedLines(t, execDump); !slices.EqualFunc(fromExec, sortedLines(t, rieDump), bytes.Equal) {
		t.Fatalf("events differ between aws-lambda-rie and exec:\n%s", bytes.Join(fromExec, []byte("\n")))
	}

	got, want := sortedLines(t, rieDump), sortedLines(t, inProcDump)
	if recordCount(t, rieDump) != len(recs) || recordCount(t, inProcDump) != len(recs) {
		t.Fatalf("records: %d through aws-lambda-rie, %d in process; want %d each", recordCount(t, rieDump), recordCount(t, inProcDump), len(recs))
	}
	if !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("events differ:\nthrough aws-lambda-rie:\n%s\nin process:\n%s", bytes.Join(got, []byte("\n")), bytes.Join(want, []byte("\n")))
	}
	// And the data itself survived the trip.
	var seen [][]byte
	for _, line := range got {
		seen = append(seen, recordData(t, line)...)
	}
	for _, rec := range recs {
		if !slices.ContainsFunc(seen, func(d []byte) bool { return bytes.Equal(d, rec.Data) }) {
			t.Fatalf("record of key %q arrived altered or not at all", rec.PartitionKey)
		}
	}
}

// sortedLines returns a dump's events in a stable order (batches of different shards may arrive in
// any order).
func sortedLines(t *testing.T, path string) [][]byte {
	t.Helper()
	ls := lines(t, path)
	slices.SortFunc(ls, bytes.Compare)
	return ls
}

// recordCount counts the records in a dump of events.
func recordCount(t *testing.T, path string) int {
	t.Helper()
	n := 0
	for _, line := range lines(t, path) {
		n += len(recordData(t, line))
	}
	return n
}

func recordData(t *testing.T, line []byte) [][]byte {
	t.Helper()
	var e events.KinesisEvent
	if err := json.Unmarshal(line, &e); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, r := range e.Records {
		out = append(out, r.Kinesis.Data)
	}
	return out
}
