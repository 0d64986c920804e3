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

// TestRosterOfAHundredFitsItsWriteUnits: the roster of 100 workers (the ids of make sim-scale),
// each publishing a digest of the shards it knows (32 bits), is written in 3 write units a
// heartbeat when they are idle (90 WU/s for the fleet at L = 10 s, under the 100 target) and in
// 4 when every one publishes the horizon of a busy worker at `Timeout: 60` out of process. The
// 3 a busy roster took before needed every worker to know a round number of shards (10,000:
// one significant digit); 10,001 took 4, as the digest does.
func TestRosterOfAHundredFitsItsWriteUnits(t *testing.T) {
	for _, c := range []struct {
		name string
		busy bool
		want float64
	}{{"idle", false, 3}, {"busy", true, 4}} {
		t.Run(c.name, func(t *testing.T) {
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
			var r time.Duration
			if c.busy {
				d.fl.gated, d.fl.started = true, time.Now()
				r = d.horizonLocked(time.Now())
			}
			for i := range 100 {
				// Digests of 10 digits, the most a 32-bit one has.
				known := int64(1<<32 - 1 - rnd.IntN(1<<30))
				ms[fmt.Sprintf("w%03d", i)] = entryValue(member{epoch: newEpoch(rnd, "w000", nil, nil), beat: 30000 + int64(i), known: known, horizon: r})
			}
			item := map[string]types.AttributeValue{attrKey: str(rosterKey), attrMembers: &types.AttributeValueMemberM{Value: ms},
				attrGone: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}}
			if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("leases"), Item: item}); err != nil {
				t.Fatal(err)
			}
			st := db.TableStats("leases")
			t.Logf("horizon %s: the roster of 100 workers is %d bytes, %.0f write units", r, st.Bytes, st.WriteUnits)
			if st.WriteUnits > c.want {
				t.Fatalf("a heartbeat of 100 %s workers costs %.0f write units (%d bytes), want %.0f", c.name, st.WriteUnits, st.Bytes, c.want)
			}
		})
	}
}
