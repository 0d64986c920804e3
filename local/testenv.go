package local

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Environment variables naming running emulators. scripts/emulators.sh
// writes them to .emulators/env and "make test" exports them.
const (
	// EnvKinesisEndpoint holds a kinesis-local base URL.
	EnvKinesisEndpoint = "ESM_TEST_KINESIS_ENDPOINT"
	// EnvDynamoDBEndpoint holds a dynalite base URL.
	EnvDynamoDBEndpoint = "ESM_TEST_DYNAMODB_ENDPOINT"
)

// TestKinesisEndpoint returns a Kinesis endpoint for tests: the value of
// $ESM_TEST_KINESIS_ENDPOINT when it is set (stop then does nothing), or else
// the endpoint of a private kinesis-local started with [StartKinesis] and
// stopped by stop. It is meant for TestMain:
//
//	func TestMain(m *testing.M) {
//		endpoint, stop, err := local.TestKinesisEndpoint(context.Background())
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		kinesisEndpoint = endpoint
//		code := m.Run()
//		stop()
//		os.Exit(code)
//	}
//
// The emulator may be shared with other test binaries, so use unique stream
// names. A missing installation is an error wrapping [ErrNotInstalled], never
// a reason to skip.
func TestKinesisEndpoint(ctx context.Context) (endpoint string, stop func(), err error) {
	if v := os.Getenv(EnvKinesisEndpoint); v != "" {
		return v, func() {}, nil
	}
	p, err := StartKinesis(ctx, KinesisOptions{})
	if err != nil {
		return "", nil, err
	}
	return p.Endpoint(), func() { _ = p.Stop() }, nil
}

// TestDynamoEndpoint is [TestKinesisEndpoint] for DynamoDB: the value of
// $ESM_TEST_DYNAMODB_ENDPOINT when set, or else a private dynalite started
// with [StartDynalite]. Use unique table names.
func TestDynamoEndpoint(ctx context.Context) (endpoint string, stop func(), err error) {
	if v := os.Getenv(EnvDynamoDBEndpoint); v != "" {
		return v, func() {}, nil
	}
	p, err := StartDynalite(ctx, DynaliteOptions{})
	if err != nil {
		return "", nil, err
	}
	return p.Endpoint(), func() { _ = p.Stop() }, nil
}

// TestKinesis is TestKinesisEndpoint with a Kinesis client for that endpoint (local credentials,
// DefaultRegion). stop is never nil when err is nil.
func TestKinesis(ctx context.Context) (endpoint string, client *kinesis.Client, stop func(), err error) {
	endpoint, stop, err = TestKinesisEndpoint(ctx)
	if err != nil {
		return "", nil, nil, fmt.Errorf("kinesis emulator: %w", err)
	}
	cfg, err := AWSConfig(ctx, "")
	if err != nil {
		stop()
		return "", nil, nil, err
	}
	return endpoint, NewKinesisClient(cfg, endpoint), stop, nil
}
