package fakedynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// tableCreator is a *DB or the SDK's client of a served one.
type tableCreator interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// newStreamTable creates a table with hash key k (S) and a stream of view type view and returns
// the stream's ARN.
func newStreamTable(t testing.TB, db tableCreator, name string, view types.StreamViewType) string {
	t.Helper()
	out, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: types.ScalarAttributeTypeS}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: view},
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.TableDescription.LatestStreamArn == nil {
		t.Fatal("CreateTable with a stream: no LatestStreamArn")
	}
	return *out.TableDescription.LatestStreamArn
}

func put(t *testing.T, db *DB, table string, kv ...string) {
	t.Helper()
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item(kv...)}); err != nil {
		t.Fatal(err)
	}
}

func shardsOf(t *testing.T, db *DB, arn string) []streamtypes.Shard {
	t.Helper()
	var all []streamtypes.Shard
	var start *string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("DescribeStream paging does not end: %d shards after %d pages", len(all), pages)
		}
		out, err := db.DescribeStream(context.Background(), &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), Limit: aws.Int32(2), ExclusiveStartShardId: start})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, out.StreamDescription.Shards...)
		if start = out.StreamDescription.LastEvaluatedShardId; start == nil {
			return all
		}
	}
}

func iter(t *testing.T, db *DB, arn, shard string, typ streamtypes.ShardIteratorType, seq string) (*string, error) {
	t.Helper()
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(shard), ShardIteratorType: typ}
	if seq != "" {
		in.SequenceNumber = aws.String(seq)
	}
	out, err := db.GetShardIterator(context.Background(), in)
	if err != nil {
		return nil, err
	}
	return out.ShardIterator, nil
}

func keysOf(recs []streamtypes.Record) string {
	var ks []string
	for _, r := range recs {
		ks = append(ks, r.Dynamodb.Keys["k"].(*streamtypes.AttributeValueMemberS).Value)
	}
	return strings.Join(ks, ",")
}

// TestStreamRotationLineageAndEnd: shards close every rotation period and a child opens with
// the closed one as parent (one child after a long idle spell, not one per period); paging and
// CHILD_SHARDS find them; a closed shard ends with a null NextShardIterator after its last
// record, and LATEST on it ends at once.
func TestStreamRotationLineageAndEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := New(WithShardRotation(time.Minute))
		arn := newStreamTable(t, db, "tab", types.StreamViewTypeKeysOnly)
		put(t, db, "tab", "k", "a")
		time.Sleep(time.Minute)
		put(t, db, "tab", "k", "b")
		time.Sleep(30 * time.Second)
		put(t, db, "tab", "k", "c")
		time.Sleep(10 * time.Minute) // idle for ten periods: one more child
		put(t, db, "tab", "k", "d")
		shards := shardsOf(t, db, arn)
		if len(shards) != 3 {
			t.Fatalf("%d shards, want 3: %+v", len(shards), shards)
		}
		for i, sh := range shards {
			closed := sh.SequenceNumberRange.EndingSequenceNumber != nil
			if closed != (i < 2) || (i == 0) != (sh.ParentShardId == nil) || (i > 0 && *sh.ParentShardId != *shards[i-1].ShardId) {
				t.Fatalf("shard %d: %+v %+v", i, sh, sh.SequenceNumberRange)
			}
			kids, err := db.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn),
				ShardFilter: &streamtypes.ShardFilter{Type: streamtypes.ShardFilterTypeChildShards, ShardId: sh.ShardId}})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(kids.StreamDescription.Shards); n != map[bool]int{true: 1, false: 0}[i < 2] {
				t.Fatalf("shard %d has %d children", i, n)
			}
		}
		want := []string{"a", "b,c", "d"}
		for i, sh := range shards {
			it, err := iter(t, db, arn, *sh.ShardId, streamtypes.ShardIteratorTypeTrimHorizon, "")
			if err != nil {
				t.Fatal(err)
			}
			out, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
			if err != nil {
				t.Fatal(err)
			}
			if got := keysOf(out.Records); got != want[i] || (out.NextShardIterator == nil) != (i < 2) {
				t.Fatalf("shard %d: records %q (want %q), next %v", i, got, want[i], out.NextShardIterator)
			}
		}
		it, _ := iter(t, db, arn, *shards[0].ShardId, streamtypes.ShardIteratorTypeLatest, "")
		out, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil || len(out.Records) != 0 || out.NextShardIterator != nil {
			t.Fatalf("LATEST on a closed shard: %+v %v", out, err)
		}
	})
}

// TestStreamPositions: AT_ and AFTER_SEQUENCE_NUMBER start at and after a record, Limit cuts a
// read, and a sequence number of another shard is refused.
func TestStreamPositions(t *testing.T) {
	ctx := context.Background()
	db := New()
	arn := newStreamTable(t, db, "tab", types.StreamViewTypeKeysOnly)
	for _, k := range []string{"a", "b", "c", "d"} {
		put(t, db, "tab", "k", k)
	}
	sh := *shardsOf(t, db, arn)[0].ShardId
	it, _ := iter(t, db, arn, sh, streamtypes.ShardIteratorTypeTrimHorizon, "")
	out, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(2)})
	if err != nil || keysOf(out.Records) != "a,b" || out.NextShardIterator == nil {
		t.Fatalf("Limit 2: %q %v", keysOf(out.Records), err)
	}
	b := *out.Records[1].Dynamodb.SequenceNumber
	for typ, want := range map[streamtypes.ShardIteratorType]string{streamtypes.ShardIteratorTypeAtSequenceNumber: "b,c,d", streamtypes.ShardIteratorTypeAfterSequenceNumber: "c,d"} {
		it, err := iter(t, db, arn, sh, typ, b)
		if err != nil {
			t.Fatal(err)
		}
		out, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil || keysOf(out.Records) != want {
			t.Fatalf("%s: %q, want %q (%v)", typ, keysOf(out.Records), want, err)
		}
	}
	if _, err := iter(t, db, arn, sh, streamtypes.ShardIteratorTypeAtSequenceNumber, "100000000000000009999"); err == nil {
		t.Fatal("a sequence number beyond the shard was accepted")
	}
	if _, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(1001)}); err == nil {
		t.Fatal("Limit 1001 was accepted")
	}
}

// TestStreamTrimAndExpiry: records older than the retention are trimmed (TRIM_HORIZON moves,
// an iterator left behind is a TrimmedDataAccessException), and an iterator older than 15
// minutes is an ExpiredIteratorException.
func TestStreamTrimAndExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := New(WithShardRotation(0)) // one shard throughout
		arn := newStreamTable(t, db, "tab", types.StreamViewTypeKeysOnly)
		put(t, db, "tab", "k", "old")
		sh := *shardsOf(t, db, arn)[0].ShardId
		it, _ := iter(t, db, arn, sh, streamtypes.ShardIteratorTypeTrimHorizon, "")
		time.Sleep(DefaultIteratorTTL + time.Second)
		var exp *streamtypes.ExpiredIteratorException
		if _, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it}); !errors.As(err, &exp) {
			t.Fatalf("an iterator after 15 min: %v", err)
		}
		time.Sleep(DefaultStreamRetention - 20*time.Minute)
		put(t, db, "tab", "k", "new")
		it, _ = iter(t, db, arn, sh, streamtypes.ShardIteratorTypeTrimHorizon, "")
		time.Sleep(10 * time.Minute) // "old" is now past the retention
		var trim *streamtypes.TrimmedDataAccessException
		if _, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it}); !errors.As(err, &trim) {
			t.Fatalf("an iterator at a trimmed record: %v", err)
		}
		it, _ = iter(t, db, arn, sh, streamtypes.ShardIteratorTypeTrimHorizon, "")
		out, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil || keysOf(out.Records) != "new" {
			t.Fatalf("TRIM_HORIZON after the trim: %q %v", keysOf(out.Records), err)
		}
	})
}

// TestStreamDisableAndViews: disabling the stream closes its shard (still readable, then
// ended) and records stop; re-enabling makes a new stream with a new label; each view type
// carries the images it names.
func TestStreamDisableAndViews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := New()
		arn := newStreamTable(t, db, "tab", types.StreamViewTypeOldImage)
		put(t, db, "tab", "k", "a", "v", "1")
		put(t, db, "tab", "k", "a", "v", "2")
		if _, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("tab"), StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(false)}}); err != nil {
			t.Fatal(err)
		}
		put(t, db, "tab", "k", "a", "v", "3")
		shards := shardsOf(t, db, arn)
		if len(shards) != 1 || shards[0].SequenceNumberRange.EndingSequenceNumber == nil {
			t.Fatalf("after disabling: %+v", shards)
		}
		it, _ := iter(t, db, arn, *shards[0].ShardId, streamtypes.ShardIteratorTypeTrimHorizon, "")
		out, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil || len(out.Records) != 2 || out.NextShardIterator != nil {
			t.Fatalf("the disabled stream's shard: %+v %v", out, err)
		}
		if out.Records[0].Dynamodb.OldImage != nil || out.Records[0].Dynamodb.NewImage != nil || out.Records[1].Dynamodb.OldImage["v"].(*streamtypes.AttributeValueMemberS).Value != "1" {
			t.Fatalf("OLD_IMAGE records: %+v %+v", out.Records[0].Dynamodb, out.Records[1].Dynamodb)
		}
		time.Sleep(time.Second)
		up, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("tab"), StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}})
		if err != nil || aws.ToString(up.TableDescription.LatestStreamArn) == arn {
			t.Fatalf("re-enabled: %v %v", up, err)
		}
		list, err := db.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String("tab")})
		if err != nil || len(list.Streams) != 2 {
			t.Fatalf("ListStreams: %+v %v", list, err)
		}
	})
}

// TestStreamPagingWithSeveralShards: with three shards open at once and several rotations,
// DescribeStream paged two at a time lists every shard once, in creation order, each child
// after its parent; each key's changes are all in the shards of its lane, in order.
func TestStreamPagingWithSeveralShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := New(WithShardRotation(time.Minute), WithStreamShards(3))
		arn := newStreamTable(t, db, "tab", types.StreamViewTypeNewImage)
		for round := range 4 {
			for k := range 12 {
				put(t, db, "tab", "k", fmt.Sprint("key", k), "v", fmt.Sprint(round))
			}
			time.Sleep(time.Minute)
		}
		shards := shardsOf(t, db, arn)
		if len(shards) != 15 { // 3 roots and 3 children for each of 4 rotations
			t.Fatalf("%d shards, want 15", len(shards))
		}
		seen := map[string]int{}
		for i, sh := range shards {
			if _, dup := seen[*sh.ShardId]; dup {
				t.Fatalf("shard %s listed twice", *sh.ShardId)
			}
			seen[*sh.ShardId] = i
			if sh.ParentShardId != nil {
				if p, ok := seen[*sh.ParentShardId]; !ok || p >= i {
					t.Fatalf("shard %d listed before its parent", i)
				}
			}
		}
		last := map[string]int{} // key → last round seen
		for _, sh := range shards {
			it, err := iter(t, db, arn, *sh.ShardId, streamtypes.ShardIteratorTypeTrimHorizon, "")
			if err != nil {
				t.Fatal(err)
			}
			out, err := db.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: it})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range out.Records {
				k := r.Dynamodb.Keys["k"].(*streamtypes.AttributeValueMemberS).Value
				var round int
				fmt.Sscan(r.Dynamodb.NewImage["v"].(*streamtypes.AttributeValueMemberS).Value, &round)
				if prev, ok := last[k]; (ok && round != prev+1) || (!ok && round != 0) {
					t.Fatalf("%s: round %d after %d", k, round, prev)
				}
				last[k] = round
			}
		}
		if len(last) != 12 {
			t.Fatalf("%d keys seen, want 12", len(last))
		}
		for k, r := range last {
			if r != 3 {
				t.Fatalf("%s: last round %d, want 3", k, r)
			}
		}
	})
}

// TestRotateAndTrimOnDemand: RotateStream closes the open shard now and opens its child,
// TrimStream drops what the retention would; both refuse a table without a stream.
func TestRotateAndTrimOnDemand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := New(WithShardRotation(0))
		arn := newStreamTable(t, db, "tab", types.StreamViewTypeKeysOnly)
		put(t, db, "tab", "k", "a")
		first := *shardsOf(t, db, arn)[0].ShardId
		it, _ := iter(t, db, arn, first, streamtypes.ShardIteratorTypeTrimHorizon, "")
		if err := db.RotateStream("tab"); err != nil {
			t.Fatal(err)
		}
		put(t, db, "tab", "k", "b")
		shards := shardsOf(t, db, arn)
		if len(shards) != 2 || shards[0].SequenceNumberRange.EndingSequenceNumber == nil || aws.ToString(shards[1].ParentShardId) != first {
			t.Fatalf("after RotateStream: %+v", shards)
		}
		time.Sleep(time.Second)
		if err := db.TrimStream("tab", time.Now()); err != nil {
			t.Fatal(err)
		}
		shards = shardsOf(t, db, arn)
		if len(shards) != 1 || aws.ToString(shards[0].ParentShardId) != first {
			t.Fatalf("after TrimStream: %+v", shards)
		}
		var trim *streamtypes.TrimmedDataAccessException
		if _, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it}); !errors.As(err, &trim) {
			t.Fatalf("an iterator of the trimmed shard: %v", err)
		}
		var rnf *streamtypes.ResourceNotFoundException
		if _, err := iter(t, db, arn, first, streamtypes.ShardIteratorTypeTrimHorizon, ""); !errors.As(err, &rnf) {
			t.Fatalf("GetShardIterator of the trimmed shard: %v", err)
		}
		it, _ = iter(t, db, arn, *shards[0].ShardId, streamtypes.ShardIteratorTypeTrimHorizon, "")
		out, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil || len(out.Records) != 0 || out.NextShardIterator == nil {
			t.Fatalf("the child after the trim: %+v %v", out, err)
		}
		if db.RotateStream("nope") == nil || db.TrimStream("nope", time.Now()) == nil {
			t.Fatal("a table without a stream was rotated or trimmed")
		}
	})
}

// TestBatchWriteRefusesDuplicates: two requests of one BatchWriteItem on one item are a
// ValidationException, and nothing is written (no record either).
func TestBatchWriteRefusesDuplicates(t *testing.T) {
	ctx := context.Background()
	db := New()
	arn := newStreamTable(t, db, "tab", types.StreamViewTypeKeysOnly)
	_, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"tab": {
		{PutRequest: &types.PutRequest{Item: item("k", "a")}},
		{DeleteRequest: &types.DeleteRequest{Key: item("k", "a")}},
	}}})
	if err == nil || !strings.Contains(err.Error(), "duplicates") {
		t.Fatalf("duplicate keys: %v", err)
	}
	it, _ := iter(t, db, arn, *shardsOf(t, db, arn)[0].ShardId, streamtypes.ShardIteratorTypeTrimHorizon, "")
	out, err := db.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
	if err != nil || len(out.Records) != 0 || len(db.Items("tab")) != 0 {
		t.Fatalf("a refused batch wrote: %d records, %d items, %v", len(out.Records), len(db.Items("tab")), err)
	}
}
