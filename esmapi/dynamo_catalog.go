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
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// DynamoCatalog keeps the mappings in a DynamoDB table, one item per mapping (key "uuid", the
// record as JSON in "record", its revision in "revision"), so that every worker of the table
// serves the same mappings. Every write is conditional on the revision it was made from, and a
// guard item per (EventSourceArn, FunctionArn) pair keeps each pair to one mapping, whichever
// worker writes (see claim).
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
	_, err := c.api().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(c.Table)})
	var nf *types.ResourceNotFoundException
	switch {
	case err == nil:
	case errors.As(err, &nf) && create:
		_, err = c.api().CreateTable(ctx, &dynamodb.CreateTableInput{
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
	w := dynamodb.NewTableExistsWaiter(c.api(), func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 200*time.Millisecond, 5*time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(c.Table)}, 2*time.Minute); err != nil {
		return fmt.Errorf("mappings table %s: %w", c.Table, err)
	}
	return nil
}

// Load implements Catalog. A record without its pair's guard (written before guards existed)
// gets one.
func (c DynamoCatalog) Load(ctx context.Context) ([]Record, error) {
	var out []Record
	guarded := map[pair]bool{}
	in := &dynamodb.ScanInput{TableName: aws.String(c.Table), ConsistentRead: aws.Bool(true)}
	for {
		page, err := c.api().Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("read mappings from %s: %w", c.Table, err)
		}
		for _, item := range page.Items {
			if k, ok := item[catalogKey].(*types.AttributeValueMemberS); ok {
				if p, ok := pairOfGuard(k.Value); ok {
					guarded[p] = true
				}
			}
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
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	if err := c.backfill(ctx, out, guarded); err != nil {
		return nil, err
	}
	return out, nil
}

// Put implements Catalog: the record written conditionally on the revision r was made from (no
// item when r.Revision is 0). A record that takes a pair claims its guard first, and one that
// leaves a pair releases that pair's guard after.
func (c DynamoCatalog) Put(ctx context.Context, r Record) error {
	var prev *Record
	if r.Revision > 0 {
		var err error
		if prev, _, err = c.readRecord(ctx, r.Mapping.UUID); err != nil {
			return err
		}
		if prev == nil || prev.Revision != r.Revision-1 {
			return fmt.Errorf("write mapping %s to %s: %w", r.Mapping.UUID, c.Table, ErrConflict)
		}
	}
	p := pairOf(&r)
	if prev == nil || pairOf(prev) != p {
		if err := c.claim(ctx, p, r.Mapping.UUID, r.Revision); err != nil {
			return err
		}
	}
	if err := c.putRecord(ctx, r); err != nil {
		return err
	}
	if prev != nil && pairOf(prev) != p {
		// The record is written: a guard left behind by a failed release is stale, and the
		// next claim of its pair takes it over at once.
		_ = c.release(ctx, pairOf(prev), r.Mapping.UUID, r.Revision)
	}
	return nil
}

// putRecord writes r if the item holds the revision r was made from.
func (c DynamoCatalog) putRecord(ctx context.Context, r Record) error {
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
	_, err = c.api().PutItem(ctx, in)
	switch {
	case isConditionFailed(err):
		return fmt.Errorf("write mapping %s to %s: %w", r.Mapping.UUID, c.Table, ErrConflict)
	case err != nil:
		return fmt.Errorf("write mapping to %s: %w", c.Table, err)
	}
	return nil
}

// Delete implements Catalog: a DeleteItem conditional on the revision (an item already gone is
// fine), then the release of the record's pair.
func (c DynamoCatalog) Delete(ctx context.Context, uuid string, rev int64) error {
	prev, aborted, err := c.readRecord(ctx, uuid)
	switch {
	case err != nil:
		return err
	case aborted || prev != nil && prev.Revision != rev:
		return fmt.Errorf("delete mapping %s from %s: %w", uuid, c.Table, ErrConflict)
	case prev == nil:
		return nil
	}
	_, err = c.api().DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(c.Table),
		Key:                       map[string]types.AttributeValue{catalogKey: &types.AttributeValueMemberS{Value: uuid}},
		ConditionExpression:       aws.String("attribute_not_exists(#k) OR #r = :read"),
		ExpressionAttributeNames:  map[string]string{"#k": catalogKey, "#r": catalogRevision},
		ExpressionAttributeValues: map[string]types.AttributeValue{":read": &types.AttributeValueMemberN{Value: strconv.FormatInt(rev, 10)}},
	})
	switch {
	case isConditionFailed(err):
		return fmt.Errorf("delete mapping %s from %s: %w", uuid, c.Table, ErrConflict)
	case err != nil:
		return fmt.Errorf("delete mapping from %s: %w", c.Table, err)
	}
	// The record is gone: a guard left behind by a failed release is taken over by the next
	// claim of its pair.
	_ = c.release(ctx, pairOf(prev), uuid, gone)
	return nil
}

// Live reports whether the catalog holds the mapping, not being deleted (a consistent read).
func (c DynamoCatalog) Live(ctx context.Context, uuid string) (bool, error) {
	r, _, err := c.readRecord(ctx, uuid)
	return r != nil && !r.Deleting, err
}
