package fakedynamo

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const (
	maxBatchWrite    = 25  // the most requests one BatchWriteItem may carry
	maxTransactItems = 100 // the most actions one TransactWriteItems may carry
)

// firstTable names one table of a request, for the fault injector and the statistics.
func firstTable[V any](m map[string]V) string {
	for n := range m {
		return n
	}
	return ""
}

// BatchWriteItem puts and deletes up to 25 items of one or more tables, each billed as a
// PutItem or DeleteItem and each writing its own stream record. Each request is applied on its
// own; a throttled one comes back in UnprocessedItems.
func (d *DB) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return serve(ctx, d, OpBatchWriteItem, firstTable(in.RequestItems), in, func() (*dynamodb.BatchWriteItemOutput, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		n := 0
		for name, reqs := range in.RequestItems {
			if err := d.checkBatch(name, reqs); err != nil {
				return nil, err
			}
			n += len(reqs)
		}
		if n < 1 || n > maxBatchWrite {
			return nil, validation("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length less than or equal to 25, Member must have length greater than or equal to 1]")
		}
		out := &dynamodb.BatchWriteItemOutput{UnprocessedItems: map[string][]types.WriteRequest{}}
		for name, reqs := range in.RequestItems {
			for _, wr := range reqs {
				r := writeReq{op: OpBatchWriteItem, table: aws.String(name)}
				if wr.PutRequest != nil {
					r.kind, r.item = kindPut, wr.PutRequest.Item
				} else {
					r.kind, r.key = kindDelete, wr.DeleteRequest.Key
				}
				if _, err := d.write(r); err != nil {
					if isThrottle(err) {
						out.UnprocessedItems[name] = append(out.UnprocessedItems[name], wr)
						continue
					}
					return nil, err
				}
			}
		}
		return out, nil
	})
}

// checkBatch checks one table's requests of a BatchWriteItem: each a put or a delete, each on
// another item; d.mu is held.
func (d *DB) checkBatch(name string, reqs []types.WriteRequest) error {
	t, err := d.tableLocked(aws.String(name))
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, wr := range reqs {
		if (wr.PutRequest == nil) == (wr.DeleteRequest == nil) {
			return validation("A WriteRequest must have exactly one of PutRequest and DeleteRequest")
		}
		var k string
		if wr.PutRequest != nil {
			k, err = t.keyOf(wr.PutRequest.Item, false)
		} else {
			k, err = t.keyOf(wr.DeleteRequest.Key, true)
		}
		if err != nil {
			return err
		}
		if seen[k] {
			return validation("Provided list of item keys contains duplicates")
		}
		seen[k] = true
	}
	return nil
}

func isThrottle(err error) bool {
	_, ok := err.(*types.ProvisionedThroughputExceededException)
	return ok
}

// TransactWriteItems applies up to 100 Put, Update, Delete and ConditionCheck actions, on
// distinct items, all or none: every action is checked first, and if any condition fails
// (or any action is invalid) nothing is written and the call is a TransactionCanceledException
// with one CancellationReason per action. Each write writes its own stream record.
func (d *DB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	first := ""
	if len(in.TransactItems) > 0 {
		first = transactTable(in.TransactItems[0])
	}
	return serve(ctx, d, OpTransactWriteItems, first, in, func() (*dynamodb.TransactWriteItemsOutput, error) {
		if len(in.TransactItems) < 1 || len(in.TransactItems) > maxTransactItems {
			return nil, validation("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100, Member must have length greater than or equal to 1")
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		reqs := make([]writeReq, len(in.TransactItems))
		for i, ti := range in.TransactItems {
			r, err := transactReq(ti)
			if err != nil {
				return nil, err
			}
			reqs[i] = r
		}
		ps, err := d.prepareAll(reqs)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			d.commit(p)
		}
		return &dynamodb.TransactWriteItemsOutput{}, nil
	})
}

// prepareAll prepares every write of a transaction; d.mu is held. Two actions on one item are
// a ValidationException; failed conditions cancel the transaction.
func (d *DB) prepareAll(reqs []writeReq) ([]*pending, error) {
	ps := make([]*pending, len(reqs))
	reasons := make([]types.CancellationReason, len(reqs))
	seen := map[string]bool{}
	cancelled := false
	for i, r := range reqs {
		reasons[i].Code = aws.String("None")
		p, err := d.prepare(r)
		if ccf, ok := err.(*types.ConditionalCheckFailedException); ok {
			reasons[i] = types.CancellationReason{Code: aws.String("ConditionalCheckFailed"), Message: ccf.Message, Item: ccf.Item}
			cancelled = true
			continue
		}
		if err != nil {
			return nil, err
		}
		id := aws.ToString(r.table) + "\x00" + p.k
		if seen[id] {
			return nil, validation("Transaction request cannot include multiple operations on one item")
		}
		seen[id], ps[i] = true, p
	}
	if cancelled {
		codes := make([]string, len(reasons))
		for i, r := range reasons {
			codes[i] = aws.ToString(r.Code)
		}
		return nil, &types.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"),
			CancellationReasons: reasons,
		}
	}
	return ps, nil
}

func transactTable(ti types.TransactWriteItem) string {
	switch {
	case ti.Put != nil:
		return aws.ToString(ti.Put.TableName)
	case ti.Update != nil:
		return aws.ToString(ti.Update.TableName)
	case ti.Delete != nil:
		return aws.ToString(ti.Delete.TableName)
	case ti.ConditionCheck != nil:
		return aws.ToString(ti.ConditionCheck.TableName)
	}
	return ""
}

// transactReq is one action of a transaction as a write.
func transactReq(ti types.TransactWriteItem) (writeReq, error) {
	n := 0
	var r writeReq
	if p := ti.Put; p != nil {
		n++
		r = writeReq{op: OpTransactWriteItems, kind: kindPut, table: p.TableName, item: p.Item, cond: p.ConditionExpression,
			names: p.ExpressionAttributeNames, values: p.ExpressionAttributeValues, onFail: p.ReturnValuesOnConditionCheckFailure}
	}
	if u := ti.Update; u != nil {
		n++
		r = writeReq{op: OpTransactWriteItems, kind: kindUpdate, table: u.TableName, key: u.Key, update: u.UpdateExpression, cond: u.ConditionExpression,
			names: u.ExpressionAttributeNames, values: u.ExpressionAttributeValues, onFail: u.ReturnValuesOnConditionCheckFailure}
	}
	if x := ti.Delete; x != nil {
		n++
		r = writeReq{op: OpTransactWriteItems, kind: kindDelete, table: x.TableName, key: x.Key, cond: x.ConditionExpression,
			names: x.ExpressionAttributeNames, values: x.ExpressionAttributeValues, onFail: x.ReturnValuesOnConditionCheckFailure}
	}
	if c := ti.ConditionCheck; c != nil {
		n++
		if c.ConditionExpression == nil {
			return writeReq{}, validation("1 validation error detected: Value null at 'transactItems.conditionCheck.conditionExpression' failed to satisfy constraint: Member must not be null")
		}
		r = writeReq{op: OpTransactWriteItems, kind: kindCheck, table: c.TableName, key: c.Key, cond: c.ConditionExpression,
			names: c.ExpressionAttributeNames, values: c.ExpressionAttributeValues, onFail: c.ReturnValuesOnConditionCheckFailure}
	}
	if n != 1 {
		return writeReq{}, validation("TransactItems can only contain one of Check, Put, Update or Delete")
	}
	return r, nil
}
