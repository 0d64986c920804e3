package lease

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"go.uber.org/goleak"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
)

// The Dynamo tests run against dynalite and kinesis-local: the endpoints "make test" exports, or
// private emulators started here.

var (
	awsCfg          aws.Config
	ddb             *dynamodb.Client
	kin             *kinesis.Client
	dynamoEndpoint  string
	kinesisEndpoint string
	nameSeq         atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	ctx := context.Background()
	var stopD, stopK func()
	var err error
	if dynamoEndpoint, stopD, err = testenv.DynamoEndpoint(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "dynamodb emulator:", err)
		return 1
	}
	if kinesisEndpoint, stopK, err = testenv.KinesisEndpoint(ctx); err != nil {
		stopD()
		fmt.Fprintln(os.Stderr, "kinesis emulator:", err)
		return 1
	}
	if awsCfg, err = local.AWSConfig(ctx, ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ddb = newDynamoClient(dynamoEndpoint)
	kin = local.NewKinesisClient(awsCfg, kinesisEndpoint)
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	stopK()
	stopD()
	if code == 0 {
		// Idle keep-alive connections of the SDK's HTTP client are not leaks.
		if err := goleak.Find(goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

func newDynamoClient(endpoint string) *dynamodb.Client {
	return dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// uniqueName is a table or stream name no other test (or test binary) uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d-%d", prefix, os.Getpid(), time.Now().UnixNano()%1e6, nameSeq.Add(1))
}

// newTable creates a lease table for one test.
func newTable(t testing.TB) string {
	t.Helper()
	name := uniqueName("leases")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := EnsureTable(ctx, ddb, name, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
	return name
}

// newStream creates a stream for one test and deletes it when the test ends: the emulator is
// shared and caps the shards of all streams together.
func newStream(t *testing.T, prefix string, shards int32) (name, arn string) {
	t.Helper()
	name = uniqueName(prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	arn, err := local.CreateStream(ctx, kin, name, shards)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = kin.DeleteStream(context.Background(), &kinesis.DeleteStreamInput{StreamName: &name, EnforceConsumerDeletion: aws.Bool(true)})
	})
	return name, arn
}
