package emf

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of the EMF tests")

// emfScenario observes one interval of a mapping: polls, a filtered record, a failed and a
// successful invocation, a throttle, a destination that failed once and then took the record.
func emfScenario(e *Observer) {
	e.RecordsPolled("shardId-000000000000", 9)
	e.RecordsPolled("shardId-000000000001", 0)
	e.RecordsFilteredOut("shardId-000000000000", 1)
	e.IteratorAge("shardId-000000000000", 250*time.Millisecond)
	e.BatchInvoked("shardId-000000000000", 8, 20*time.Millisecond, true)
	e.FunctionError("shardId-000000000000")
	e.Throttled("shardId-000000000000")
	e.IteratorAge("shardId-000000000000", 1500*time.Millisecond)
	e.BatchInvoked("shardId-000000000000", 8, 12500*time.Microsecond, false)
	e.DestinationDeliveryFailed("shardId-000000000000")
	e.RecordsDelivered("shardId-000000000000", 8)
}

// TestEMFGolden pins the EMF lines byte for byte with MetricsConfig EventCount on and off: the
// function metrics under FunctionName always, the six event counts under EventSourceMappingUUID
// (the mapping's UUID) only when the mapping's MetricsConfig asks for them, as Lambda publishes
// them. Run with -update to rewrite testdata/ after a deliberate change.
func TestEMFGolden(t *testing.T) {
	for _, tt := range []struct {
		file string
		on   bool
	}{{"emf-eventcount-on.jsonl", true}, {"emf-eventcount-off.jsonl", false}} {
		t.Run(tt.file, func(t *testing.T) {
			var out testkit.SyncBuffer
			e := newTestEMF(&out, time.Minute, WithEventCounts(tt.on))
			emfScenario(e)
			if err := e.Flush(); err != nil {
				t.Fatal(err)
			}
			got := out.String()
			parseEMF(t, got) // a valid EMF document, whatever the golden says
			path := filepath.Join("testdata", tt.file)
			if *updateGolden {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("EMF lines differ from %s\n got: %s\nwant: %s", path, got, want)
			}
		})
	}
}

// TestEMFWithoutEventCountsWritesNothingForPollsAlone: with MetricsConfig off, an interval of
// polls and filtering only has nothing Lambda would publish.
func TestEMFWithoutEventCountsWritesNothingForPollsAlone(t *testing.T) {
	var out testkit.SyncBuffer
	e := newTestEMF(&out, time.Minute)
	e.RecordsPolled("s", 5)
	e.RecordsFilteredOut("s", 5)
	if err := e.Flush(); err != nil || out.String() != "" {
		t.Fatalf("flush wrote %q (err %v), want nothing", out.String(), err)
	}
}

// TestEMFMappingUUIDSetLater: the CLI learns the UUID from the store after it built the EMF.
func TestEMFMappingUUIDSetLater(t *testing.T) {
	var out testkit.SyncBuffer
	e := New(&out, "ESM", "fn", "orders", WithInterval(time.Minute), WithEventCounts(true))
	e.now = func() time.Time { return emfTestTime }
	e.SetMappingUUID(testMappingUUID)
	e.RecordsPolled("s", 1)
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	docs := parseEMF(t, out.String())
	if len(docs) != 1 || string(docs[0].root["EventSourceMappingUUID"]) != `"`+testMappingUUID+`"` ||
		docs[0].AWS.CloudWatchMetrics[1].Dimensions[0][0] != "EventSourceMappingUUID" {
		t.Fatalf("document %s does not carry the UUID set later", out.String())
	}
}
