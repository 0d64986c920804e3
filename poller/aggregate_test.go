package poller

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/kpl"
	"github.com/kinesis-esm/esm/source"
)

// TestAggregatesAsLambdaTreatsThem: a KPL aggregate reaches the function as it is when the mapping
// polls, and de-aggregated when it reads through an enhanced fan-out consumer: each user record
// whose partition key is the aggregate's becomes an event record with the aggregate's sequence
// number, and the one whose key differs is left out (Lambda drops it).
func TestAggregatesAsLambdaTreatsThem(t *testing.T) {
	agg := kpl.Encode([]kpl.Record{{PartitionKey: "a", Data: []byte("1")}, {PartitionKey: "a", Data: []byte("2")},
		{PartitionKey: "b", Data: []byte("x")}, {PartitionKey: "a", Data: []byte("3")}})
	put := func(h *harness) (aggSeq string) {
		h.fake.Put("s", "p", []byte("p1"))
		_, aggSeq = h.fake.Put("s", "a", agg)
		h.fake.Put("s", "p", []byte("p2"))
		return aggSeq
	}
	t.Run("polling", func(t *testing.T) {
		h := newHarness(t, 1)
		put(h)
		h.start()
		testkit.WaitFor(t, "3 records", 5*time.Second, func() bool { return len(h.rec.deliveries()) >= 3 })
		got := h.rec.deliveries()
		if len(got) != 3 || got[0].data != "p1" || got[1].data != string(agg) || got[2].data != "p2" {
			t.Fatalf("deliveries %+v, want p1, the aggregate as it is, p2", got)
		}
	})
	t.Run("enhanced fan-out", func(t *testing.T) {
		h, _ := newEFOHarness(t, 1)
		h.cfg.BatchSize = 2 // the aggregate counts as one record: p1 and it make the first batch
		aggSeq := put(h)
		h.start()
		testkit.WaitFor(t, "5 records", 5*time.Second, func() bool { return len(h.rec.deliveries()) >= 5 })
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
		got := h.rec.deliveries()
		want := []string{"p1", "1", "2", "3", "p2"}
		if len(got) != len(want) {
			t.Fatalf("deliveries %+v, want %v", got, want)
		}
		for i, d := range got {
			if d.data != want[i] {
				t.Fatalf("delivery %d is %q, want %q: %+v", i, d.data, want[i], got)
			}
			if i >= 1 && i <= 3 && (d.seq != aggSeq || d.pk != "a" || d.invocation != got[0].invocation) {
				t.Fatalf("user record %d: %+v, want the aggregate's sequence number %s and key, in the first batch", i, d, aggSeq)
			}
		}
		if got[4].invocation == got[0].invocation {
			t.Fatalf("p2 in the first batch of 2 records: %+v", got)
		}
	})
}

// TestAggregatesInTheEventJSON: the JSON event (exec:, http and Lambda targets) holds the same
// user records, and sizeBatch measures it exactly.
func TestAggregatesInTheEventJSON(t *testing.T) {
	agg := kpl.Encode([]kpl.Record{{PartitionKey: "a", Data: []byte("1")}, {PartitionKey: "b", Data: []byte("x")}, {PartitionKey: "a", Data: []byte("2")}})
	now := time.UnixMilli(1796158428843)
	rec := func(pk, seq string, data []byte) source.Record {
		return source.Record{PartitionKey: pk, SequenceNumber: seq, Data: data, ArrivalTime: now}
	}
	recs := []source.Record{rec("p", "1", []byte("p1")), rec("a", "2", agg), rec("p", "3", []byte("p2"))}
	enc := kinesisEncoder("arn:aws:kinesis:us-east-1:000000000000:stream/s", "arn:aws:iam::000000000000:role/r", true)
	payload, n := enc.encodeBatch(nil, "shardId-000000000000", recs, 100, MaxPayloadBytes)
	_, size, sn := enc.sizeBatch(nil, "shardId-000000000000", recs, 100, MaxPayloadBytes)
	if n != 3 || sn != 3 || size != len(payload) {
		t.Fatalf("encodeBatch took %d records in %d bytes; sizeBatch %d in %d", n, len(payload), sn, size)
	}
	var e events.KinesisEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range e.Records {
		got = append(got, string(r.Kinesis.Data)+"@"+r.Kinesis.SequenceNumber)
	}
	if want := []string{"p1@1", "1@2", "2@2", "p2@3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("event records %v, want %v", got, want)
	}
	// The limit counts Kinesis records: the aggregate is taken whole.
	if _, n := enc.encodeBatch(nil, "shardId-000000000000", recs, 2, MaxPayloadBytes); n != 2 {
		t.Fatalf("a batch of at most 2 records took %d", n)
	}
}

// TestArrivalTimestampMilliseconds: the event carries Kinesis' arrival time as its exact
// millisecond value (float64(UnixNano)/1e9 printed this one as 1796158428.8430002).
func TestArrivalTimestampMilliseconds(t *testing.T) {
	at := time.Unix(1796158428, 843_000_000)
	pk, seq := "k", "1"
	enc := kinesisEncoder("arn:aws:kinesis:us-east-1:000000000000:stream/s", "arn:aws:iam::000000000000:role/r", false)
	payload, _ := enc.encodeBatch(nil, "shardId-000000000000", []source.Record{{PartitionKey: pk, SequenceNumber: seq, Data: []byte("x"), ArrivalTime: at}}, 1, MaxPayloadBytes)
	if want := `"approximateArrivalTimestamp":1796158428.843}`; !strings.Contains(string(payload), want) {
		t.Fatalf("event %s lacks %s", payload, want)
	}
}

// TestFiltersSeeUserRecords: with enhanced fan-out the FilterCriteria apply to each user record of
// an aggregate (the event holds those that match); an aggregate none of whose user records matches
// is filtered out whole, and the checkpoint moves past it.
func TestFiltersSeeUserRecords(t *testing.T) {
	h, _ := newEFOHarness(t, 1)
	h.cfg.FilterPatterns = []string{`{"data":{"keep":[true]}}`}
	h.fake.Put("s", "a", kpl.Encode([]kpl.Record{{PartitionKey: "a", Data: []byte(`{"keep":true,"n":1}`)},
		{PartitionKey: "a", Data: []byte(`{"keep":false,"n":2}`)}, {PartitionKey: "a", Data: []byte(`{"keep":true,"n":3}`)}}))
	_, last := h.fake.Put("s", "b", kpl.Encode([]kpl.Record{{PartitionKey: "b", Data: []byte(`{"keep":false}`)}}))
	h.start()
	testkit.WaitFor(t, "the checkpoint past both aggregates", 5*time.Second, func() bool {
		p, _ := h.store.Load(t.Context())
		return p["shardId-000000000000"].Checkpoint == last
	})
	got := h.rec.deliveries()
	if len(got) != 2 || got[0].data != `{"keep":true,"n":1}` || got[1].data != `{"keep":true,"n":3}` {
		t.Fatalf("deliveries %+v, want the two user records that match", got)
	}
}
