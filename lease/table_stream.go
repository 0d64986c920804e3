package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A lease table holds one stream's leases: its items are keyed by shard id alone, and shard ids
// repeat across streams (every stream has a shardId-000000000000), so the workers of two streams
// on one table would take each other's leases and checkpoints. The stream is recorded in the
// table's mapping item (the one that holds the mapping's UUID) by the first worker, and every
// worker checks it at start.

// attrStreamARN is the mapping item's attribute naming the stream whose leases the table holds.
const attrStreamARN = "streamARN"

// ErrTableOfAnotherStream is returned (wrapped, naming the table and both streams) by ClaimTable
// when the lease table holds another stream's leases.
var ErrTableOfAnotherStream = errors.New("lease table holds another stream's leases")

// ClaimTable records streamARN as the stream whose leases table holds when none is recorded, and
// returns an error wrapping ErrTableOfAnotherStream when another one is. Workers that start at
// once on a new table agree: one conditional write (SET if_not_exists) decides, and each compares
// the stored value. A table written before streams were recorded is claimed by the first worker
// that checks it.
func ClaimTable(ctx context.Context, api DynamoAPI, table, streamARN string) error {
	if streamARN == "" {
		return errors.New("lease: claim table " + table + ": no stream")
	}
	out, err := startup(api).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       key(mappingItemKey),
		UpdateExpression:          aws.String("SET #s = if_not_exists(#s, :s)"),
		ExpressionAttributeNames:  map[string]string{"#s": attrStreamARN},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": str(streamARN)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return fmt.Errorf("record the stream in lease table %s: %w", table, err)
	}
	v, ok := out.Attributes[attrStreamARN].(*types.AttributeValueMemberS)
	if !ok || v.Value == "" {
		return errors.New("lease: the lease table returned no " + attrStreamARN)
	}
	if v.Value != streamARN {
		return fmt.Errorf("%w: %s holds the leases of %s, not of %s; give this mapping a lease table of its own (one table per mapping)",
			ErrTableOfAnotherStream, table, v.Value, streamARN)
	}
	return nil
}
