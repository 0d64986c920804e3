package local

import (
	"cmp"
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Static credentials accepted by the emulators. They are placeholders: the
// emulators check that requests are signed, not by whom. (kinesis-local would
// read a 12-digit access key ID as an account ID; this one is not.)
const (
	localAccessKeyID     = "AKIDLOCAL"
	localSecretAccessKey = "local"
)

// AWSConfig returns an SDK configuration for talking to the local emulators:
// static placeholder credentials (no session token) and region, or
// DefaultRegion when region is empty. Every other setting, retries included,
// is the SDK's default. Nothing is read from the environment or from shared
// config files, so a developer's AWS_PROFILE or ~/.aws can neither break nor
// leak into tests. Set the endpoint per client with BaseEndpoint (see
// [NewKinesisClient]).
//
// The error is ctx's, if ctx is already done.
func AWSConfig(ctx context.Context, region string) (aws.Config, error) {
	if err := ctx.Err(); err != nil {
		return aws.Config{}, err
	}
	return aws.Config{
		Region:      cmp.Or(region, DefaultRegion),
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(localAccessKeyID, localSecretAccessKey, "")),
	}, nil
}

// NewKinesisClient returns a Kinesis client for cfg that sends every request
// to endpoint, e.g. [Process.Endpoint].
func NewKinesisClient(cfg aws.Config, endpoint string) *kinesis.Client {
	return kinesis.NewFromConfig(cfg, func(o *kinesis.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	})
}
