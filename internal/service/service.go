// Package service wires one event source mapping together: AWS clients, the state store, the
// invoker and the poller. The CLI and handler/inproc both go through it.
package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/dlq"
	"github.com/kinesis-esm/esm/internal/getrecords"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
)

// Options is everything needed to run one mapping in this process.
type Options struct {
	// Stream is the stream's name or ARN, or an enhanced fan-out consumer's ARN (then the mapping
	// reads through that consumer).
	Stream string
	// Consumer, when set, is the enhanced fan-out consumer of Stream the mapping reads through
	// (SubscribeToShard): its ARN, or its name. It must be ACTIVE, or be waited for.
	Consumer string
	// RegisterConsumer registers Consumer (a name) when it does not exist, and waits until it is
	// ACTIVE.
	RegisterConsumer bool
	// EndpointURL, when set, is where every AWS call goes (a local emulator); otherwise the SDK's
	// own resolution applies, AWS_ENDPOINT_URL_KINESIS included.
	EndpointURL string
	// Region overrides the SDK's region (default: from the environment, else us-east-1).
	Region string
	// StateDir holds the checkpoint file. Default .esm.
	StateDir string
	// FunctionName names the function in ARNs and the state key. Default "example".
	FunctionName string
	// FunctionTimeout is the in-process function's timeout. Default 3 s.
	FunctionTimeout time.Duration
	// Mapping is the event source mapping; its StreamARN is filled from Stream.
	Mapping poller.Config
	// Invoker, when set, invokes the function (HTTP endpoints, the Lambda API). Otherwise the
	// handler passed to Run is invoked in-process.
	Invoker poller.Invoker
	// SQSProtocol is the protocol of the SQS client of an on-failure queue
	// (Mapping.OnFailureDestination): "json" (default, the SDK's) or "query" (for emulators that
	// speak only that, such as goaws).
	SQSProtocol string
	Logger      *slog.Logger
	// LeaseTable, when set, is the DynamoDB lease table through which this worker shares the
	// mapping's shards with the other workers of the table; progress then lives in the table and
	// StateDir is not used. One table per mapping.
	LeaseTable string
	// CreateLeaseTable creates LeaseTable when it does not exist (otherwise that is an error).
	CreateLeaseTable bool
	// WorkerID names this worker in the lease table; unique among its workers. Default
	// hostname-pid.
	WorkerID string
	// LeaseDuration is how long a lease lasts without renewal. Default 10 s (lease's default).
	LeaseDuration time.Duration
	// Observer, when set, receives the mapping's measurements (metrics).
	Observer poller.Observer
	// Tracer, when set, traces every invocation (see package tracing).
	Tracer poller.Tracer
	// BlockedAfter is how long a shard retries the same batch before it is reported blocked.
	// Default (zero) poller.DefaultBlockedAfter.
	BlockedAfter time.Duration
	// Ready, when set, is called once the mapping is running (store read, shards listed, first
	// leases claimed).
	Ready func()
	// Readiness, when set, follows the mapping's readiness: ready while it runs and its store
	// answers (see poller.Readiness).
	Readiness *poller.Readiness
	// MappingUUID is the mapping's UUID (Lambda's EventSourceMappingUUID: the EMF dimension, the
	// S3 destination's object keys). The caller that created the mapping (esm serve) gives it;
	// when empty it is read from the mapping's store (the state file or the lease table), where
	// the mapping's first run creates it: a random version 4 UUID, stable across restarts.
	MappingUUID string
	// OnMappingUUID, when set, is told the mapping's UUID before the mapping starts (metrics
	// created before the store was opened take it from here).
	OnMappingUUID func(string)
}

// pollerOptions are the options every poller of the mapping gets, whatever its store: logging,
// measurements and readiness (the on-failure destination, which needs the mapping's UUID, comes
// from destinationOptions once the store is open).
func pollerOptions(o Options) []poller.Option {
	opts := []poller.Option{poller.WithLogger(o.Logger)}
	if o.Observer != nil {
		opts = append(opts, poller.WithObserver(o.Observer))
	}
	if o.Tracer != nil {
		opts = append(opts, poller.WithTracer(o.Tracer))
	}
	if o.BlockedAfter > 0 {
		opts = append(opts, poller.WithBlockedAfter(o.BlockedAfter))
	}
	if o.Ready != nil {
		opts = append(opts, poller.WithReady(o.Ready))
	}
	if o.Readiness != nil {
		opts = append(opts, poller.WithReadiness(o.Readiness))
	}
	return opts
}

// mappingUUID is o.MappingUUID when the caller gave one, else the one stored returns (it reads
// the store's, or creates and stores one); OnMappingUUID is told either way.
func mappingUUID(ctx context.Context, o Options, stored func(context.Context) (string, error)) (string, error) {
	id := o.MappingUUID
	if id == "" {
		var err error
		if id, err = stored(ctx); err != nil {
			return "", err
		}
	} else if _, err := uuid.Parse(id); err != nil {
		return "", &poller.ValidationError{Field: "MappingUUID", Message: fmt.Sprintf("mapping UUID %q is not a UUID: %v", id, err), Err: err}
	}
	o.Logger.Info("event source mapping", "uuid", id)
	if o.OnMappingUUID != nil {
		o.OnMappingUUID(id)
	}
	return id, nil
}

// destinationOptions is the on-failure destination client, if the mapping has one.
func destinationOptions(o Options, cfg aws.Config, mc poller.Config, mappingUUID string) ([]poller.Option, error) {
	if mc.OnFailureDestination == "" {
		return nil, nil
	}
	d, err := destination(cfg, o.EndpointURL, o.SQSProtocol, mc, mappingUUID)
	if err != nil {
		return nil, err
	}
	return []poller.Option{poller.WithDestination(d)}, nil
}

// destination is the client of the mapping's on-failure destination; an S3 bucket's object keys
// carry the mapping's UUID.
func destination(cfg aws.Config, endpointURL, sqsProtocol string, mc poller.Config, mappingUUID string) (poller.Destination, error) {
	d, err := dlq.New(cfg, mc.OnFailureDestination, dlq.WithEndpointURL(endpointURL), dlq.WithSQSProtocol(sqsProtocol), dlq.WithMappingUUID(mappingUUID))
	if err != nil {
		return nil, &poller.ValidationError{Field: "DestinationConfig", Message: err.Error(), Err: err}
	}
	return d, nil
}

// StartupAttempts is how many times each call of a worker's start-up (the stream, its consumer
// and shards, the lease table and the mapping's UUID) is attempted, with the SDK's back-off:
// a minute on average (at most about two), instead of the SDK's 3 attempts (about a second) that
// every later call keeps. A worker started while AWS is briefly out of reach waits for it rather
// than exiting 1.
const StartupAttempts = 10

// startupKinesis is the Kinesis client of the start-up calls (see StartupAttempts).
func startupKinesis(cfg aws.Config, endpoint string) *kinesis.Client {
	return kinesis.NewFromConfig(cfg, func(ko *kinesis.Options) {
		if endpoint != "" {
			ko.BaseEndpoint = aws.String(endpoint)
		}
		ko.RetryMaxAttempts = StartupAttempts
	})
}

// Run runs the mapping until ctx ends, invoking o.Invoker or, when it is nil, handler in-process.
// Configuration errors wrap poller.ErrInvalidConfig; nothing is written before the stream has been
// found.
func Run(ctx context.Context, o Options, handler any) error {
	o.Logger = cmp.Or(o.Logger, slog.Default())
	o.StateDir = cmp.Or(o.StateDir, ".esm")
	o.FunctionName = cmp.Or(o.FunctionName, "example")
	if o.Stream == "" {
		return &poller.ValidationError{Field: "Stream", Message: "Stream is required: a Kinesis stream name or ARN (--stream or ESM_STREAM)"}
	}
	// Check the mapping's own fields before any network call.
	probe := o.Mapping
	probe.StreamARN = "arn:aws:kinesis:us-east-1:000000000000:stream/probe"
	if strings.HasPrefix(o.Stream, "arn:") {
		probe.StreamARN = o.Stream
	}
	checked, err := probe.Check()
	if err != nil {
		return err
	}

	cfg, err := AWSConfig(ctx, o.Region, o.EndpointURL)
	if err != nil {
		return err
	}
	kin := kinesis.NewFromConfig(cfg, func(ko *kinesis.Options) {
		if o.EndpointURL != "" {
			ko.BaseEndpoint = aws.String(o.EndpointURL)
		}
	})
	kinStart := startupKinesis(cfg, o.EndpointURL)
	stream, consumer, err := splitSource(o.Stream, o.Consumer)
	if err != nil {
		return err
	}
	arn, err := ResolveStreamARN(ctx, kinStart, stream)
	if err != nil {
		return err
	}
	consumerARN := o.Mapping.ConsumerARN
	if consumer != "" {
		if consumerARN, err = ResolveConsumer(ctx, kinStart, arn, consumer, o.RegisterConsumer, o.Logger); err != nil {
			return err
		}
	}
	if checked, err = checked.ForStream(arn, consumerARN); err != nil {
		return err
	}
	if checked.Config().FunctionARN == "" {
		checked = checked.WithFunctionARN(FunctionARN(checked.Stream(), o.FunctionName))
	}
	mc := checked.Config()
	inv := o.Invoker
	if inv == nil {
		inv = inprocess.New(handler, inprocess.WithFunctionARN(mc.FunctionARN), inprocess.WithTimeout(o.FunctionTimeout))
	}

	// The store is opened only once the stream is known to exist: a wrong name writes nothing.
	if _, err := poller.ListShards(ctx, kinStart, arn); err != nil {
		return err
	}
	popts := pollerOptions(o)
	reads := getrecords.Wrap(kin) // GetRecords, an idle shard's once-a-second call, on the lean path
	if o.LeaseTable != "" {
		return runShared(ctx, o, cfg, reads, checked, inv, popts)
	}
	store, err := checkpoint.OpenFile(o.StateDir)
	if err != nil {
		return err
	}
	defer store.Close()
	ms := store.Mapping(checkpoint.MappingKey(arn, mc.FunctionARN))
	id, err := mappingUUID(ctx, o, ms.MappingUUID)
	if err != nil {
		return err
	}
	dopts, err := destinationOptions(o, cfg, mc, id)
	if err != nil {
		return err
	}
	p, err := poller.NewChecked(checked, reads, ms, inv, append(popts, dopts...)...)
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(o.StateDir)
	o.Logger.Info("esm running", "stream", arn, "function", mc.FunctionARN, "state_dir", abs, "pid", os.Getpid(), "consumer", mc.ConsumerARN)
	return p.Run(ctx)
}

// FunctionARN is the ARN of a function named name in the stream's partition, region and account:
// the function of a mapping that names no ARN, which keys its checkpoints.
func FunctionARN(stream poller.StreamARN, name string) string {
	return fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", stream.Partition, stream.Region, stream.Account, name)
}

// AWSConfig loads the SDK configuration, with a pool of connections that is kept for every shard
// read at once (httpClient). With an endpoint URL and no credentials in the environment, it signs
// with fixed local credentials, as local emulators accept any.
func AWSConfig(ctx context.Context, region, endpoint string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithHTTPClient(httpClient())}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	if endpoint != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return cfg, nil
}

type describer interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// ResolveStreamARN returns the ARN of a stream given by name or ARN, checking that it exists.
func ResolveStreamARN(ctx context.Context, c describer, stream string) (string, error) {
	in := &kinesis.DescribeStreamSummaryInput{}
	if strings.HasPrefix(stream, "arn:") {
		in.StreamARN = aws.String(stream)
	} else {
		in.StreamName = aws.String(stream)
	}
	out, err := c.DescribeStreamSummary(ctx, in)
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return "", fmt.Errorf("%w: %s", poller.ErrStreamNotFound, stream)
		}
		return "", fmt.Errorf("describe stream %s: %w", stream, err)
	}
	return aws.ToString(out.StreamDescriptionSummary.StreamARN), nil
}
