package esmapi

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// silentCatalogAPI is a DynamoDB client none of whose calls is ever answered: each returns only
// when its context ends.
type silentCatalogAPI struct{ DynamoCatalogAPI }

func (silentCatalogAPI) Scan(ctx context.Context, _ *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (silentCatalogAPI) GetItem(ctx context.Context, _ *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (silentCatalogAPI) DeleteItem(ctx context.Context, _ *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestCatalogCallsHaveDeadlines: on a table that answers nothing, the catalog's reads and writes
// return by their own deadlines though their contexts never end.
func TestCatalogCallsHaveDeadlines(t *testing.T) {
	c := DynamoCatalog{API: silentCatalogAPI{}, Table: "mappings"}
	for name, call := range map[string]func() error{
		"Load":   func() error { _, err := c.Load(context.Background()); return err },
		"Delete": func() error { return c.Delete(context.Background(), "0a360b63-0000-4000-8000-000000000000", 1) },
	} {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s on a table that answers nothing: no error", name)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s still waiting on an unanswered DynamoDB call after 20 s", name)
		}
	}
}
