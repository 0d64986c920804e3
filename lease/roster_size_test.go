package lease

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
)

// TestBusyRosterOfAHundredFitsThreeWriteUnits: the roster of 100 workers (the ids of make
// sim-scale, 10,000 shards known), every one publishing the horizon of a busy worker at
// `Timeout: 60` out of process, is written in 3 write units a heartbeat: 90 WU/s for the fleet
// at L = 10 s, under the 100 target. With 19-digit epochs and horizons in tenths of a second it
// took 4 (120 WU/s); with 12-digit ones, too.
func TestBusyRosterOfAHundredFitsThreeWriteUnits(t *testing.T) {
	db := fakedynamo.New()
	if err := EnsureTable(context.Background(), db, "leases", true); err != nil {
		t.Fatal(err)
	}
	ms := map[string]types.AttributeValue{}
	rnd := rand.New(rand.NewPCG(1, 2))
	d, err := NewDynamo(db, "leases", "w000", WithLeaseDuration(10*time.Second), WithFunctionTimeout(70*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	d.fl.gated, d.fl.started = true, time.Now()
	r := d.horizonLocked(time.Now())
	for i := range 100 {
		ms[fmt.Sprintf("w%03d", i)] = entryValue(member{epoch: newEpoch(rnd, "w000", nil, nil), beat: 30000 + int64(i), known: 10000, horizon: r})
	}
	item := map[string]types.AttributeValue{attrKey: str(rosterKey), attrMembers: &types.AttributeValueMemberM{Value: ms},
		attrGone: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}}
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("leases"), Item: item}); err != nil {
		t.Fatal(err)
	}
	st := db.TableStats("leases")
	t.Logf("horizon %s: the roster of 100 busy workers is %d bytes, %.0f write units", r, st.Bytes, st.WriteUnits)
	if st.WriteUnits > 3 {
		t.Fatalf("a heartbeat of 100 busy workers costs %.0f write units (%d bytes), want 3", st.WriteUnits, st.Bytes)
	}
}
