package status_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/status"
)

// TestFromALaptopWithTheLeaseTable: esm status --lease-table, run where one worker's page does
// not answer: the owners and the status addresses come from the table, the worker that answers
// adds its live view, the one that does not is listed with its error, and its blocked shard is
// shown from the mark it wrote on the lease, with since when, its attempts and its error.
func TestFromALaptopWithTheLeaseTable(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	at := time.Date(2026, 5, 4, 12, 30, 45, 0, time.UTC)
	ids := []string{"shardId-000000000000", "shardId-000000000001"}
	w1Addr := worker(t, "w1", at, func(o poller.Observer, d poller.DetailObserver) {
		for _, id := range ids {
			d.ShardLineage(id, nil)
		}
		o.ShardState(ids[0], poller.StateReading)
		o.IteratorAge(ids[0], 1500*time.Millisecond)
	})
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w2Addr := dead.Addr().String()
	dead.Close()

	db := fakedynamo.New()
	const table = "leases"
	if err := lease.EnsureTable(ctx, db, table, true); err != nil {
		t.Fatal(err)
	}
	w1, _ := lease.NewDynamo(db, table, "w1", lease.WithStatusAddr(w1Addr))
	w2, _ := lease.NewDynamo(db, table, "w2", lease.WithStatusAddr(w2Addr))
	for _, d := range []*lease.Dynamo{w1, w2} {
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		defer func() { cancel(); <-done }()
	}
	var f lease.Fleet
	testkit.WaitFor(t, "both workers in the roster", 10*time.Second, func() bool {
		f, err = lease.ReadFleet(ctx, db, table)
		return err == nil && len(f.Workers) == 2
	})
	for i, w := range f.Workers { // w1 reads shard 0, w2 shard 1 (as their claims would write)
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
			"leaseKey": &ddbtypes.AttributeValueMemberS{Value: ids[i]}, "leaseOwner": &ddbtypes.AttributeValueMemberS{Value: w.ID},
			"leaseOwnerEpoch": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(w.Epoch, 10)}, "leaseCounter": &ddbtypes.AttributeValueMemberN{Value: "1"}, "checkpoint": &ddbtypes.AttributeValueMemberS{Value: "4959033827149025660855969253836157109592157598913658889" + string(rune('0'+i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	marks := w2.BlockedMarks()
	go func() { _ = marks.Run(ctx) }()
	marks.BatchFailing(ids[1], poller.BatchFailure{First: "1", Last: "2", Cause: "function error: cannot parse the poison record",
		FailedAt: at.Add(20 * time.Second), Since: at, Attempts: 7})
	marks.ShardBlocked(ids[1], true)
	testkit.WaitFor(t, "w2's blocked mark", 10*time.Second, func() bool {
		f, err = lease.ReadFleet(ctx, db, table)
		return err == nil && len(f.Blocked) == 1
	})

	kin := fakeKinesis{shards: map[string][]types.Shard{streamA: {shard(ids[0]), shard(ids[1])}}}
	rep, err := status.New(kin, status.WithLeaseTable(db, table)).Mapping(ctx, streamA, "arn:aws:lambda:us-east-1:000000000000:function:f")
	if err != nil {
		t.Fatal(err)
	}
	out := strings.NewReplacer(w1Addr, "W1ADDR", w2Addr, "W2ADDR").Replace(render(t, rep))
	golden(t, "laptop-lease-table.txt", out)
}
