package runner

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/source/dynamostreams"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// KinesisAPI is the part of the Kinesis client a Runner uses: the poller's reads, and finding
// and registering enhanced fan-out consumers. *kinesis.Client satisfies it, and so does a fake;
// a mapping that reads through a consumer needs SubscribeToShard too (kinesissrc.SubscribeAPI).
type KinesisAPI interface {
	kinesissrc.API
	consumerAPI
}

// DynamoDBAPI is the part of the DynamoDB client the lease tables need, and esm serve's catalog
// (a mapping's table is deleted with it). *dynamodb.Client satisfies it.
type DynamoDBAPI interface {
	lease.DynamoAPI
	lease.TableAPI
	DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
}

// Runner runs event source mappings on AWS clients built once and shared by all of them.
type Runner struct {
	aws aws.Config
	log *slog.Logger
	// kin serves the poller's reads (GetRecords on the lean path when it is the SDK's client and
	// not sdkReads);
	// kinStart serves the start-up calls, with StartupAttempts.
	kin, kinStart KinesisAPI
	// ddb and ddbStart are the lease tables' clients (nil until a mapping needs one, unless
	// WithDynamoDB gave one).
	ddb, ddbStart DynamoDBAPI
	// streams and streamsStart are DynamoDB Streams' clients, the reads' and the start-up calls'
	// (with StartupAttempts); AWS_ENDPOINT_URL_DYNAMODB_STREAMS sends them elsewhere than the
	// lease tables' (AWS_ENDPOINT_URL_DYNAMODB).
	streams, streamsStart dynamostreams.API
	sqsProtocol           string
	sdkReads              bool // WithSDKGetRecords
	// lean is kin on the lean GetRecords path, shared by the mappings' sources (nil: kin is not
	// the SDK's client, or sdkReads).
	lean kinesissrc.API
}

// Option configures New. A nil Option is ignored.
type Option func(*Runner)

// WithLogger sets the logger (default, or nil: slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(r *Runner) {
		if l != nil {
			r.log = l
		}
	}
}

// WithSQSProtocol sets the protocol of the SQS client of an on-failure queue: "json" (the
// default, the SDK's) or "query" (for emulators that speak only that, such as goaws).
func WithSQSProtocol(p string) Option { return func(r *Runner) { r.sqsProtocol = p } }

// WithSDKGetRecords reads every mapping's stream with the SDK client's own GetRecords instead of
// the lean path (source/kinesis.WithSDKGetRecords): for an operator who wants to rule the lean
// path out.
func WithSDKGetRecords(on bool) Option { return func(r *Runner) { r.sdkReads = on } }

// WithKinesis makes every Kinesis call go to k (an in-memory fake in tests and the simulation),
// the start-up calls included (default: clients built from the aws.Config).
func WithKinesis(k KinesisAPI) Option {
	return func(r *Runner) {
		if k != nil {
			r.kin, r.kinStart = k, k
		}
	}
}

// WithDynamoDB makes every lease table call go to d (default: clients built from the
// aws.Config).
func WithDynamoDB(d DynamoDBAPI) Option {
	return func(r *Runner) {
		if d != nil {
			r.ddb, r.ddbStart = d, d
		}
	}
}

// WithDynamoDBStreams makes every DynamoDB Streams call go to s (default: clients built from the
// aws.Config).
func WithDynamoDBStreams(s dynamostreams.API) Option {
	return func(r *Runner) {
		if s != nil {
			r.streams, r.streamsStart = s, s
		}
	}
}

// New builds a Runner's clients from cfg, once: where they send their calls is cfg's (its
// BaseEndpoint for a local emulator; AWSConfig sets it).
func New(cfg aws.Config, opts ...Option) (*Runner, error) {
	r := &Runner{aws: cfg, log: slog.Default()}
	for _, o := range opts {
		if o != nil {
			o(r)
		}
	}
	if r.kin == nil {
		// The sources read with it: GetRecords, an idle shard's once-a-second call, on the lean
		// path unless WithSDKGetRecords (source/kinesis).
		c := kinesis.NewFromConfig(cfg)
		r.kin = c
		if !r.sdkReads {
			r.lean = kinesissrc.Lean(c) // one lean path (its connections) for every mapping
		}
		r.kinStart = kinesis.NewFromConfig(cfg, func(o *kinesis.Options) { o.RetryMaxAttempts = StartupAttempts })
	}
	if r.streams == nil {
		r.streams = dynamodbstreams.NewFromConfig(cfg)
		r.streamsStart = dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.RetryMaxAttempts = StartupAttempts })
	}
	if r.ddb == nil {
		dcfg := cfg
		if hc, ok := callClient(cfg.HTTPClient); ok { // DynamoDB answers at once: headers within seconds
			dcfg.HTTPClient = hc
		}
		r.ddb = dynamodb.NewFromConfig(dcfg)
		r.ddbStart = dynamodb.NewFromConfig(dcfg, func(o *dynamodb.Options) { o.RetryMaxAttempts = StartupAttempts })
	}
	return r, nil
}

// AWS is the SDK configuration the Runner's clients were built from.
func (r *Runner) AWS() aws.Config { return r.aws }

// Logger is the Runner's logger.
func (r *Runner) Logger() *slog.Logger { return r.log }

// DynamoDB is the lease tables' client (esm serve keeps its catalog with it too).
func (r *Runner) DynamoDB() DynamoDBAPI { return r.ddb }

// Kinesis is the streams' client (esm serve's rewind route lists and checks a stream with it).
func (r *Runner) Kinesis() KinesisAPI { return r.kin }

// StartupAttempts is how many times each call of a worker's start-up (the stream, its consumer
// and shards, the lease table and the mapping's UUID) is attempted, with the SDK's back-off:
// a minute on average (at most about two), instead of the SDK's 3 attempts (about a second) that
// every later call keeps. A worker started while AWS is briefly out of reach waits for it rather
// than exiting 1.
const StartupAttempts = 10

// AWSConfig loads the SDK configuration, with a pool of connections that is kept for every shard
// read at once (httpClient). With an endpoint URL, every client built from it calls that endpoint
// (BaseEndpoint) and, with no credentials in the environment, signs with fixed local
// credentials, as local emulators accept any. Without one the SDK's own resolution applies,
// AWS_ENDPOINT_URL_KINESIS included.
func AWSConfig(ctx context.Context, region, endpoint string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithHTTPClient(httpClient())}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	if endpoint != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local", "")))
	}
	if endpoint != "" {
		opts = append(opts, config.WithBaseEndpoint(endpoint))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	cfg.Region = cmp.Or(cfg.Region, "us-east-1")
	return cfg, nil
}

// DefaultWorkerID is a worker id unique on this host: hostname-pid.
func DefaultWorkerID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", cmp.Or(host, "esm"), os.Getpid())
}
