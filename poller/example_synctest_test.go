package poller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// This file is an example of testing a Kinesis handler with the fakes of module
// github.com/kinesis-esm/esm/fake under testing/synctest: the handler stores orders in DynamoDB,
// the stream and the table are the in-memory fakes, and faults are injected into both. In the
// bubble the poller's backoffs pass in virtual time, so the minute-long shape of a retry runs
// at once and the same way every run. An Example function gets no *testing.T, which
// synctest.Test needs, so this one is a test; ExampleNew shows the same fakes outside a bubble.

// orderPutter is what storeOrders needs of DynamoDB: a *dynamodb.Client in production, a
// *fakedynamo.DB in the test.
type orderPutter interface {
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// storeOrders is the handler under test: it stores each record's data as an order, keyed by its
// partition key, and fails the batch on the first write that fails (esm then retries it).
func storeOrders(db orderPutter) func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
	return func(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		for _, rec := range e.Records {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("orders"), Item: map[string]types.AttributeValue{
				"id":   &types.AttributeValueMemberS{Value: rec.Kinesis.PartitionKey},
				"item": &types.AttributeValueMemberS{Value: string(rec.Kinesis.Data)},
			}})
			if err != nil {
				return events.KinesisEventResponse{}, fmt.Errorf("storing order %s: %w", rec.Kinesis.PartitionKey, err)
			}
		}
		return events.KinesisEventResponse{}, nil
	}
}

// TestStoreOrdersUnderSynctest: the first GetRecords is throttled and the first write of the
// orders is throttled too; esm retries the read and then the batch, the orders are all stored
// once the retry succeeds, and the checkpoint is the last record. The transcript is checked
// whole, as an Example's output is.
func TestStoreOrdersUnderSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The fakes are created inside the bubble, so their clocks are its virtual clock.
		kin := fakekinesis.New()
		arn := kin.CreateStream("orders", 1)
		var last string
		for i, item := range []string{"apple", "pear", "plum"} {
			_, last = kin.Put("orders", fmt.Sprintf("order-%d", i+1), []byte(item))
		}
		kin.Inject(func(op string, _ any) error { // Kinesis: the first read is throttled
			if op == fakekinesis.OpGetRecords && kin.Calls(op) == 1 {
				return fakekinesis.ErrThrottled()
			}
			return nil
		})
		db := fakedynamo.New()
		if _, err := db.CreateTable(t.Context(), &dynamodb.CreateTableInput{
			TableName: aws.String("orders"), BillingMode: types.BillingModePayPerRequest,
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		}); err != nil {
			t.Fatal(err)
		}
		var puts sync.Mutex
		putCalls := 0
		db.SetFaults(func(_ context.Context, c fakedynamo.Call) fakedynamo.Fault { // DynamoDB: the first write is throttled
			puts.Lock()
			defer puts.Unlock()
			if putCalls++; c.Op == fakedynamo.OpPutItem && putCalls == 1 {
				return fakedynamo.Throttle
			}
			return fakedynamo.NoFault
		})

		// The transcript: what each invocation did, then what the test finds.
		var (
			mu         sync.Mutex
			transcript strings.Builder
			invoked    []time.Time
		)
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		handle := storeOrders(db)
		handler := func(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
			resp, err := handle(ctx, e)
			mu.Lock()
			defer mu.Unlock()
			invoked = append(invoked, time.Now())
			fmt.Fprintf(&transcript, "invocation %d: %d records, error: %v\n", len(invoked), len(e.Records), err != nil)
			if err == nil {
				stop() // a graceful stop: this batch still completes and is checkpointed
			}
			return resp, err
		}
		store := poller.NewMemoryStore()
		stream, err := kinesissrc.New(kin, arn)
		if err != nil {
			panic(err)
		}
		p, err := poller.New(stream, poller.Config{StartingPosition: poller.TrimHorizon, BatchSize: 10}, store, inprocess.New(handler))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := p.Run(ctx); err != nil {
			t.Fatal(err)
		}

		mu.Lock()
		defer mu.Unlock()
		var stored []string
		for _, it := range db.Items("orders") {
			stored = append(stored, it["id"].(*types.AttributeValueMemberS).Value+"="+it["item"].(*types.AttributeValueMemberS).Value)
		}
		slices.Sort(stored)
		fmt.Fprintln(&transcript, "stored:", strings.Join(stored, " "))
		fmt.Fprintln(&transcript, "GetRecords calls:", kin.Calls(fakekinesis.OpGetRecords))
		progress, err := store.Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&transcript, "checkpoint at the last record:", progress["shardId-000000000000"].Checkpoint == last)
		// The retry waited out esm's backoff (half a second at least) in virtual time.
		fmt.Fprintln(&transcript, "retry after a backoff:", len(invoked) == 2 && invoked[1].Sub(invoked[0]) >= 500*time.Millisecond)
		const want = `invocation 1: 3 records, error: true
invocation 2: 3 records, error: false
stored: order-1=apple order-2=pear order-3=plum
GetRecords calls: 2
checkpoint at the last record: true
retry after a backoff: true
`
		if got := transcript.String(); got != want {
			t.Errorf("transcript:\n%s\nwant:\n%s", got, want)
		}
		t.Logf("virtual time passed: %v", time.Since(start))
	})
}
