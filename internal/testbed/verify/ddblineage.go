package verify

import (
	"fmt"
	"math/big"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/example"
)

// DDBShard is a DynamoDB stream shard as DescribeStream lists it: its id, its parent ("": none)
// and its sequence number range (End "": open).
type DDBShard struct {
	ID, Parent, Start, End string
}

// DDBLineage checks that no invocation of a child shard started before the last invocation of
// its parent had ended, judged on the deliveries' InvokedAt and DoneAt. A DynamoDB Streams event
// does not name its shard, so each record's shard is the one whose sequence number range holds
// its SequenceNumber. It fails when a record falls in no shard, when a delivery has no times, and,
// when shards has a parent→child pair, when no pair of them both had deliveries (nothing judged).
// It also returns how many parent→child pairs were judged.
func DDBLineage(got []example.DDBDelivery, shards []DDBShard) (Check, int) {
	c := Check{Name: "parents drained before children", OK: true}
	type span struct{ lo, hi *big.Int }
	ranges := make([]span, len(shards))
	for i, s := range shards {
		ranges[i].lo, _ = new(big.Int).SetString(s.Start, 10)
		ranges[i].hi, _ = new(big.Int).SetString(s.End, 10)
	}
	first, last := map[string]int64{}, map[string]int64{}
	for _, d := range got {
		seq, ok := new(big.Int).SetString(d.Record.Change.SequenceNumber, 10)
		shard := ""
		for i, r := range ranges {
			if ok && r.lo != nil && seq.Cmp(r.lo) >= 0 && (r.hi == nil || seq.Cmp(r.hi) <= 0) {
				shard = shards[i].ID
				break
			}
		}
		switch {
		case shard == "":
			return Check{Name: c.Name, Detail: fmt.Sprintf("record %q is in no shard's sequence number range", d.Record.Change.SequenceNumber)}, 0
		case d.InvokedAt == 0 || d.DoneAt == 0:
			return Check{Name: c.Name, Detail: fmt.Sprintf("the delivery of %q carries no invocation times", d.Record.Change.SequenceNumber)}, 0
		}
		if t, ok := first[shard]; !ok || d.InvokedAt < t {
			first[shard] = d.InvokedAt
		}
		last[shard] = max(last[shard], d.DoneAt)
	}
	pairs, edges := 0, 0
	for _, s := range shards {
		if s.Parent == "" {
			continue
		}
		edges++
		fc, okc := first[s.ID]
		lp, okp := last[s.Parent]
		if !okc || !okp {
			continue
		}
		pairs++
		if lp > fc && c.OK {
			c.OK, c.Detail = false, fmt.Sprintf("%s invoked at %s, before the last invocation of its parent %s ended at %s (%s later)",
				s.ID, time.Unix(0, fc).UTC().Format(time.StampMicro), s.Parent, time.Unix(0, lp).UTC().Format(time.StampMicro), time.Duration(lp-fc))
		}
	}
	switch {
	case c.OK && edges > 0 && pairs == 0:
		c.OK, c.Detail = false, "shards have parents but no parent and child both had deliveries: nothing was judged"
	case c.OK:
		c.Detail = fmt.Sprintf("%d parent→child pairs checked on invocation start and end times", pairs)
	}
	return c, pairs
}

// DDBEventRecords are the records of deliveries, in delivery order, for DDBRecords.
func DDBEventRecords(got []example.DDBDelivery) []events.DynamoDBEventRecord {
	out := make([]events.DynamoDBEventRecord, len(got))
	for i, d := range got {
		out[i] = d.Record
	}
	return out
}
