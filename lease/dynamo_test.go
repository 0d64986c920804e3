package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
)

// logBuffer collects a test's log lines and prints them if the test fails.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testLogger(t testing.TB) (*slog.Logger, *logBuffer) {
	t.Helper()
	buf := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func shardIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("shardId-%012d", i)
	}
	return out
}

func infos(ids []string) []poller.ShardInfo {
	out := make([]poller.ShardInfo, len(ids))
	for i, id := range ids {
		out[i] = poller.ShardInfo{ShardID: id, Initial: poller.ShardProgress{Start: poller.TrimHorizon}}
	}
	return out
}

func leasesOf(t testing.TB, table string) map[string]Lease {
	t.Helper()
	ls, err := ListLeases(context.Background(), ddb, table)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Lease{}
	for _, l := range ls {
		out[l.ShardID] = l
	}
	return out
}

func owners(ls map[string]Lease) map[string]int {
	out := map[string]int{}
	for _, l := range ls {
		if l.Owner != "" {
			out[l.Owner]++
		}
	}
	return out
}

func TestEnsureTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	missing := uniqueName("missing")
	err := EnsureTable(ctx, ddb, missing, false)
	if !errors.Is(err, ErrTableNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("check of a missing table: %v, want ErrTableNotFound naming it", err)
	}

	created := uniqueName("created")
	if err := EnsureTable(ctx, ddb, created, true); err != nil {
		t.Fatal(err)
	}
	dropTableAtEnd(t, created)
	out, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &created})
	if err != nil {
		t.Fatal(err)
	}
	if bm := out.Table.BillingModeSummary; bm == nil || bm.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing mode %+v, want PAY_PER_REQUEST", bm)
	}
	if err := EnsureTable(ctx, ddb, created, false); err != nil {
		t.Fatalf("check of the created table: %v", err)
	}
	if err := EnsureTable(ctx, ddb, created, true); err != nil {
		t.Fatalf("second create: %v", err)
	}

	for name, schema := range map[string]struct {
		keys  []types.KeySchemaElement
		attrs []types.AttributeDefinition
	}{
		"other-hash": {
			[]types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			[]types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		},
		"numeric": {
			[]types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
			[]types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeN}},
		},
		"sort-key": {
			[]types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
			[]types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}, {AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			table := uniqueName(name)
			if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: &table, KeySchema: schema.keys,
				AttributeDefinitions: schema.attrs, BillingMode: types.BillingModePayPerRequest}); err != nil {
				t.Fatal(err)
			}
			dropTableAtEnd(t, table)
			for _, create := range []bool{false, true} {
				err := EnsureTable(ctx, ddb, table, create)
				if !errors.Is(err, ErrTableSchema) || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), "leaseKey") {
					t.Fatalf("create=%v: %v, want ErrTableSchema naming the table and the key", create, err)
				}
			}
		})
	}
}

// drive runs a worker's heartbeat and its claim cycles (as the poller would, every
// ClaimInterval) until stop is called.
func drive(t *testing.T, d *Dynamo, candidates []string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = d.Run(ctx); done <- struct{}{} }()
	go func() {
		defer func() { done <- struct{}{} }()
		tk := time.NewTicker(d.ClaimInterval())
		defer tk.Stop()
		for {
			if _, err := d.Load(ctx); err == nil {
				_, _ = d.Claim(ctx, candidates)
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	return func() { cancel(); <-done; <-done }
}

// TestLegacyTableMigrates: a table written by the previous protocol (leases without an owner
// epoch, renewed by bumping leaseCounter) keeps working. A lease whose counter stands still
// for a lease duration is taken, with its checkpoint; one an old worker still renews is left
// alone until it stops.
func TestLegacyTableMigrates(t *testing.T) {
	table := newTable(t)
	ctx := context.Background()
	ids := shardIDs(2)
	legacy := func(id, owner string, counter int64, checkpoint string) {
		t.Helper()
		_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
			attrKey: str(id), attrOwner: str(owner), attrCounter: num(counter), attrCheckpoint: str(checkpoint),
			attrSubSequence: num(0), attrOwnerSwitches: num(0), attrStart: str(poller.TrimHorizon),
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	legacy(ids[0], "old-live", 5, "111")
	legacy(ids[1], "old-dead", 3, "222")
	log, _ := testLogger(t)
	d, err := NewDynamo(ddb, table, "new", WithLeaseDuration(2*time.Second), WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Register(ctx, infos(ids)); err != nil {
		t.Fatal(err)
	}
	// The old live worker keeps renewing.
	renewCtx, stopRenew := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for c := int64(6); renewCtx.Err() == nil; c++ {
			_, _ = ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key(ids[0]),
				UpdateExpression: aws.String("SET #c = :c"), ExpressionAttributeNames: map[string]string{"#c": attrCounter},
				ExpressionAttributeValues: map[string]types.AttributeValue{":c": num(c)}})
			select {
			case <-renewCtx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	stop := drive(t, d, ids)
	defer stop()
	testkit.WaitFor(t, "the dead old worker's lease taken", 15*time.Second, func() bool { return leasesOf(t, table)[ids[1]].Owner == "new" })
	l := leasesOf(t, table)[ids[1]]
	if l.Progress.Checkpoint != "222" || l.OwnerEpoch == 0 {
		t.Fatalf("migrated lease %+v: checkpoint lost or no epoch", l)
	}
	if o := leasesOf(t, table)[ids[0]].Owner; o != "old-live" {
		t.Fatalf("a lease an old worker renews was taken by %s", o)
	}
	stopRenew()
	<-renewed
	testkit.WaitFor(t, "the old worker's lease taken once it stopped renewing", 15*time.Second, func() bool { return leasesOf(t, table)[ids[0]].Owner == "new" })
	if l := leasesOf(t, table)[ids[0]]; l.Progress.Checkpoint != "111" {
		t.Fatalf("migrated lease %+v lost its checkpoint", l)
	}
}

// TestPreCreatedTableWithHashKeyOnly: a table created beforehand with the hash key leaseKey
// alone and no index (as Terraform or CloudFormation provision KCL's) works without any change
// to it: two workers share its shards.
func TestPreCreatedTableWithHashKeyOnly(t *testing.T) {
	ctx := context.Background()
	table := uniqueName("precreated")
	if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: &table, BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}},
	}); err != nil {
		t.Fatal(err)
	}
	dropTableAtEnd(t, table)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := EnsureTable(wctx, ddb, table, false); err != nil {
		t.Fatal(err)
	}
	ids := shardIDs(6)
	log, _ := testLogger(t)
	var stops []func()
	for _, id := range []string{"a", "b"} {
		d, err := NewDynamo(ddb, table, id, WithLeaseDuration(3*time.Second), WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Register(ctx, infos(ids)); err != nil {
			t.Fatal(err)
		}
		stops = append(stops, drive(t, d, ids))
	}
	testkit.WaitFor(t, "3 + 3 of 6 shards", 20*time.Second, func() bool { o := owners(leasesOf(t, table)); return o["a"] == 3 && o["b"] == 3 })
	out, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Table.GlobalSecondaryIndexes) != 0 || len(out.Table.KeySchema) != 1 {
		t.Fatalf("the table was changed: %+v", out.Table)
	}
	for _, s := range stops {
		s()
	}
	for _, l := range leasesOf(t, table) {
		if l.Owner != "" {
			t.Fatalf("after both stopped: %+v", l)
		}
	}
}
