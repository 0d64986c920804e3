package lease

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/poller"
)

// TestFirstLoadReturnsTheTable: a worker that joins a running mapping gets every lease's
// progress from its first Load, not only the leases placed on it (none yet). An empty answer
// made the poller take the mapping for a new one: a LATEST start decided again, and children
// read before their parents (simulation seeds 4 and 36 with LEASES=1).
func TestFirstLoadReturnsTheTable(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	ids := shardIDs(2)
	for i, cp := range []string{"111", "222"} {
		_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
			attrKey: str(ids[i]), attrOwner: str("other"), attrCounter: num(3), attrCheckpoint: str(cp),
			attrSubSequence: num(0), attrOwnerSwitches: num(0), attrStart: str(poller.Latest),
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	log, _ := testLogger(t)
	d, err := NewDynamo(ddb, table, "joiner", WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[ids[0]].Checkpoint != "111" || got[ids[1]].Checkpoint != "222" {
		t.Fatalf("first Load of a joining worker = %+v, want both leases' checkpoints", got)
	}
}
