package esmapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Results keeps each mapping's LastProcessingResult, so that a restart shows what the mapping's
// last batch did rather than "No records processed". Optional (WithResults).
type Results interface {
	// LoadResult returns the mapping's kept result, "" when none was kept.
	LoadResult(ctx context.Context, uuid string) (string, error)
	// SaveResult keeps result as the mapping's.
	SaveResult(ctx context.Context, uuid, result string) error
	// DeleteResult forgets a deleted mapping's result.
	DeleteResult(ctx context.Context, uuid string) error
}

// FileResults keeps each mapping's result in Dir/<UUID>, a one-line file replaced atomically.
type FileResults struct{ Dir string }

var _ Results = FileResults{}

func (f FileResults) path(uuid string) string { return filepath.Join(f.Dir, uuid) }

// LoadResult implements Results.
func (f FileResults) LoadResult(_ context.Context, uuid string) (string, error) {
	b, err := os.ReadFile(f.path(uuid))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the result of mapping %s: %w", uuid, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// SaveResult implements Results.
func (f FileResults) SaveResult(_ context.Context, uuid, result string) error {
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return fmt.Errorf("keep the result of mapping %s: %w", uuid, err)
	}
	tmp, err := os.CreateTemp(f.Dir, "."+uuid+"-*")
	if err != nil {
		return fmt.Errorf("keep the result of mapping %s: %w", uuid, err)
	}
	_, werr := tmp.WriteString(result + "\n")
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("keep the result of mapping %s: %w", uuid, err)
	}
	if err := os.Rename(tmp.Name(), f.path(uuid)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("keep the result of mapping %s: %w", uuid, err)
	}
	return nil
}

// DeleteResult implements Results.
func (f FileResults) DeleteResult(_ context.Context, uuid string) error {
	if err := os.Remove(f.path(uuid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete the result of mapping %s: %w", uuid, err)
	}
	return nil
}

// DynamoResultsAPI is the part of the DynamoDB client a DynamoResults uses.
type DynamoResultsAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// DynamoResults keeps each mapping's result in a DynamoCatalog's table, so that every worker of
// the table shows the last result any of them had: an item of its own per mapping (key
// "result:<UUID>", the result in "lastProcessingResult"), which the catalog's Load passes over
// since it holds no record. The last write wins, as the mapping's last batch does.
type DynamoResults struct {
	API   DynamoResultsAPI
	Table string
}

var _ Results = DynamoResults{}

const resultAttr = "lastProcessingResult"

func (d DynamoResults) key(uuid string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{catalogKey: &types.AttributeValueMemberS{Value: "result:" + uuid}}
}

// LoadResult implements Results.
func (d DynamoResults) LoadResult(ctx context.Context, uuid string) (string, error) {
	out, err := d.API.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.Table), Key: d.key(uuid), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("read the result of mapping %s from %s: %w", uuid, d.Table, err)
	}
	v, _ := out.Item[resultAttr].(*types.AttributeValueMemberS)
	if v == nil {
		return "", nil
	}
	return v.Value, nil
}

// SaveResult implements Results.
func (d DynamoResults) SaveResult(ctx context.Context, uuid, result string) error {
	item := d.key(uuid)
	item[resultAttr] = &types.AttributeValueMemberS{Value: result}
	if _, err := d.API.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(d.Table), Item: item}); err != nil {
		return fmt.Errorf("keep the result of mapping %s in %s: %w", uuid, d.Table, err)
	}
	return nil
}

// DeleteResult implements Results.
func (d DynamoResults) DeleteResult(ctx context.Context, uuid string) error {
	if _, err := d.API.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(d.Table), Key: d.key(uuid)}); err != nil {
		return fmt.Errorf("delete the result of mapping %s from %s: %w", uuid, d.Table, err)
	}
	return nil
}
