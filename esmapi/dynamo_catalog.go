package esmapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoCatalogAPI is the part of the DynamoDB client a DynamoCatalog uses.
type DynamoCatalogAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// DynamoCatalog keeps the mappings in a DynamoDB table, one item per mapping (key "uuid", the
// record as JSON in "record", its revision in "revision"), so that every worker of the table
// serves the same mappings. Every write is conditional on the revision it was made from.
type DynamoCatalog struct {
	API   DynamoCatalogAPI
	Table string
}

const (
	catalogKey      = "uuid"
	catalogRecord   = "record"
	catalogRevision = "revision"
)

// Ensure makes sure the table exists, creating it (on demand capacity) when create is set, and
// waits until it is active.
func (c DynamoCatalog) Ensure(ctx context.Context, create bool) error {
	_, err := c.API.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(c.Table)})
	var nf *types.ResourceNotFoundException
	switch {
	case err == nil:
	case errors.As(err, &nf) && create:
		_, err = c.API.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String(c.Table),
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(catalogKey), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(catalogKey), KeyType: types.KeyTypeHash}},
			BillingMode:          types.BillingModePayPerRequest,
		})
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) { // another worker created it first
			return fmt.Errorf("create mappings table %s: %w", c.Table, err)
		}
	case errors.As(err, &nf):
		return fmt.Errorf("mappings table %s does not exist", c.Table)
	default:
		return fmt.Errorf("describe mappings table %s: %w", c.Table, err)
	}
	// A new table is active within a second or so: poll it at that pace, not the waiter's
	// default of 20 s.
	w := dynamodb.NewTableExistsWaiter(c.API, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 200*time.Millisecond, 5*time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(c.Table)}, 2*time.Minute); err != nil {
		return fmt.Errorf("mappings table %s: %w", c.Table, err)
	}
	return nil
}

// Load implements Catalog.
func (c DynamoCatalog) Load(ctx context.Context) ([]Record, error) {
	var out []Record
	in := &dynamodb.ScanInput{TableName: aws.String(c.Table), ConsistentRead: aws.Bool(true)}
	for {
		page, err := c.API.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("read mappings from %s: %w", c.Table, err)
		}
		for _, item := range page.Items {
			v, ok := item[catalogRecord].(*types.AttributeValueMemberS)
			if !ok {
				continue
			}
			var r Record
			if err := json.Unmarshal([]byte(v.Value), &r); err != nil {
				return nil, fmt.Errorf("mapping in %s: %w", c.Table, err)
			}
			out = append(out, r)
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// Put implements Catalog: a PutItem conditional on the revision r was made from (no item when
// r.Revision is 0).
func (c DynamoCatalog) Put(ctx context.Context, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	in := &dynamodb.PutItemInput{TableName: aws.String(c.Table), Item: map[string]types.AttributeValue{
		catalogKey:      &types.AttributeValueMemberS{Value: r.Mapping.UUID},
		catalogRecord:   &types.AttributeValueMemberS{Value: string(b)},
		catalogRevision: &types.AttributeValueMemberN{Value: strconv.FormatInt(r.Revision, 10)},
	}}
	if r.Revision == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(#k)")
		in.ExpressionAttributeNames = map[string]string{"#k": catalogKey}
	} else {
		in.ConditionExpression = aws.String("#r = :read")
		in.ExpressionAttributeNames = map[string]string{"#r": catalogRevision}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":read": &types.AttributeValueMemberN{Value: strconv.FormatInt(r.Revision-1, 10)}}
	}
	_, err = c.API.PutItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return fmt.Errorf("write mapping %s to %s: %w", r.Mapping.UUID, c.Table, ErrConflict)
	case err != nil:
		return fmt.Errorf("write mapping to %s: %w", c.Table, err)
	}
	return nil
}

// Delete implements Catalog: a DeleteItem conditional on the revision (an item already gone is
// fine).
func (c DynamoCatalog) Delete(ctx context.Context, uuid string, rev int64) error {
	_, err := c.API.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(c.Table),
		Key:                       map[string]types.AttributeValue{catalogKey: &types.AttributeValueMemberS{Value: uuid}},
		ConditionExpression:       aws.String("attribute_not_exists(#k) OR #r = :read"),
		ExpressionAttributeNames:  map[string]string{"#k": catalogKey, "#r": catalogRevision},
		ExpressionAttributeValues: map[string]types.AttributeValue{":read": &types.AttributeValueMemberN{Value: strconv.FormatInt(rev, 10)}},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return fmt.Errorf("delete mapping %s from %s: %w", uuid, c.Table, ErrConflict)
	case err != nil:
		return fmt.Errorf("delete mapping from %s: %w", c.Table, err)
	}
	return nil
}
