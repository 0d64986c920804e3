package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/poller"
)

// fakeClock is a monotonic clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

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

func rawItem(t *testing.T, table, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := ddb.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, Key: key(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func claim(t *testing.T, d *Dynamo, candidates []string) []string {
	t.Helper()
	held, err := d.Claim(context.Background(), candidates)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(held)
	return held
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

