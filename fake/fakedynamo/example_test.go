package fakedynamo_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
)

// A conditional create whose response is lost and which the SDK's retryer sends again: the
// first attempt lands, the second fails its condition on that attempt's own item. Code that
// takes a ConditionalCheckFailedException for "someone else has it" is wrong here, and a fault
// hook shows it in one call.
func Example() {
	ctx := context.Background()
	db := fakedynamo.New()
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("leases"),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}},
	})
	if err != nil {
		panic(err)
	}
	db.SetFaults(func(_ context.Context, c fakedynamo.Call) fakedynamo.Fault {
		if c.Op == fakedynamo.OpPutItem {
			return fakedynamo.LoseResponseRetried
		}
		return fakedynamo.NoFault
	})

	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String("leases"),
		Item:                map[string]types.AttributeValue{"leaseKey": &types.AttributeValueMemberS{Value: "shard-1"}},
		ConditionExpression: aws.String("attribute_not_exists(leaseKey)"),
	})
	var ccf *types.ConditionalCheckFailedException
	fmt.Println("condition failed:", errors.As(err, &ccf))
	st := db.TableStats("leases")
	fmt.Println("items:", st.Items, "faults:", st.Faults, "condition failures:", st.ConditionFailures)
	// Output:
	// condition failed: true
	// items: 1 faults: 1 condition failures: 1
}
