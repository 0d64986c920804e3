package esmapi

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesis-esm/esm/internal/ddbcall"
)

// timedCatalogAPI gives every call of a DynamoCatalog a deadline of its own, the policy of every
// DynamoDB call of esm (internal/ddbcall): a call on a connection that gets no answer (a
// middlebox black-holing it) would otherwise hold a Sync, a Create or a template start for as
// long as the connection lasts. Reads that ran out of their time are tried again at once;
// writes, conditional on the revision or the guard, are left to the caller.
type timedCatalogAPI struct{ api DynamoCatalogAPI }

// api is the catalog's client with the deadlines.
func (c DynamoCatalog) api() DynamoCatalogAPI { return timedCatalogAPI{c.API} }

func (t timedCatalogAPI) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return ddbcall.Call(ctx, ddbcall.Page, ddbcall.ReadAttempts, func(ctx context.Context) (*dynamodb.ScanOutput, error) {
		return t.api.Scan(ctx, in, o...)
	})
}

func (t timedCatalogAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return ddbcall.Call(ctx, ddbcall.Item, ddbcall.ReadAttempts, func(ctx context.Context) (*dynamodb.GetItemOutput, error) {
		return t.api.GetItem(ctx, in, o...)
	})
}

func (t timedCatalogAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return ddbcall.Call(ctx, ddbcall.Item, 1, func(ctx context.Context) (*dynamodb.PutItemOutput, error) {
		return t.api.PutItem(ctx, in, o...)
	})
}

func (t timedCatalogAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return ddbcall.Call(ctx, ddbcall.Item, 1, func(ctx context.Context) (*dynamodb.DeleteItemOutput, error) {
		return t.api.DeleteItem(ctx, in, o...)
	})
}

func (t timedCatalogAPI) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return ddbcall.Call(ctx, ddbcall.Table, ddbcall.ReadAttempts, func(ctx context.Context) (*dynamodb.DescribeTableOutput, error) {
		return t.api.DescribeTable(ctx, in, o...)
	})
}

func (t timedCatalogAPI) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return ddbcall.Call(ctx, ddbcall.Table, 1, func(ctx context.Context) (*dynamodb.CreateTableOutput, error) {
		return t.api.CreateTable(ctx, in, o...)
	})
}
