package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
)

// A mapping's UUID is Lambda's EventSourceMappingUUID for esm: a random (version 4) UUID created
// the first time the mapping runs and kept with its progress, so it stays the same across
// restarts and workers. It names the mapping in metrics (EMF's EventSourceMappingUUID) and in the
// S3 on-failure destination's object keys.

// mappingItemKey is the leaseKey of the one item of a lease table that is not a shard's lease: it
// holds the mapping's UUID. The table's scans leave it out (isMappingItem).
const mappingItemKey = "esm:mapping"

const attrMappingUUID = "mappingUUID"

// isMappingItem reports whether a lease table item is the mapping's own item, not a lease.
func isMappingItem(it map[string]types.AttributeValue) bool {
	v, ok := it[attrKey].(*types.AttributeValueMemberS)
	return ok && v.Value == mappingItemKey
}

// MappingUUID returns the UUID of the mapping whose leases the table holds: the one stored in
// the table, or a new random one stored now. Workers that start at once agree: one conditional
// write (SET if_not_exists) decides, and each gets the stored value back.
func MappingUUID(ctx context.Context, api DynamoAPI, table string) (string, error) {
	out, err := startup(api).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       key(mappingItemKey),
		UpdateExpression:          aws.String("SET #u = if_not_exists(#u, :u)"),
		ExpressionAttributeNames:  map[string]string{"#u": attrMappingUUID},
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": str(uuid.NewString())},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return "", fmt.Errorf("mapping UUID in lease table %s: %w", table, err)
	}
	v, ok := out.Attributes[attrMappingUUID].(*types.AttributeValueMemberS)
	if !ok || v.Value == "" {
		return "", errors.New("mapping UUID: the lease table returned no " + attrMappingUUID)
	}
	return v.Value, nil
}
