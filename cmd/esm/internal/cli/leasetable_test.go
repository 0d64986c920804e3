package cli

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/fake/fakedynamo"
)

// beforeCreate runs hook before the next CreateTable.
type beforeCreate struct {
	*fakedynamo.DB
	hook func()
}

func (b *beforeCreate) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	if h := b.hook; h != nil {
		b.hook = nil
		h()
	}
	return b.DB.CreateTable(ctx, in, o...)
}

// TestLeaseTableOfADeletedMapping: a worker's poller that starts again (after a failure) once
// another worker deleted the mapping and dropped its lease table does not create the table again,
// which would read the deleted mapping's stream from its starting position; a live mapping's
// table is created; and a table created while the mapping was being deleted is dropped.
func TestLeaseTableOfADeletedMapping(t *testing.T) {
	ctx := context.Background()
	db := &beforeCreate{DB: fakedynamo.New()}
	catalog := esmapi.DynamoCatalog{API: db, Table: "mappings"}
	if err := catalog.Ensure(ctx, true); err != nil {
		t.Fatal(err)
	}
	put := func(id string, rev int64, deleting bool) {
		t.Helper()
		r := esmapi.Record{Revision: rev, Deleting: deleting, FunctionName: "fn"}
		r.Mapping.UUID, r.Mapping.EventSourceArn = id, "arn:aws:kinesis:us-east-1:000000000000:stream/"+id
		r.Mapping.FunctionArn = "arn:aws:lambda:us-east-1:000000000000:function:fn"
		if err := catalog.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(table string) bool {
		_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var nf *ddbtypes.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			t.Fatal(err)
		}
		return err == nil
	}

	put("live", 0, false)
	if err := ensureLeaseTable(ctx, db, catalog, "live", "mappings-live"); err != nil || !exists("mappings-live") {
		t.Fatalf("a live mapping's lease table: %v, exists %t", err, exists("mappings-live"))
	}

	put("deleting", 0, false)
	put("deleting", 1, true)
	if err := ensureLeaseTable(ctx, db, catalog, "deleting", "mappings-deleting"); err == nil || exists("mappings-deleting") {
		t.Fatalf("the lease table of a mapping being deleted: %v, exists %t; want an error and no table", err, exists("mappings-deleting"))
	}
	if err := ensureLeaseTable(ctx, db, catalog, "gone", "mappings-gone"); err == nil || exists("mappings-gone") {
		t.Fatalf("the lease table of a deleted mapping: %v, exists %t; want an error and no table", err, exists("mappings-gone"))
	}

	put("racing", 0, false)
	db.hook = func() { put("racing", 1, true) } // deleted between the check and the table's creation
	if err := ensureLeaseTable(ctx, db, catalog, "racing", "mappings-racing"); err == nil || exists("mappings-racing") {
		t.Fatalf("the lease table of a mapping deleted while it was created: %v, exists %t; want an error and no table", err, exists("mappings-racing"))
	}
}
