package emf

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// emfDoc is an EMF document as CloudWatch reads it.
type emfDoc struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
	root map[string]json.RawMessage
}

// parseEMF parses every line of out and checks each is a valid EMF document: a JSON object with
// the _aws envelope whose dimensions and metrics are root members of the right types.
func parseEMF(t *testing.T, out string) []emfDoc {
	t.Helper()
	var docs []emfDoc
	sc := bufio.NewScanner(bytes.NewBufferString(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var d emfDoc
		if err := json.Unmarshal(line, &d); err != nil {
			t.Fatalf("line is not JSON: %v\n%s", err, line)
		}
		if err := json.Unmarshal(line, &d.root); err != nil {
			t.Fatal(err)
		}
		if d.AWS.Timestamp <= 0 || len(d.AWS.CloudWatchMetrics) == 0 || len(d.AWS.CloudWatchMetrics) > 2 {
			t.Fatalf("bad _aws envelope: %s", line)
		}
		for _, dir := range d.AWS.CloudWatchMetrics {
			if dir.Namespace == "" || len(dir.Dimensions) == 0 || len(dir.Metrics) == 0 || len(dir.Metrics) > 100 {
				t.Fatalf("bad metric directive: %s", line)
			}
			for _, set := range dir.Dimensions {
				for _, dim := range set {
					var s string
					if err := json.Unmarshal(d.root[dim], &s); err != nil || s == "" {
						t.Fatalf("dimension %s is not a non-empty string root member: %s", dim, line)
					}
				}
			}
			for _, m := range dir.Metrics {
				if !isNumber(d.root[m.Name]) && !isNumbers(d.root[m.Name]) {
					t.Fatalf("metric %s is not a number or a list of at most 100 numbers: %s", m.Name, line)
				}
			}
		}
		docs = append(docs, d)
	}
	return docs
}

func isNumber(raw json.RawMessage) bool {
	var f float64
	return raw != nil && json.Unmarshal(raw, &f) == nil
}

func isNumbers(raw json.RawMessage) bool {
	var fs []float64
	return raw != nil && json.Unmarshal(raw, &fs) == nil && len(fs) > 0 && len(fs) <= 100
}

func (d emfDoc) count(t *testing.T, name string) int64 {
	t.Helper()
	var n int64
	if err := json.Unmarshal(d.root[name], &n); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

func (d emfDoc) values(t *testing.T, name string) []float64 {
	t.Helper()
	raw, ok := d.root[name]
	if !ok {
		return nil
	}
	var fs []float64
	if err := json.Unmarshal(raw, &fs); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return fs
}

func (d emfDoc) unit(name string) string {
	for _, dir := range d.AWS.CloudWatchMetrics {
		for _, m := range dir.Metrics {
			if m.Name == name {
				return m.Unit
			}
		}
	}
	return ""
}

var emfTestTime = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const testMappingUUID = "8f3b6c2e-41d7-4a9e-b5c0-2e7d9a1f6b34"

func newTestEMF(w *testkit.SyncBuffer, interval time.Duration, opts ...Option) *Observer {
	e := New(w, "ESM", "fn", "orders", append([]Option{WithInterval(interval), WithMappingUUID(testMappingUUID)}, opts...)...)
	e.now = func() time.Time { return emfTestTime }
	return e
}

func TestEMFDocument(t *testing.T) {
	var out testkit.SyncBuffer
	e := newTestEMF(&out, time.Minute, WithEventCounts(true))
	e.RecordsPolled("s0", 10)
	e.RecordsPolled("s1", 5)
	e.RecordsFilteredOut("s0", 2)
	e.BatchInvoked("s0", 8, 20*time.Millisecond, true)
	e.BatchInvoked("s0", 8, 30*time.Millisecond, false)
	e.BatchInvoked("s1", 5, 1500*time.Microsecond, true)
	e.RecordsDelivered("s1", 3)
	e.RecordsDropped("s1", 2)
	e.IteratorAge("s0", 250*time.Millisecond)
	e.IteratorAge("s1", time.Second)
	e.ShardState("s0", "reading") // not a Lambda metric: not written
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}

	docs := parseEMF(t, out.String())
	if len(docs) != 1 {
		t.Fatalf("%d documents, want 1:\n%s", len(docs), out.String())
	}
	d := docs[0]
	fn, esm := d.AWS.CloudWatchMetrics[0], d.AWS.CloudWatchMetrics[1]
	if d.AWS.Timestamp != emfTestTime.UnixMilli() || fn.Namespace != "ESM" || esm.Namespace != "ESM" ||
		!slices.EqualFunc(fn.Dimensions, [][]string{{"FunctionName"}}, slices.Equal) ||
		!slices.EqualFunc(esm.Dimensions, [][]string{{"EventSourceMappingUUID"}}, slices.Equal) {
		t.Errorf("envelope: timestamp %d directives %+v", d.AWS.Timestamp, d.AWS.CloudWatchMetrics)
	}
	if string(d.root["FunctionName"]) != `"fn"` || string(d.root["EventSourceMappingUUID"]) != `"`+testMappingUUID+`"` ||
		string(d.root["StreamName"]) != `"orders"` {
		t.Errorf("dimension values %s %s %s", d.root["FunctionName"], d.root["EventSourceMappingUUID"], d.root["StreamName"])
	}
	for name, want := range map[string]int64{
		"PolledEventCount": 15, "FilteredOutEventCount": 2, "InvokedEventCount": 21, "FailedInvokeEventCount": 13,
		"DroppedEventCount": 2, "OnFailureDestinationDeliveredEventCount": 3, "Invocations": 3,
		"Errors": 0, "Throttles": 0, "DestinationDeliveryFailures": 0,
	} {
		if got := d.count(t, name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
		if u := d.unit(name); u != "Count" {
			t.Errorf("%s unit %q, want Count", name, u)
		}
	}
	if got := d.values(t, "IteratorAge"); !slices.Equal(got, []float64{250, 1000}) || d.unit("IteratorAge") != "Milliseconds" {
		t.Errorf("IteratorAge = %v (%s), want [250 1000] Milliseconds", got, d.unit("IteratorAge"))
	}
	if got := d.values(t, "Duration"); !slices.Equal(got, []float64{20, 30, 1.5}) || d.unit("Duration") != "Milliseconds" {
		t.Errorf("Duration = %v (%s), want [20 30 1.5] Milliseconds", got, d.unit("Duration"))
	}

	// The interval is over: the next flush starts from zero; idle, it writes only the mapping's
	// IteratorAge as it still is (the largest of the shards read here), and nothing once no
	// shard is read here.
	written := len(out.String())
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if docs := parseEMF(t, out.String()[written:]); len(docs) != 1 || !slices.Equal(docs[0].values(t, "IteratorAge"), []float64{1000}) ||
		docs[0].count(t, "Invocations") != 0 || docs[0].count(t, "PolledEventCount") != 0 {
		t.Errorf("idle flush wrote %q, want the mapping's IteratorAge [1000] and zero counts", out.String()[written:])
	}
	e.ShardState("s0", "finished")
	e.ShardState("s1", "released")
	written = len(out.String())
	if err := e.Flush(); err != nil || out.String()[written:] != "" {
		t.Errorf("idle flush with no shard read wrote %q (err %v), want nothing", out.String()[written:], err)
	}
}

// TestEMFIteratorAgeAfterCatchingUp (issue 40): the interval in which a mapping caught up has its
// ages down to 0; each later idle interval writes the mapping's age, 0, where Lambda writes none
// (an alarm on it would see no data rather than the recovery).
func TestEMFIteratorAgeAfterCatchingUp(t *testing.T) {
	var out testkit.SyncBuffer
	e := newTestEMF(&out, time.Minute)
	e.ShardState("s0", "reading")
	e.IteratorAge("s0", 30*time.Second)
	e.IteratorAge("s0", 0)
	for _, want := range [][]float64{{30000, 0}, {0}, {0}} {
		written := len(out.String())
		if err := e.Flush(); err != nil {
			t.Fatal(err)
		}
		if docs := parseEMF(t, out.String()[written:]); len(docs) != 1 || !slices.Equal(docs[0].values(t, "IteratorAge"), want) {
			t.Fatalf("flush wrote %q, want IteratorAge %v", out.String()[written:], want)
		}
	}
}

func TestEMFEmptyPollsWriteZeroCounts(t *testing.T) {
	var out testkit.SyncBuffer
	e := newTestEMF(&out, time.Minute, WithEventCounts(true))
	e.RecordsPolled("s0", 0)
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	docs := parseEMF(t, out.String())
	if len(docs) != 1 {
		t.Fatalf("%d documents, want 1", len(docs))
	}
	if n := docs[0].count(t, "PolledEventCount"); n != 0 {
		t.Errorf("PolledEventCount = %d, want 0", n)
	}
	if _, ok := docs[0].root["IteratorAge"]; ok || docs[0].unit("IteratorAge") != "" {
		t.Error("IteratorAge written for an idle interval; Lambda emits none")
	}
}

func TestEMFManyValuesSpreadOverLines(t *testing.T) {
	var out testkit.SyncBuffer
	e := newTestEMF(&out, time.Minute, WithEventCounts(true))
	for i := range 250 {
		e.IteratorAge("s0", time.Duration(i)*time.Millisecond)
	}
	for i := range 120 {
		e.BatchInvoked("s0", 1, time.Duration(i)*time.Millisecond, false)
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	docs := parseEMF(t, out.String()) // checks ≤ 100 values per metric per line
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3", len(docs))
	}
	var ages, durations []float64
	for i, d := range docs {
		ages = append(ages, d.values(t, "IteratorAge")...)
		durations = append(durations, d.values(t, "Duration")...)
		if _, ok := d.root["InvokedEventCount"]; ok != (i == 0) {
			t.Errorf("document %d has counts: %v, want them in the first only", i, ok)
		}
	}
	if len(ages) != 250 || len(durations) != 120 {
		t.Errorf("%d ages and %d durations written, want 250 and 120", len(ages), len(durations))
	}
	if docs[0].count(t, "Invocations") != 120 {
		t.Errorf("Invocations = %d, want 120", docs[0].count(t, "Invocations"))
	}
}

func TestEMFSamplerBounded(t *testing.T) {
	var s sampler
	const n = 50 * emfMaxSamples
	for i := range n {
		s.add(float64((i * 7919) % n)) // every value in [0, n) once, in a scrambled order
	}
	vs := s.values()
	if len(vs) != emfMaxSamples {
		t.Fatalf("kept %d values, want %d", len(vs), emfMaxSamples)
	}
	if slices.Min(vs) != 0 || slices.Max(vs) != n-1 {
		t.Errorf("min %v max %v kept, want 0 and %d", slices.Min(vs), slices.Max(vs), n-1)
	}
}

func TestEMFRunFlushesEveryIntervalAndOnStop(t *testing.T) {
	var out testkit.SyncBuffer
	e := newTestEMF(&out, 20*time.Millisecond, WithEventCounts(true))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()

	e.RecordsPolled("s0", 7)
	deadline := time.Now().Add(5 * time.Second)
	for len(parseEMF(t, out.String())) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no line written within 5 s of an interval of 20 ms")
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.RecordsPolled("s0", 3) // a partial interval: written when Run stops
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	var polled int64
	for _, d := range parseEMF(t, out.String()) {
		polled += d.count(t, "PolledEventCount")
	}
	if polled != 10 {
		t.Errorf("PolledEventCount over all lines = %d, want 10", polled)
	}
}

type failingWriter struct{}

var errDiskFull = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestEMFWriteError(t *testing.T) {
	e := New(failingWriter{}, "ESM", "fn", "orders", WithInterval(time.Hour), WithEventCounts(true))
	e.RecordsPolled("s0", 1)
	err := e.Flush()
	var we *WriteError
	if !errors.As(err, &we) || !errors.Is(err, errDiskFull) {
		t.Fatalf("Flush = %v, want an *WriteError wrapping the writer's error", err)
	}

	e.RecordsPolled("s0", 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Run(ctx); !errors.Is(err, errDiskFull) {
		t.Errorf("Run = %v, want the write error", err)
	}
}

func TestEMFDefaultInterval(t *testing.T) {
	if e := New(&testkit.SyncBuffer{}, "ESM", "fn", "orders", WithInterval(0)); e.interval != DefaultInterval {
		t.Errorf("interval %v, want %v", e.interval, DefaultInterval)
	}
}
