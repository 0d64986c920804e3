package fakeparity_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
)

// rpKeys are the items of the read-paths table: hash key h, range key r.
var rpKeys = [][2]string{{"a", "1"}, {"a", "2"}, {"a", "3"}, {"b", "1"}, {"b", "2"}, {"c", "1"}}

func rpKey(h, r string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"h": s(h), "r": n(r)}
}

// readAll reads the table through every path, consistent and eventually consistent, each
// giving the items it saw as sorted text: GetItem and BatchGetItem of every key, Query of every
// hash key (pages of 2), Scan whole and in pages of 2.
func readAll(ctx context.Context, t *testing.T, c api, table string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, consistent := range []bool{true, false} {
		mode := map[bool]string{true: "consistent", false: "eventual"}[consistent]
		var got []string
		for _, k := range rpKeys {
			g, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: rpKey(k[0], k[1]), ConsistentRead: aws.Bool(consistent)})
			if err != nil {
				t.Fatal(err)
			}
			if g.Item != nil {
				got = append(got, show(g.Item))
			}
		}
		slices.Sort(got)
		out["GetItem "+mode] = strings.Join(got, " ")

		got = nil
		var keys []map[string]types.AttributeValue
		for _, k := range rpKeys {
			keys = append(keys, rpKey(k[0], k[1]))
		}
		b, err := c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: {Keys: keys, ConsistentRead: aws.Bool(consistent)}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(b.UnprocessedKeys) > 0 {
			t.Fatalf("BatchGetItem left keys unprocessed: %v", b.UnprocessedKeys)
		}
		for _, it := range b.Responses[table] {
			got = append(got, show(it))
		}
		slices.Sort(got)
		out["BatchGetItem "+mode] = strings.Join(got, " ")

		got = nil
		for _, h := range []string{"a", "b", "c"} {
			in := &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: aws.String("h = :h"), Limit: aws.Int32(2),
				ExpressionAttributeValues: map[string]types.AttributeValue{":h": s(h)}, ConsistentRead: aws.Bool(consistent)}
			for {
				q, err := c.Query(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range q.Items {
					got = append(got, show(it))
				}
				if q.LastEvaluatedKey == nil {
					break
				}
				in.ExclusiveStartKey = q.LastEvaluatedKey
			}
		}
		slices.Sort(got)
		out["Query "+mode] = strings.Join(got, " ")

		for _, limit := range []int32{0, 2} {
			o := scanStep("scan", limit, consistent).run(ctx, c, table)
			if o.Err != "" {
				t.Fatal(o.Err)
			}
			out[fmt.Sprintf("Scan limit %d %s", limit, mode)] = strings.ReplaceAll(o.Attrs, "\n", " ")
		}
	}
	return out
}

// TestReadPathsAfterOverwriteAndDelete: after an item is overwritten (PutItem, UpdateItem) and
// after one is deleted, every read path, consistent or not, shows the table as it now is. The
// first reads warm whatever a read may cache. The same steps run on dynalite (not with -short),
// and the fake must answer as it does.
func TestReadPathsAfterOverwriteAndDelete(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	targets := map[string]api{"fake": fakedynamo.New()}
	if dynalite != nil {
		targets["dynalite"] = dynalite
	}
	table := fmt.Sprintf("readpaths-%d", time.Now().UnixNano())
	item := func(h, r, v string) map[string]types.AttributeValue {
		it := rpKey(h, r)
		it["v"] = s(v)
		return it
	}
	// want is the table as a model: every read path must show exactly these items.
	want := map[[2]string]string{}
	expect := func() string {
		var items []string
		for k, v := range want {
			items = append(items, show(item(k[0], k[1], v)))
		}
		slices.Sort(items)
		return strings.Join(items, " ")
	}
	seen := map[string][]map[string]string{} // target → the reads of each phase
	for name, c := range targets {
		_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName: &table, BillingMode: types.BillingModePayPerRequest,
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("h"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("r"), KeyType: types.KeyTypeRange}},
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("h"), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String("r"), AttributeType: types.ScalarAttributeTypeN}},
		})
		if err != nil {
			t.Fatal(name, err)
		}
		if name == "dynalite" {
			if err := dynamodb.NewTableExistsWaiter(dynalite).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_, _ = dynalite.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table})
			})
		}
	}
	type phase struct {
		name  string
		write func(c api) error
		model func()
	}
	phases := []phase{
		{"initial", func(c api) error {
			for _, k := range rpKeys {
				if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item(k[0], k[1], "v1")}); err != nil {
					return err
				}
			}
			return nil
		}, func() {
			for _, k := range rpKeys {
				want[k] = "v1"
			}
		}},
		{"after an overwrite", func(c api) error {
			if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item("a", "2", "v2-put")}); err != nil {
				return err
			}
			_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: rpKey("b", "1"), UpdateExpression: aws.String("SET v = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("v2-update")}})
			return err
		}, func() { want[[2]string{"a", "2"}], want[[2]string{"b", "1"}] = "v2-put", "v2-update" }},
		{"after a delete", func(c api) error {
			_, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: rpKey("a", "3")})
			return err
		}, func() { delete(want, [2]string{"a", "3"}) }},
		{"after a conditional overwrite", func(c api) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item("c", "1", "v3"), ConditionExpression: aws.String("v = :old"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":old": s("v1")}})
			return err
		}, func() { want[[2]string{"c", "1"}] = "v3" }},
	}
	for _, p := range phases {
		p.model()
		for name, c := range targets {
			if err := p.write(c); err != nil {
				t.Fatalf("%s %s: %v", name, p.name, err)
			}
			reads := readAll(ctx, t, c, table)
			for path, got := range reads {
				if got != expect() {
					t.Errorf("%s %s: %s shows\n  %s\nwant\n  %s", name, p.name, path, got, expect())
				}
			}
			seen[name] = append(seen[name], reads)
		}
	}
	if len(seen["fake"]) != len(phases) || len(seen["fake"][0]) != 10 {
		t.Fatalf("read %d phases, %d paths in the first; want %d phases of 10 paths", len(seen["fake"]), len(seen["fake"][0]), len(phases))
	}
	if d, ok := seen["dynalite"]; ok && !slices.EqualFunc(d, seen["fake"], maps.Equal) {
		t.Errorf("the fake and dynalite differ:\nfake:     %v\ndynalite: %v", seen["fake"], d)
	}
}
