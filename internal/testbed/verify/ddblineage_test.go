package verify

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/example"
)

func ddbDelivery(seq string, invoked, done int64) example.DDBDelivery {
	return example.DDBDelivery{Record: events.DynamoDBEventRecord{Change: events.DynamoDBStreamRecord{SequenceNumber: seq}}, InvokedAt: invoked, DoneAt: done}
}

// TestDDBLineage: records are placed in shards by their sequence numbers (ranges compared as
// numbers, not strings); a child invoked after its parent's last invocation ended passes, one
// invoked before fails, as do a record in no shard, a delivery without times, and shards with a
// parent but no parent→child pair with deliveries.
func TestDDBLineage(t *testing.T) {
	shards := []DDBShard{
		{ID: "a", Start: "900", End: "999"},
		{ID: "b", Parent: "a", Start: "1000", End: "1999"},
		{ID: "c", Parent: "b", Start: "2000"},
	}
	good := []example.DDBDelivery{ddbDelivery("950", 10, 20), ddbDelivery("999", 30, 40), ddbDelivery("1500", 41, 50), ddbDelivery("2500", 50, 60)}
	if c, pairs := DDBLineage(good, shards); !c.OK || pairs != 2 {
		t.Fatalf("good run: %+v, %d pairs", c, pairs)
	}
	for name, got := range map[string][]example.DDBDelivery{
		"child before its parent's last invocation ended": {ddbDelivery("950", 10, 20), ddbDelivery("999", 30, 40), ddbDelivery("1500", 35, 50)},
		"record in no shard":          {ddbDelivery("950", 10, 20), ddbDelivery("899", 30, 40), ddbDelivery("1500", 41, 50)},
		"delivery without times":      {ddbDelivery("950", 10, 20), ddbDelivery("1500", 0, 0)},
		"no parent→child pair judged": {ddbDelivery("950", 10, 20), ddbDelivery("2500", 50, 60)},
	} {
		if c, _ := DDBLineage(got, shards); c.OK {
			t.Errorf("%s passed: %s", name, c.Detail)
		}
	}
}
