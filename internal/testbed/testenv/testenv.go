// Package testenv gives the project's test binaries the emulators and binaries they need: the
// endpoints "make test" exported, else private emulators started with the local package, and the
// aws-lambda-rie and bootstrap binaries built from this module. It is imported by tests only.
package testenv

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/kinesis-esm/esm/internal/testbed/local"
)

// Environment variables naming running emulators. scripts/emulators.sh
// writes them to .emulators/env and "make test" exports them.
const (
	// EnvKinesisEndpoint holds a kinesis-local base URL.
	EnvKinesisEndpoint = "ESM_TEST_KINESIS_ENDPOINT"
	// EnvKinesisTLSEndpoint holds the HTTPS base URL of the kinesis-local of
	// EnvKinesisEndpoint (HTTP/2 or HTTP/1.1 by ALPN, a self-signed certificate).
	EnvKinesisTLSEndpoint = "ESM_TEST_KINESIS_TLS_ENDPOINT"
	// EnvDynamoDBEndpoint holds a dynalite base URL.
	EnvDynamoDBEndpoint = "ESM_TEST_DYNAMODB_ENDPOINT"
	// EnvDDBStreamsEndpoint holds the base URL of a ddb-local (DynamoDB and DynamoDB Streams
	// on one endpoint), whose shards rotate every four hours.
	EnvDDBStreamsEndpoint = "ESM_TEST_DDBSTREAMS_ENDPOINT"
)

// KinesisEndpoint returns a Kinesis endpoint for tests: the value of
// $ESM_TEST_KINESIS_ENDPOINT when it is set (stop then does nothing), or else
// the endpoint of a private kinesis-local started with [local.StartKinesis] and
// stopped by stop. It is meant for TestMain:
//
//	func TestMain(m *testing.M) {
//		endpoint, stop, err := testenv.KinesisEndpoint(context.Background())
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
// names. A missing installation is an error wrapping [local.ErrNotInstalled], never
// a reason to skip.
func KinesisEndpoint(ctx context.Context) (endpoint string, stop func(), err error) {
	if v := os.Getenv(EnvKinesisEndpoint); v != "" {
		return v, func() {}, nil
	}
	p, err := local.StartKinesis(ctx, local.KinesisOptions{})
	if err != nil {
		return "", nil, err
	}
	return p.Endpoint(), func() { _ = p.Stop() }, nil
}

// KinesisTLSEndpoint is [KinesisEndpoint] for kinesis-local's HTTPS endpoint (HTTP/2 by ALPN, a
// self-signed certificate): $ESM_TEST_KINESIS_TLS_ENDPOINT when it is set, or else that of a
// private kinesis-local, stopped by stop.
func KinesisTLSEndpoint(ctx context.Context) (endpoint string, stop func(), err error) {
	if v := os.Getenv(EnvKinesisTLSEndpoint); v != "" {
		return v, func() {}, nil
	}
	p, err := local.StartKinesis(ctx, local.KinesisOptions{})
	if err != nil {
		return "", nil, err
	}
	return p.TLSEndpoint(), func() { _ = p.Stop() }, nil
}

// DynamoEndpoint is [KinesisEndpoint] for DynamoDB: the value of
// $ESM_TEST_DYNAMODB_ENDPOINT when set, or else a private dynalite started
// with [local.StartDynalite]. Use unique table names.
func DynamoEndpoint(ctx context.Context) (endpoint string, stop func(), err error) {
	if v := os.Getenv(EnvDynamoDBEndpoint); v != "" {
		return v, func() {}, nil
	}
	p, err := local.StartDynalite(ctx, local.DynaliteOptions{})
	if err != nil {
		return "", nil, err
	}
	return p.Endpoint(), func() { _ = p.Stop() }, nil
}

// DDBStreamsEndpoint is [KinesisEndpoint] for DynamoDB with DynamoDB Streams: the value of
// $ESM_TEST_DDBSTREAMS_ENDPOINT when set and opts is the zero value, or else a private
// ddb-local built from this module (moduleDir as for [BuildRIE]) and started with
// [local.StartDDBLocal] and opts (Binary is filled in). Tests that need shards to rotate in
// seconds pass opts.Rotate and get their own. Use unique table names.
func DDBStreamsEndpoint(ctx context.Context, moduleDir string, opts local.DDBLocalOptions) (endpoint string, stop func(), err error) {
	if v := os.Getenv(EnvDDBStreamsEndpoint); v != "" && opts == (local.DDBLocalOptions{}) {
		return v, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "ddb-local-")
	if err != nil {
		return "", nil, err
	}
	if opts.Binary, err = BuildDDBLocal(ctx, dir, moduleDir); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	p, err := local.StartDDBLocal(ctx, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	return p.Endpoint(), func() { _ = p.Stop(); _ = os.RemoveAll(dir) }, nil
}

// Kinesis is KinesisEndpoint with a Kinesis client for that endpoint (local credentials,
// local.DefaultRegion). stop is never nil when err is nil.
func Kinesis(ctx context.Context) (endpoint string, client *kinesis.Client, stop func(), err error) {
	endpoint, stop, err = KinesisEndpoint(ctx)
	if err != nil {
		return "", nil, nil, fmt.Errorf("kinesis emulator: %w", err)
	}
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		stop()
		return "", nil, nil, err
	}
	return endpoint, local.NewKinesisClient(cfg, endpoint), stop, nil
}

// SQS starts goaws in this process (see [local.StartSQS]: one per process) and returns it with
// a query-protocol client for it (local credentials, local.DefaultRegion). Close srv at the end.
func SQS(ctx context.Context) (srv *local.SQSServer, client *sqs.Client, err error) {
	cfg, err := local.AWSConfig(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	if srv, err = local.StartSQS(); err != nil {
		return nil, nil, fmt.Errorf("sqs emulator: %w", err)
	}
	return srv, local.NewSQSClient(cfg, srv.Endpoint()), nil
}
