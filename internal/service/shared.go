package service

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/internal/getrecords"
	"github.com/kinesis-esm/esm/poller"
)

// Shared are the AWS clients that every mapping of one process uses ("esm serve" runs many).
type Shared struct {
	AWS     aws.Config
	Kinesis *kinesis.Client
	// reads is Kinesis with GetRecords on the lean path, for the pollers (nil: Kinesis).
	reads *getrecords.Kinesis
	// EndpointURL and SQSProtocol are as in Options.
	EndpointURL, SQSProtocol string
}

// NewShared loads the SDK configuration (see AWSConfig) and builds the shared clients.
func NewShared(ctx context.Context, region, endpoint, sqsProtocol string) (*Shared, error) {
	cfg, err := AWSConfig(ctx, region, endpoint)
	if err != nil {
		return nil, err
	}
	kin := kinesis.NewFromConfig(cfg, func(ko *kinesis.Options) {
		if endpoint != "" {
			ko.BaseEndpoint = aws.String(endpoint)
		}
	})
	return &Shared{AWS: cfg, Kinesis: kin, reads: getrecords.Wrap(kin), EndpointURL: endpoint, SQSProtocol: sqsProtocol}, nil
}

// ResolveStream returns the ARN of the stream given by name or ARN, or an error wrapping
// poller.ErrStreamNotFound.
func (s *Shared) ResolveStream(ctx context.Context, stream string) (string, error) {
	return ResolveStreamARN(ctx, s.Kinesis, stream)
}

// ResolveConsumer checks that the enhanced fan-out consumer consumerARN of the stream is
// registered, waiting while it is being created.
func (s *Shared) ResolveConsumer(ctx context.Context, streamARN, consumerARN string) error {
	_, err := ResolveConsumer(ctx, s.Kinesis, streamARN, consumerARN, false, slog.New(slog.DiscardHandler))
	return err
}

// NewPoller builds one mapping's poller on the shared clients: store holds its progress, uuid
// names the mapping in on-failure records, and opts are added to the options every poller gets
// (the on-failure destination client of mc.OnFailureDestination among them).
func (s *Shared) NewPoller(mc poller.Config, uuid string, store poller.Store, inv poller.Invoker, opts ...poller.Option) (*poller.Poller, error) {
	dopts, err := destinationOptions(Options{EndpointURL: s.EndpointURL, SQSProtocol: s.SQSProtocol}, s.AWS, mc, uuid)
	if err != nil {
		return nil, err
	}
	var kin poller.KinesisAPI = s.Kinesis
	if s.reads != nil {
		kin = s.reads
	}
	return poller.New(mc, kin, store, inv, append(opts, dopts...)...)
}
