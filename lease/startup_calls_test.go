package lease

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// unansweredWrites is a DynamoAPI whose first n UpdateItem calls get no answer (a dropped
// response, a partition): they wait until their context ends.
type unansweredWrites struct {
	DynamoAPI
	n atomic.Int64
}

func (u *unansweredWrites) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if u.n.Add(-1) >= 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return u.DynamoAPI.UpdateItem(ctx, in, o...)
}

// TestStartupCallsOutliveUnansweredAttempts: the start-up calls of a worker on a lease table
// (ClaimTable, MappingUUID) are idempotent writes tried again when an attempt got no answer in
// its time. They were tried once, 1 s, and a worker whose start met one dropped answer exited
// with status 1 (make chaos seed 4: "mapping UUID in lease table …: DynamoDB call got no answer
// in time after 1s").
func TestStartupCallsOutliveUnansweredAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := hzTable(t)
		api := &unansweredWrites{DynamoAPI: db}
		api.n.Store(2)
		if err := ClaimTable(ctx, api, "leases", "arn:aws:kinesis:us-east-1:000000000000:stream/s"); err != nil {
			t.Fatalf("ClaimTable after two unanswered attempts: %v", err)
		}
		api.n.Store(2)
		id, err := MappingUUID(ctx, api, "leases")
		if err != nil || id == "" {
			t.Fatalf("MappingUUID after two unanswered attempts: %q, %v", id, err)
		}
		again, err := MappingUUID(ctx, db, "leases")
		if err != nil || again != id {
			t.Fatalf("MappingUUID again: %q, %v; want %q", again, err, id)
		}
	})
}
