package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/internal/ddbcall"
)

// TableAPI is the part of the DynamoDB client EnsureTable uses. *dynamodb.Client satisfies it.
type TableAPI interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

var (
	// ErrTableNotFound is returned (wrapped, naming the table) by EnsureTable when the lease table
	// does not exist and it was not asked to create it.
	ErrTableNotFound = errors.New("lease table not found")
	// ErrTableSchema is returned (wrapped, naming the table and its keys) by EnsureTable when the
	// table's key is not the hash key leaseKey of type S alone.
	ErrTableSchema = errors.New("lease table has the wrong key schema")
)

// tablePoll is the pause between two DescribeTable calls while a table is being created.
const tablePoll = 100 * time.Millisecond

// EnsureTable makes sure the lease table exists with the key a Dynamo needs: the hash key
// leaseKey of type S, and no sort key. A missing table is created when create is set
// (PAY_PER_REQUEST; several workers may create it at once) and is an error wrapping
// ErrTableNotFound otherwise. It blocks until the table is ACTIVE, for as long as ctx allows.
func EnsureTable(ctx context.Context, client TableAPI, table string, create bool) error {
	if table == "" {
		return errors.New("lease: table name is required")
	}
	t := time.NewTicker(tablePoll)
	defer t.Stop()
	for {
		out, err := ddbcall.Call(ctx, ddbcall.Table, ddbcall.ReadAttempts, func(ctx context.Context) (*dynamodb.DescribeTableOutput, error) {
			return client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		})
		var notFound *types.ResourceNotFoundException
		switch {
		case errors.As(err, &notFound) && !create:
			return fmt.Errorf("%w: %s; create it with the hash key %s (type S) and no sort key, or let esm create it", ErrTableNotFound, table, attrKey)
		case errors.As(err, &notFound):
			if err := createTable(ctx, client, table); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("describe lease table %s: %w", table, err)
		default:
			if err := checkKeySchema(out.Table); err != nil {
				return fmt.Errorf("%w: %s: %s", ErrTableSchema, table, err.Error())
			}
			switch out.Table.TableStatus {
			case types.TableStatusActive:
				return nil
			case types.TableStatusDeleting:
				return fmt.Errorf("lease table %s is being deleted", table)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for lease table %s to be active: %w", table, ctx.Err())
		case <-t.C:
		}
	}
}

func createTable(ctx context.Context, client TableAPI, table string) error {
	_, err := ddbcall.Call(ctx, ddbcall.Table, 1, func(ctx context.Context) (*dynamodb.CreateTableOutput, error) {
		return client.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String(table),
			BillingMode:          types.BillingModePayPerRequest,
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}},
		})
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) { // in use: another worker created it first
		return fmt.Errorf("create lease table %s: %w", table, err)
	}
	return nil
}

// checkKeySchema accepts exactly one key, leaseKey, a hash key of type S.
func checkKeySchema(t *types.TableDescription) error {
	if t == nil {
		return errors.New("no table description")
	}
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	var keys []string
	for _, k := range t.KeySchema {
		name := aws.ToString(k.AttributeName)
		keys = append(keys, fmt.Sprintf("%s %s (%s)", name, k.KeyType, attrTypes[name]))
	}
	ok := len(t.KeySchema) == 1 && aws.ToString(t.KeySchema[0].AttributeName) == attrKey &&
		t.KeySchema[0].KeyType == types.KeyTypeHash && attrTypes[attrKey] == types.ScalarAttributeTypeS
	if !ok {
		return fmt.Errorf("its key is [%s]; a lease table needs the hash key %s (S) and no sort key", strings.Join(keys, ", "), attrKey)
	}
	return nil
}

// ListLeases reads every lease of a table with a consistent scan, ordered by shard id (the
// roster item is left out).
func ListLeases(ctx context.Context, client DynamoAPI, table string) ([]Lease, error) {
	m, err := scanTable(ctx, timed(client), table)
	if err != nil {
		return nil, err
	}
	out := make([]Lease, 0, len(m))
	for _, id := range sortedKeys(m) {
		out = append(out, m[id])
	}
	return out, nil
}

func scanTable(ctx context.Context, api DynamoAPI, table string) (map[string]Lease, error) {
	out := map[string]Lease{}
	in := &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)}
	for {
		res, err := api.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("scan lease table %s: %w", table, err)
		}
		for _, it := range res.Items {
			if isRoster(it) || isMappingItem(it) || isBoundItem(it) { // not leases
				continue
			}
			l, err := decodeLease(it)
			if err != nil {
				return nil, fmt.Errorf("lease table %s: %w", table, err)
			}
			out[l.ShardID] = l
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in = &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true), ExclusiveStartKey: res.LastEvaluatedKey}
	}
}

func isRoster(it map[string]types.AttributeValue) bool {
	v, ok := it[attrKey].(*types.AttributeValueMemberS)
	return ok && v.Value == rosterKey
}
