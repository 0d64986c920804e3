package fakedynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// writeKind is the write a conditional-write helper performs.
type writeKind int

const (
	kindPut writeKind = iota
	kindUpdate
	kindDelete
	kindCheck // a ConditionCheck of TransactWriteItems: a condition, no write
)

// writeReq is one PutItem, UpdateItem or DeleteItem as write sees it.
type writeReq struct {
	op     string
	kind   writeKind
	table  *string
	key    map[string]types.AttributeValue // UpdateItem and DeleteItem
	item   map[string]types.AttributeValue // PutItem
	update *string                         // UpdateItem
	cond   *string
	names  map[string]string
	values map[string]types.AttributeValue
	onFail types.ReturnValuesOnConditionCheckFailure
	ccMode types.ReturnConsumedCapacity
}

// written is what a successful write reports: the item before and after, the attributes an
// update touched, and the consumed capacity (nil unless asked for).
type written struct {
	old, cur map[string]types.AttributeValue
	touched  map[string]bool
	cc       *types.ConsumedCapacity
}

// pending is a write that passed its checks (request, admission, condition, update, size) and
// has not been applied yet: commit applies it. TransactWriteItems prepares every write first.
type pending struct {
	t        *table
	r        writeReq
	k        string
	key      map[string]types.AttributeValue
	part     int
	order    uint64
	existing map[string]types.AttributeValue
	next     map[string]types.AttributeValue
	size     int
	units    float64
	touched  map[string]bool
}

// write is the common path of PutItem, UpdateItem and DeleteItem; d.mu is held.
func (d *DB) write(r writeReq) (written, error) {
	p, err := d.prepare(r)
	if err != nil {
		return written{}, err
	}
	return d.commit(p), nil
}

// prepare checks a write without applying it; d.mu is held. Its errors come in DynamoDB's
// order: the request (table, key, expressions), then admission, then the condition, then the
// update's own failure and the item size. A ConditionCheck (kindCheck) stops after the
// condition.
func (d *DB) prepare(r writeReq) (*pending, error) {
	t, err := d.tableLocked(r.table)
	if err != nil {
		return nil, err
	}
	k, key, err := t.writeKey(r)
	if err != nil {
		return nil, err
	}
	c, u, err := t.parseWrite(r)
	if err != nil {
		return nil, err
	}
	p := &pending{t: t, r: r, k: k, key: key}
	p.part, p.order = t.partOf(key)
	if err := d.admit(t, p.part, true); err != nil {
		return nil, err
	}
	oldSize := 0
	if it, ok := t.items[k]; ok {
		p.existing, oldSize = it.attrs, it.size
	}
	// The item the write would leave. The condition is judged first: a write whose condition
	// fails is a ConditionalCheckFailedException even when its update could not apply.
	var uerr error
	switch r.kind {
	case kindPut:
		p.next = cloneItem(r.item)
	case kindUpdate:
		base := p.existing
		if base == nil {
			base = t.keyAttrs(key)
		}
		p.next, p.touched, uerr = u.apply(base)
	case kindCheck:
		p.next = p.existing
	}
	p.size = ItemSize(p.next)
	p.units = writeUnits(max(oldSize, p.size))
	if err := d.judge(t, r, c, p.existing, p.part, p.units); err != nil {
		return nil, err
	}
	if uerr != nil {
		return nil, uerr
	}
	if p.size > maxItemSize {
		return nil, validation("Item size has exceeded the maximum allowed size")
	}
	return p, nil
}

// commit applies a prepared write: charges it, stores it and writes its stream record (when
// the table has a stream and the write changed the item); d.mu is held.
func (d *DB) commit(p *pending) written {
	t := p.t
	d.charge(t, p.r.op, p.part, p.units, true)
	if p.r.kind == kindCheck {
		return written{}
	}
	t.store(p.r.kind, p.k, p.existing, &stored{attrs: p.next, size: p.size, part: p.part, order: p.order, key: p.k})
	cur := p.next
	if p.r.kind == kindDelete {
		cur = nil
	}
	d.recordChange(t, p.part, p.key, p.existing, cur)
	return written{old: p.existing, cur: cur, touched: p.touched, cc: consumed(t.name, p.r.ccMode, p.units, true)}
}

// writeKey is the key of the item r writes, as the table's index string and as attributes.
func (t *table) writeKey(r writeReq) (string, map[string]types.AttributeValue, error) {
	if r.kind == kindPut {
		k, err := t.keyOf(r.item, false)
		if err != nil {
			return "", nil, err
		}
		return k, t.keyAttrs(r.item), nil
	}
	k, err := t.keyOf(r.key, true)
	return k, r.key, err
}

// parseWrite parses r's condition and update expressions (either may be absent: nil) and
// checks that every expression attribute value was used and that no update touches the key.
func (t *table) parseWrite(r writeReq) (cond, *update, error) {
	e := newEnv(r.names, r.values)
	var c cond
	var err error
	if r.cond != nil {
		if c, err = parseCondition(*r.cond, e); err != nil {
			return nil, nil, validation("Invalid ConditionExpression: %s", err.Error())
		}
	}
	var u *update
	if r.kind == kindUpdate {
		if r.update == nil {
			return nil, nil, validation("fakedynamo: UpdateItem needs an UpdateExpression")
		}
		if u, err = parseUpdate(*r.update, e); err != nil {
			return nil, nil, validation("Invalid UpdateExpression: %s", err.Error())
		}
		if err := t.checkKeyUntouched(u); err != nil {
			return nil, nil, err
		}
	}
	if err := e.checkUnused(); err != nil {
		return nil, nil, err
	}
	return c, u, nil
}

// checkKeyUntouched refuses an update that sets or removes a key attribute.
func (t *table) checkKeyUntouched(u *update) error {
	names := make([]string, 0, len(u.set)+len(u.remove))
	for _, a := range u.set {
		names = append(names, a.p[0].name)
	}
	for _, pa := range u.remove {
		names = append(names, pa[0].name)
	}
	for _, n := range names {
		if n == t.hashKey || n == t.rangeKey {
			return validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", n)
		}
	}
	return nil
}

// judge evaluates r's condition c (nil: none) on the existing item (nil: none), counting it.
// A failed condition is charged its units and is a ConditionalCheckFailedException, carrying
// the item when r asks for ALL_OLD.
func (d *DB) judge(t *table, r writeReq, c cond, existing map[string]types.AttributeValue, part int, units float64) error {
	if c == nil {
		return nil
	}
	s := d.statsOf(t.name)
	s.ConditionalWrites++
	ok, err := c.eval(existing)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	s.ConditionFailures++
	d.charge(t, r.op, part, units, true)
	ccf := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	if r.onFail == types.ReturnValuesOnConditionCheckFailureAllOld && existing != nil {
		ccf.Item = cloneItem(existing)
	}
	return ccf
}

// store applies a write that passed: a delete removes the existing item (nil: none), a put or
// an update stores next under key k.
func (t *table) store(kind writeKind, k string, existing map[string]types.AttributeValue, next *stored) {
	if kind == kindDelete {
		if existing != nil {
			delete(t.items, k)
			t.sorted = nil
		}
		return
	}
	if it, ok := t.items[k]; ok {
		// An overwrite keeps the item's place in the scan order: the stored item is the one
		// the cached order points to, so every read sees the new version.
		it.attrs, it.size = next.attrs, next.size
		return
	}
	t.items[k] = next
	t.sorted = nil
}

// PutItem writes a whole item, conditionally if asked: 1 write unit per KB of the larger of
// the old and new item, charged even when the condition fails.
func (d *DB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return serve(ctx, d, OpPutItem, aws.ToString(in.TableName), in, func() (*dynamodb.PutItemOutput, error) {
		if in.ReturnValues != "" && in.ReturnValues != types.ReturnValueNone && in.ReturnValues != types.ReturnValueAllOld {
			return nil, validation("ReturnValues can only be ALL_OLD or NONE")
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		w, err := d.write(writeReq{op: OpPutItem, kind: kindPut, table: in.TableName, item: in.Item, cond: in.ConditionExpression,
			names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues, onFail: in.ReturnValuesOnConditionCheckFailure, ccMode: in.ReturnConsumedCapacity})
		if err != nil {
			return nil, err
		}
		out := &dynamodb.PutItemOutput{ConsumedCapacity: w.cc}
		if in.ReturnValues == types.ReturnValueAllOld {
			out.Attributes = cloneItem(w.old)
		}
		return out, nil
	})
}

// UpdateItem updates (or creates) an item with an update expression, conditionally if asked;
// billed like PutItem.
func (d *DB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return serve(ctx, d, OpUpdateItem, aws.ToString(in.TableName), in, func() (*dynamodb.UpdateItemOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		w, err := d.write(writeReq{op: OpUpdateItem, kind: kindUpdate, table: in.TableName, key: in.Key, update: in.UpdateExpression, cond: in.ConditionExpression,
			names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues, onFail: in.ReturnValuesOnConditionCheckFailure, ccMode: in.ReturnConsumedCapacity})
		if err != nil {
			return nil, err
		}
		out := &dynamodb.UpdateItemOutput{ConsumedCapacity: w.cc}
		pick := func(item map[string]types.AttributeValue) map[string]types.AttributeValue {
			o := map[string]types.AttributeValue{}
			for n := range w.touched {
				if v, ok := item[n]; ok {
					o[n] = cloneValue(v)
				}
			}
			return o
		}
		switch in.ReturnValues {
		case types.ReturnValueAllOld:
			out.Attributes = cloneItem(w.old)
		case types.ReturnValueAllNew:
			out.Attributes = cloneItem(w.cur)
		case types.ReturnValueUpdatedOld:
			out.Attributes = pick(w.old)
		case types.ReturnValueUpdatedNew:
			out.Attributes = pick(w.cur)
		}
		if len(out.Attributes) == 0 {
			out.Attributes = nil
		}
		return out, nil
	})
}

// DeleteItem deletes an item, conditionally if asked; billed on the deleted item's size.
func (d *DB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return serve(ctx, d, OpDeleteItem, aws.ToString(in.TableName), in, func() (*dynamodb.DeleteItemOutput, error) {
		if in.ReturnValues != "" && in.ReturnValues != types.ReturnValueNone && in.ReturnValues != types.ReturnValueAllOld {
			return nil, validation("ReturnValues can only be ALL_OLD or NONE")
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		w, err := d.write(writeReq{op: OpDeleteItem, kind: kindDelete, table: in.TableName, key: in.Key, cond: in.ConditionExpression,
			names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues, onFail: in.ReturnValuesOnConditionCheckFailure, ccMode: in.ReturnConsumedCapacity})
		if err != nil {
			return nil, err
		}
		out := &dynamodb.DeleteItemOutput{ConsumedCapacity: w.cc}
		if in.ReturnValues == types.ReturnValueAllOld {
			out.Attributes = cloneItem(w.old)
		}
		return out, nil
	})
}
