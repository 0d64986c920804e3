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
)

// write is the common path of PutItem, UpdateItem and DeleteItem; d.mu is held.
func (d *DB) write(op string, kind writeKind, tableName *string, key map[string]types.AttributeValue, newItem map[string]types.AttributeValue,
	updateExpr, condExpr *string, names map[string]string, values map[string]types.AttributeValue,
	onFail types.ReturnValuesOnConditionCheckFailure, ccMode types.ReturnConsumedCapacity,
) (old, cur map[string]types.AttributeValue, touched map[string]bool, cc *types.ConsumedCapacity, err error) {
	t, err := d.tableLocked(tableName)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var k string
	if kind == kindPut {
		k, err = t.keyOf(newItem, false)
		if err == nil {
			key = t.keyAttrs(newItem)
		}
	} else {
		k, err = t.keyOf(key, true)
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	e := newEnv(names, values)
	var c cond
	if condExpr != nil {
		if c, err = parseCondition(*condExpr, e); err != nil {
			return nil, nil, nil, nil, validation("Invalid ConditionExpression: %s", err.Error())
		}
	}
	var u *update
	if kind == kindUpdate {
		if updateExpr == nil {
			return nil, nil, nil, nil, validation("fakedynamo: UpdateItem needs an UpdateExpression")
		}
		if u, err = parseUpdate(*updateExpr, e); err != nil {
			return nil, nil, nil, nil, validation("Invalid UpdateExpression: %s", err.Error())
		}
		for _, a := range u.set {
			if a.p[0].name == t.hashKey || a.p[0].name == t.rangeKey {
				return nil, nil, nil, nil, validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", a.p[0].name)
			}
		}
		for _, pa := range u.remove {
			if pa[0].name == t.hashKey || pa[0].name == t.rangeKey {
				return nil, nil, nil, nil, validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", pa[0].name)
			}
		}
	}
	if err := e.checkUnused(); err != nil {
		return nil, nil, nil, nil, err
	}
	part, order := t.partOf(key)
	if err := d.admit(t, part, true); err != nil {
		return nil, nil, nil, nil, err
	}
	s := d.statsOf(t.name)
	var existing map[string]types.AttributeValue
	oldSize := 0
	if it, ok := t.items[k]; ok {
		existing, oldSize = it.attrs, it.size
	}
	// The item the write would leave. The condition is judged first: a write whose condition
	// fails is a ConditionalCheckFailedException even when its update could not apply.
	var next map[string]types.AttributeValue
	var uerr error
	switch kind {
	case kindPut:
		next = cloneItem(newItem)
	case kindUpdate:
		base := existing
		if base == nil {
			base = t.keyAttrs(key)
		}
		next, touched, uerr = u.apply(base)
	}
	newSize := ItemSize(next)
	units := writeUnits(max(oldSize, newSize))
	if c != nil {
		s.ConditionalWrites++
		ok, cerr := c.eval(existing)
		if cerr != nil {
			return nil, nil, nil, nil, cerr
		}
		if !ok {
			s.ConditionFailures++
			d.charge(t, op, part, units, true)
			ccf := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
			if onFail == types.ReturnValuesOnConditionCheckFailureAllOld && existing != nil {
				ccf.Item = cloneItem(existing)
			}
			return nil, nil, nil, nil, ccf
		}
	}
	if uerr != nil {
		return nil, nil, nil, nil, uerr
	}
	if newSize > maxItemSize {
		return nil, nil, nil, nil, validation("Item size has exceeded the maximum allowed size")
	}
	d.charge(t, op, part, units, true)
	if kind == kindDelete {
		if existing != nil {
			delete(t.items, k)
			t.sorted = nil
		}
	} else if it, ok := t.items[k]; ok {
		// An overwrite keeps the item's place in the scan order: the stored item is the one
		// the cached order points to, so every read sees the new version.
		it.attrs, it.size = next, newSize
	} else {
		t.items[k] = &stored{attrs: next, size: newSize, part: part, order: order, key: k}
		t.sorted = nil
	}
	return existing, next, touched, consumed(t.name, ccMode, units, true), nil
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
		old, _, _, cc, err := d.write(OpPutItem, kindPut, in.TableName, nil, in.Item, nil, in.ConditionExpression,
			in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure, in.ReturnConsumedCapacity)
		if err != nil {
			return nil, err
		}
		out := &dynamodb.PutItemOutput{ConsumedCapacity: cc}
		if in.ReturnValues == types.ReturnValueAllOld {
			out.Attributes = cloneItem(old)
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
		old, cur, touched, cc, err := d.write(OpUpdateItem, kindUpdate, in.TableName, in.Key, nil, in.UpdateExpression, in.ConditionExpression,
			in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure, in.ReturnConsumedCapacity)
		if err != nil {
			return nil, err
		}
		out := &dynamodb.UpdateItemOutput{ConsumedCapacity: cc}
		pick := func(item map[string]types.AttributeValue) map[string]types.AttributeValue {
			o := map[string]types.AttributeValue{}
			for n := range touched {
				if v, ok := item[n]; ok {
					o[n] = cloneValue(v)
				}
			}
			return o
		}
		switch in.ReturnValues {
		case types.ReturnValueAllOld:
			out.Attributes = cloneItem(old)
		case types.ReturnValueAllNew:
			out.Attributes = cloneItem(cur)
		case types.ReturnValueUpdatedOld:
			out.Attributes = pick(old)
		case types.ReturnValueUpdatedNew:
			out.Attributes = pick(cur)
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
		old, _, _, cc, err := d.write(OpDeleteItem, kindDelete, in.TableName, in.Key, nil, nil, in.ConditionExpression,
			in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure, in.ReturnConsumedCapacity)
		if err != nil {
			return nil, err
		}
		out := &dynamodb.DeleteItemOutput{ConsumedCapacity: cc}
		if in.ReturnValues == types.ReturnValueAllOld {
			out.Attributes = cloneItem(old)
		}
		return out, nil
	})
}
