package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DDBWriter is what DDBWrites writes a table's changes with: a DynamoDB client.
type DDBWriter interface {
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// DDBChange is one change a stream must carry for a key: its eventName and the item before and
// after (nil: none).
type DDBChange struct {
	Name     string
	Old, New map[string]types.AttributeValue
}

// DDBProducer writes changes to a table whose hash key is "k" (S) and remembers, per key, the
// changes its stream must carry, in order. Every write changes its item, so each makes one
// record. It is not safe for concurrent use.
type DDBProducer struct {
	Table string
	Keys  int
	rng   *rand.Rand
	items map[string]map[string]types.AttributeValue
	// Want holds each key's changes in the order they were made.
	Want map[string][]DDBChange
	n    int // items made so far: each item's number
}

// NewDDBProducer returns a producer over keys keys of table, its choices drawn from seed.
func NewDDBProducer(table string, keys int, seed uint64) *DDBProducer {
	return &DDBProducer{Table: table, Keys: keys, rng: rand.New(rand.NewPCG(seed, seed)),
		items: map[string]map[string]types.AttributeValue{}, Want: map[string][]DDBChange{}}
}

// Total is how many changes were written.
func (p *DDBProducer) Total() int {
	n := 0
	for _, cs := range p.Want {
		n += len(cs)
	}
	return n
}

// Write makes n more changes through c: inserts with PutItem or UpdateItem, modifications with
// UpdateItem or PutItem, removals with DeleteItem, and every tenth step a BatchWriteItem or a
// TransactWriteItems of two keys. Items carry a number, a string and sometimes a binary.
func (p *DDBProducer) Write(ctx context.Context, c DDBWriter, n int) error {
	for done := 0; done < n; {
		a, b := p.key(), p.key()
		var err error
		switch {
		case n-done >= 2 && a != b && p.rng.IntN(10) == 0:
			err = p.pair(ctx, c, a, b)
			done += 2
		default:
			err = p.one(ctx, c, a)
			done++
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *DDBProducer) key() string { return "key-" + strconv.Itoa(p.rng.IntN(p.Keys)) }

// next is the item a put of k makes now.
func (p *DDBProducer) next(k string) map[string]types.AttributeValue {
	p.n++
	it := map[string]types.AttributeValue{
		"k": &types.AttributeValueMemberS{Value: k}, "n": &types.AttributeValueMemberN{Value: strconv.Itoa(p.n)},
		"v": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s:%d", k, len(p.Want[k]))},
	}
	if p.n%3 == 0 {
		it["b"] = &types.AttributeValueMemberB{Value: []byte{byte(p.n), 0, 0xff}}
	}
	return it
}

// record notes k's change to cur (nil: removed).
func (p *DDBProducer) record(k string, cur map[string]types.AttributeValue) {
	old := p.items[k]
	name := "MODIFY"
	switch {
	case old == nil:
		name = "INSERT"
	case cur == nil:
		name = "REMOVE"
	}
	p.Want[k] = append(p.Want[k], DDBChange{Name: name, Old: old, New: cur})
	if cur == nil {
		delete(p.items, k)
	} else {
		p.items[k] = cur
	}
}

func keyOf(k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: k}}
}

// one changes key k with a single-item write.
func (p *DDBProducer) one(ctx context.Context, c DDBWriter, k string) error {
	table := aws.String(p.Table)
	if p.items[k] != nil && p.rng.IntN(5) == 0 {
		if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: table, Key: keyOf(k)}); err != nil {
			return err
		}
		p.record(k, nil)
		return nil
	}
	it := p.next(k)
	if p.rng.IntN(2) == 0 {
		if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: it}); err != nil {
			return err
		}
		p.record(k, it)
		return nil
	}
	// An update: what it sets replaces those attributes; a binary it does not set stays.
	cur := map[string]types.AttributeValue{}
	for name, v := range p.items[k] {
		cur[name] = v
	}
	cur["k"], cur["n"], cur["v"] = it["k"], it["n"], it["v"]
	if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: keyOf(k),
		UpdateExpression:          aws.String("SET n = :n, v = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": it["n"], ":v": it["v"]},
	}); err != nil {
		return err
	}
	p.record(k, cur)
	return nil
}

// pair puts keys a and b in one BatchWriteItem or one TransactWriteItems.
func (p *DDBProducer) pair(ctx context.Context, c DDBWriter, a, b string) error {
	ia, ib := p.next(a), p.next(b)
	var err error
	if p.rng.IntN(2) == 0 {
		_, err = c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{p.Table: {
			{PutRequest: &types.PutRequest{Item: ia}}, {PutRequest: &types.PutRequest{Item: ib}},
		}}})
	} else {
		_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(p.Table), Item: ia}}, {Put: &types.Put{TableName: aws.String(p.Table), Item: ib}},
		}})
	}
	if err != nil {
		return err
	}
	p.record(a, ia)
	p.record(b, ib)
	return nil
}

// DDBRecords checks the records a NEW_AND_OLD_IMAGES stream delivered (events.DynamoDBEvent
// records, in delivery order, repeats allowed) against what a producer wrote:
//   - every change delivered;
//   - per key, first deliveries in the order the changes were made;
//   - each as AWS sends it: eventName, Keys, OldImage and NewImage equal to the item before and
//     after, StreamViewType NEW_AND_OLD_IMAGES, eventVersion "1.1", eventSource "aws:dynamodb",
//     a SequenceNumber and a SizeBytes.
func DDBRecords(got []events.DynamoDBEventRecord, want map[string][]DDBChange) []Check {
	total := 0
	for _, cs := range want {
		total += len(cs)
	}
	seen := map[string]bool{}
	next := map[string]int{}
	order := Check{Name: "order per key", OK: true}
	shape := Check{Name: "records as AWS sends them", OK: true}
	for _, r := range got {
		seq := r.Change.SequenceNumber
		if seen[seq] {
			continue
		}
		seen[seq] = true
		k := r.Change.Keys["k"].String()
		i := next[k]
		next[k]++
		if i >= len(want[k]) {
			if order.OK {
				order.OK, order.Detail = false, fmt.Sprintf("key %s: a change %d beyond the %d written", k, i, len(want[k]))
			}
			continue
		}
		if msg := ddbMismatch(r, want[k][i]); msg != "" && shape.OK {
			// A change out of order shows as the wrong images: say which it was.
			shape.OK, shape.Detail = false, fmt.Sprintf("key %s, change %d (%s): %s", k, i, seq, msg)
		}
	}
	all := Check{Name: "every change delivered", OK: len(seen) == total,
		Detail: fmt.Sprintf("%d of %d distinct changes (%d deliveries)", len(seen), total, len(got))}
	for k, cs := range want {
		if next[k] != len(cs) && all.OK {
			all.OK, all.Detail = false, fmt.Sprintf("key %s: %d of %d changes", k, next[k], len(cs))
		}
	}
	if order.OK {
		order.Detail = fmt.Sprintf("%d keys", len(next))
	}
	if shape.OK {
		shape.Detail = "eventName, keys, old and new images, view type, version and source as expected"
	}
	return []Check{all, order, shape}
}

// ddbMismatch says how record r differs from change c ("" when it does not).
func ddbMismatch(r events.DynamoDBEventRecord, c DDBChange) string {
	switch {
	case r.EventName != c.Name:
		return fmt.Sprintf("eventName %s, want %s", r.EventName, c.Name)
	case r.EventVersion != "1.1" || r.EventSource != "aws:dynamodb":
		return fmt.Sprintf("eventVersion %q, eventSource %q", r.EventVersion, r.EventSource)
	case r.Change.StreamViewType != "NEW_AND_OLD_IMAGES" || r.Change.SequenceNumber == "" || r.Change.SizeBytes <= 0:
		return fmt.Sprintf("StreamViewType %q, SequenceNumber %q, SizeBytes %d", r.Change.StreamViewType, r.Change.SequenceNumber, r.Change.SizeBytes)
	}
	key := c.New
	if key == nil {
		key = c.Old
	}
	for _, img := range []struct {
		name string
		got  map[string]events.DynamoDBAttributeValue
		want map[string]types.AttributeValue
	}{{"Keys", r.Change.Keys, map[string]types.AttributeValue{"k": key["k"]}}, {"OldImage", r.Change.OldImage, c.Old}, {"NewImage", r.Change.NewImage, c.New}} {
		if g, w := eventJSON(img.got), sdkJSON(img.want); g != w {
			return fmt.Sprintf("%s %s, want %s", img.name, g, w)
		}
	}
	return ""
}

// eventJSON and sdkJSON render an image of either kind as DynamoDB JSON ("null" for none), so
// that the two compare.
func eventJSON(m map[string]events.DynamoDBAttributeValue) string {
	if len(m) == 0 {
		return "null"
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func sdkJSON(m map[string]types.AttributeValue) string {
	if len(m) == 0 {
		return "null"
	}
	out := map[string]events.DynamoDBAttributeValue{}
	for k, v := range m {
		out[k] = toEventValue(v)
	}
	return eventJSON(out)
}

// toEventValue converts the scalar kinds the producer writes (S, N, B).
func toEventValue(v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	}
	return events.NewNullAttribute()
}
