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
	"github.com/aws/smithy-go"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func newTable(t *testing.T, db *DB, name string) {
	t.Helper()
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: types.ScalarAttributeTypeS}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func isCCF(err error) (*types.ConditionalCheckFailedException, bool) {
	var ccf *types.ConditionalCheckFailedException
	return ccf, errors.As(err, &ccf)
}

func TestConditionalWritesAndReturnValues(t *testing.T) {
	ctx := context.Background()
	db := New()
	newTable(t, db, "tab1")
	put := func(cond string, item map[string]types.AttributeValue) error {
		in := &dynamodb.PutItemInput{TableName: aws.String("tab1"), Item: item}
		if cond != "" {
			in.ConditionExpression = aws.String(cond)
			in.ExpressionAttributeNames = map[string]string{"#k": "k"}
		}
		_, err := db.PutItem(ctx, in)
		return err
	}
	item := map[string]types.AttributeValue{"k": s("a"), "c": n("0"), "o": s("w1")}
	if err := put("attribute_not_exists(#k)", item); err != nil {
		t.Fatal(err)
	}
	if _, ok := isCCF(put("attribute_not_exists(#k)", item)); !ok {
		t.Fatal("second create did not fail its condition")
	}
	upd := func(expr, cond string, vals map[string]types.AttributeValue, rv types.ReturnValue) (*dynamodb.UpdateItemOutput, error) {
		in := &dynamodb.UpdateItemInput{
			TableName: aws.String("tab1"), Key: map[string]types.AttributeValue{"k": s("a")},
			UpdateExpression: aws.String(expr), ExpressionAttributeValues: vals, ReturnValues: rv,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
		if cond != "" {
			in.ConditionExpression = aws.String(cond)
		}
		return db.UpdateItem(ctx, in)
	}
	out, err := upd("SET c = c + :one, sw = if_not_exists(sw, :zero) + :one REMOVE p ADD ch :set",
		"o = :me AND c = :cur", map[string]types.AttributeValue{
			":one": n("1"), ":zero": n("0"), ":me": s("w1"), ":cur": n("0"),
			":set": &types.AttributeValueMemberSS{Value: []string{"x", "y"}},
		}, types.ReturnValueAllNew)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Attributes["c"].(*types.AttributeValueMemberN).Value; got != "1" {
		t.Fatalf("c = %s, want 1", got)
	}
	if got := out.Attributes["sw"].(*types.AttributeValueMemberN).Value; got != "1" {
		t.Fatalf("sw = %s, want 1", got)
	}
	if got := out.Attributes["ch"].(*types.AttributeValueMemberSS).Value; len(got) != 2 {
		t.Fatalf("ch = %v", got)
	}
	// A stale counter fails, and the failure carries the item.
	_, err = upd("SET c = :next", "c = :cur", map[string]types.AttributeValue{":next": n("9"), ":cur": n("0")}, "")
	ccf, ok := isCCF(err)
	if !ok {
		t.Fatalf("stale update: %v", err)
	}
	if got := ccf.Item["c"].(*types.AttributeValueMemberN).Value; got != "1" {
		t.Fatalf("ALL_OLD on failure: c = %s", got)
	}
	// UPDATED_OLD returns only what the update touched.
	out, err = upd("DELETE ch :x", "contains(ch, :v) AND size(ch) = :two", map[string]types.AttributeValue{
		":x": &types.AttributeValueMemberSS{Value: []string{"x"}}, ":v": s("x"), ":two": n("2"),
	}, types.ReturnValueUpdatedOld)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Attributes) != 1 || out.Attributes["ch"] == nil {
		t.Fatalf("UPDATED_OLD = %v", out.Attributes)
	}
	// <> is false for a missing attribute; NOT flips it.
	if _, err := upd("SET z = :v", "nope <> :v", map[string]types.AttributeValue{":v": s("qtab")}, ""); err == nil {
		t.Fatal("<> on a missing attribute passed")
	}
	if _, err := upd("SET z = :v", "NOT (nope = :v) AND (o IN (:v, :me) OR c BETWEEN :lo AND :hi)", map[string]types.AttributeValue{
		":v": s("qtab"), ":me": s("w1"), ":lo": n("0"), ":hi": n("5"),
	}, ""); err != nil {
		t.Fatal(err)
	}
	// Unused values, reserved words and key updates are rejected.
	var api smithy.APIError
	if _, err := upd("SET z = :v", "", map[string]types.AttributeValue{":v": s("qtab"), ":w": s("r")}, ""); !errors.As(err, &api) || api.ErrorCode() != "ValidationException" {
		t.Fatalf("unused value: %v", err)
	}
	if _, err := upd("SET owner = :v", "", map[string]types.AttributeValue{":v": s("qtab")}, ""); !errors.As(err, &api) {
		t.Fatalf("reserved word: %v", err)
	}
	if _, err := upd("SET k = :v", "", map[string]types.AttributeValue{":v": s("qtab")}, ""); !errors.As(err, &api) {
		t.Fatalf("key update: %v", err)
	}
	// Nested maps.
	if _, err := upd("SET m = :m", "", map[string]types.AttributeValue{":m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"w1": n("1")}}}, ""); err != nil {
		t.Fatal(err)
	}
	out, err = upd("SET m.w2 = :v, m.w1 = m.w1 + :v", "attribute_not_exists(m.w2) AND m.w1 = :v", map[string]types.AttributeValue{":v": n("1")}, types.ReturnValueAllNew)
	if err != nil {
		t.Fatal(err)
	}
	m := out.Attributes["m"].(*types.AttributeValueMemberM).Value
	if m["w1"].(*types.AttributeValueMemberN).Value != "2" || m["w2"] == nil {
		t.Fatalf("m = %v", m)
	}
	// Delete, conditional.
	_, err = db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("tab1"), Key: map[string]types.AttributeValue{"k": s("a")},
		ConditionExpression: aws.String("o = :x"), ExpressionAttributeValues: map[string]types.AttributeValue{":x": s("w2")}})
	if _, ok := isCCF(err); !ok {
		t.Fatalf("conditional delete: %v", err)
	}
	del, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("tab1"), Key: map[string]types.AttributeValue{"k": s("a")}, ReturnValues: types.ReturnValueAllOld})
	if err != nil || del.Attributes["o"] == nil {
		t.Fatalf("delete: %v %v", del, err)
	}
	if st := db.TableStats("tab1"); st.Items != 0 || st.ConditionFailures != 4 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestCapacityAccounting(t *testing.T) {
	ctx := context.Background()
	db := New()
	newTable(t, db, "cap")
	pad := func(size int) map[string]types.AttributeValue {
		// "k"+"a" = 2 bytes, "p" = 1 byte: the value makes up the rest.
		return map[string]types.AttributeValue{"k": s("a"), "p": s(strings.Repeat("x", size-3))}
	}
	wu := func(item map[string]types.AttributeValue) float64 {
		out, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cap"), Item: item, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			t.Fatal(err)
		}
		return *out.ConsumedCapacity.CapacityUnits
	}
	if got := ItemSize(pad(1024)); got != 1024 {
		t.Fatalf("ItemSize = %d", got)
	}
	if got := wu(pad(1024)); got != 1 {
		t.Fatalf("1 KB put = %v WU", got)
	}
	if got := wu(pad(1025)); got != 2 {
		t.Fatalf("1 KB + 1 put = %v WU", got)
	}
	// Shrinking is billed on the larger (old) item.
	if got := wu(pad(10)); got != 2 {
		t.Fatalf("shrinking put = %v WU", got)
	}
	ru := func(consistent bool) float64 {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("cap"), Key: map[string]types.AttributeValue{"k": s("a")},
			ConsistentRead: aws.Bool(consistent), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			t.Fatal(err)
		}
		return *out.ConsumedCapacity.CapacityUnits
	}
	wu(pad(4096))
	if got := ru(true); got != 1 {
		t.Fatalf("4 KB consistent read = %v RU", got)
	}
	if got := ru(false); got != 0.5 {
		t.Fatalf("4 KB eventual read = %v RU", got)
	}
	wu(pad(4097))
	if got := ru(true); got != 2 {
		t.Fatalf("4 KB + 1 consistent read = %v RU", got)
	}
	// A failed conditional write is charged.
	before := db.TableStats("cap").WriteUnits
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cap"), Item: pad(100), ConditionExpression: aws.String("attribute_not_exists(k)")})
	if _, ok := isCCF(err); !ok {
		t.Fatal(err)
	}
	if got := db.TableStats("cap").WriteUnits - before; got != 5 { // the existing 4097-byte item
		t.Fatalf("failed conditional put charged %v WU, want 5", got)
	}
	// Numbers: about one byte per two digits, plus one.
	if got := ItemSize(map[string]types.AttributeValue{"n": n("12345")}); got != 1+4 {
		t.Fatalf("number size = %d", got)
	}
}

func TestScanPaging(t *testing.T) {
	ctx := context.Background()
	db := New()
	newTable(t, db, "pages")
	const items = 300
	big := strings.Repeat("x", 10_000) // 300 × ~10 KB ≈ 3 MB: at least three 1 MB pages
	for i := range items {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("pages"),
			Item: map[string]types.AttributeValue{"k": s(fmt.Sprintf("item-%03d", i)), "p": s(big)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	scanAll := func(limit int32) (pages int, seen map[string]int, units float64) {
		seen = map[string]int{}
		in := &dynamodb.ScanInput{TableName: aws.String("pages"), ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}
		if limit > 0 {
			in.Limit = aws.Int32(limit)
		}
		for {
			out, err := db.Scan(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			units += *out.ConsumedCapacity.CapacityUnits
			for _, it := range out.Items {
				seen[it["k"].(*types.AttributeValueMemberS).Value]++
			}
			if limit > 0 && out.ScannedCount > limit {
				t.Fatalf("page of %d items with Limit %d", out.ScannedCount, limit)
			}
			if len(out.LastEvaluatedKey) == 0 {
				return pages, seen, units
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	pages, seen, units := scanAll(0)
	if pages < 3 || pages > 4 {
		t.Fatalf("%d pages for ~3 MB", pages)
	}
	if len(seen) != items {
		t.Fatalf("saw %d of %d items", len(seen), items)
	}
	size := ItemSize(map[string]types.AttributeValue{"k": s("item-000"), "p": s(big)})
	if want := float64(items*size) / 4096; units < want || units > want+float64(pages) {
		t.Fatalf("scan cost %v RU, want about %v", units, want)
	}
	pages, seen, _ = scanAll(7)
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("%s seen %d times", k, c)
		}
	}
	if len(seen) != items || pages < items/7 {
		t.Fatalf("Limit 7: %d items in %d pages", len(seen), pages)
	}
}

func TestQuery(t *testing.T) {
	ctx := context.Background()
	db := New()
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("qtab"), BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("h"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("r"), KeyType: types.KeyTypeRange}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("h"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("r"), AttributeType: types.ScalarAttributeTypeN}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"a", "b"} {
		for r := range 10 {
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("qtab"),
				Item: map[string]types.AttributeValue{"h": s(h), "r": n(fmt.Sprint(r)), "v": n(fmt.Sprint(r % 2))}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	in := &dynamodb.QueryInput{TableName: aws.String("qtab"), KeyConditionExpression: aws.String("h = :h AND r BETWEEN :lo AND :hi"),
		FilterExpression: aws.String("v = :one"), ScanIndexForward: aws.Bool(false), Limit: aws.Int32(3),
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": s("a"), ":lo": n("2"), ":hi": n("8"), ":one": n("1")}}
	var got []string
	for {
		out, err := db.Query(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			got = append(got, it["r"].(*types.AttributeValueMemberN).Value)
		}
		if out.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if strings.Join(got, ",") != "7,5,3" {
		t.Fatalf("query = %v, want 7,5,3", got)
	}
}

func TestThrottlingOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := New(WithTableCapacity(100, 10), WithPartitionCapacity(1000, 1000), WithPartitions(1))
		newTable(t, db, "thr")
		write := func(i int) error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("thr"), Item: map[string]types.AttributeValue{"k": s(fmt.Sprint(i))}})
			return err
		}
		// 10 WU/s with a one-second burst: ten writes pass, the eleventh is throttled.
		for i := range 10 {
			if err := write(i); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
		var pte *types.ProvisionedThroughputExceededException
		if err := write(10); !errors.As(err, &pte) {
			t.Fatalf("write over capacity: %v", err)
		}
		time.Sleep(500 * time.Millisecond) // virtual: five units refill
		ok := 0
		for i := range 20 {
			if write(100+i) == nil {
				ok++
			}
		}
		if ok != 5 {
			t.Fatalf("%d writes passed after half a second, want 5", ok)
		}
		// A throttle burst refuses everything until it ends.
		time.Sleep(10 * time.Second)
		db.ThrottleUntil("thr", time.Now().Add(2*time.Second))
		if err := write(200); !errors.As(err, &pte) {
			t.Fatalf("write in a throttle burst: %v", err)
		}
		time.Sleep(2 * time.Second)
		if err := write(201); err != nil {
			t.Fatal(err)
		}
		if st := db.TableStats("thr"); st.Throttled != 17 {
			t.Fatalf("throttled %d calls, want 17", st.Throttled)
		}
	})
}

func TestPartitionThrottling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := New(WithPartitionCapacity(3000, 5), WithPartitions(8))
		newTable(t, db, "hot")
		hot := 0
		for range 20 {
			if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("hot"), Key: map[string]types.AttributeValue{"k": s("same")},
				UpdateExpression: aws.String("ADD c :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": n("1")}}); err != nil {
				hot++
			}
		}
		if hot != 15 {
			t.Fatalf("%d of 20 writes to one key throttled, want 15", hot)
		}
		// Other partitions still take writes.
		cold := 0
		for i := range 20 {
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("hot"), Item: map[string]types.AttributeValue{"k": s(fmt.Sprint("k", i))}}); err == nil {
				cold++
			}
		}
		if cold < 15 {
			t.Fatalf("only %d of 20 writes spread over partitions passed", cold)
		}
	})
}

func TestFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var next Fault
		db := New(WithLatency(func(string) time.Duration { return 5 * time.Millisecond }),
			WithFaults(func(_ context.Context, c Call) Fault {
				if c.Op == OpCreateTable {
					return NoFault
				}
				f := next
				next = NoFault
				return f
			}))
		newTable(t, db, "ftab")
		create := &dynamodb.PutItemInput{TableName: aws.String("ftab"), Item: map[string]types.AttributeValue{"k": s("a")},
			ConditionExpression: aws.String("attribute_not_exists(k)")}
		start := time.Now()
		next = Throttle
		var pte *types.ProvisionedThroughputExceededException
		if _, err := db.PutItem(ctx, create); !errors.As(err, &pte) {
			t.Fatalf("throttle fault: %v", err)
		}
		if time.Since(start) != 5*time.Millisecond {
			t.Fatalf("latency %v", time.Since(start))
		}
		next = ServerError
		var ise *types.InternalServerError
		if _, err := db.PutItem(ctx, create); !errors.As(err, &ise) {
			t.Fatalf("server error fault: %v", err)
		}
		if len(db.Items("ftab")) != 0 {
			t.Fatal("a failed call wrote")
		}
		next = LoseResponse
		if _, err := db.PutItem(ctx, create); !errors.Is(err, ErrResponseLost) {
			t.Fatalf("lost response: %v", err)
		}
		if len(db.Items("ftab")) != 1 {
			t.Fatal("the write whose response was lost did not happen")
		}
		// Retried after a lost response: the retry fails on the first attempt's effect.
		_, _ = db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("ftab"), Key: map[string]types.AttributeValue{"k": s("a")}})
		next = LoseResponseRetried
		if _, err := db.PutItem(ctx, create); err == nil {
			t.Fatal("retried create passed its condition twice")
		} else if _, ok := isCCF(err); !ok {
			t.Fatalf("retried create: %v", err)
		}
		if st := db.TableStats("ftab"); st.Faults != 4 || st.Calls[OpPutItem] != 4 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestBatchGetItem(t *testing.T) {
	ctx := context.Background()
	db := New()
	newTable(t, db, "bgtab")
	for i := range 5 {
		_, _ = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("bgtab"), Item: map[string]types.AttributeValue{"k": s(fmt.Sprint(i)), "v": n(fmt.Sprint(i))}})
	}
	var keys []map[string]types.AttributeValue
	for i := range 7 { // two are missing
		keys = append(keys, map[string]types.AttributeValue{"k": s(fmt.Sprint(i))})
	}
	out, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"bgtab": {Keys: keys, ConsistentRead: aws.Bool(true)}},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Responses["bgtab"]) != 5 || *out.ConsumedCapacity[0].CapacityUnits != 7 {
		t.Fatalf("got %d items for %v RU", len(out.Responses["bgtab"]), *out.ConsumedCapacity[0].CapacityUnits)
	}
}
