package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// streamCreator is the part of the Kinesis client provisioning uses.
type streamCreator interface {
	kinesis.DescribeStreamAPIClient // for the StreamExists waiter
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	CreateStream(ctx context.Context, in *kinesis.CreateStreamInput, optFns ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error)
}

// provisionWait bounds how long a created stream may take to become ACTIVE.
const provisionWait = time.Minute

// ProvisionStream creates the template's stream on the endpoint (--provision) when it does not exist
// yet, with the template's ShardCount (or on demand), and waits until it is ACTIVE. It only acts
// on a stream the template declares (AWS::Kinesis::Stream) and on an explicit endpoint URL: it is
// meant for emulators, never for an account's real streams.
func (c *Config) ProvisionStream(ctx context.Context) error {
	if c.Mapping == nil || c.Mapping.Stream.LogicalID == "" {
		return Usage(errors.New("--provision creates the stream a template declares (AWS::Kinesis::Stream); this mapping's stream is not one"))
	}
	if c.EndpointURL == "" {
		return Usage(errors.New("--provision creates streams on emulators only: give --endpoint-url"))
	}
	kin := kinesis.NewFromConfig(c.AWS) // its BaseEndpoint is the endpoint URL
	created, err := provisionStream(ctx, kin, c.Run.Source.Stream, c.Mapping.Stream.ShardCount, c.Mapping.Stream.StreamMode)
	if err != nil {
		return err
	}
	if created {
		c.Logger.Info("stream created", "stream", c.Run.Source.Stream, "resource", c.Mapping.Stream.LogicalID, "endpoint", c.EndpointURL)
	}
	return nil
}

func provisionStream(ctx context.Context, kin streamCreator, name string, shards int, mode string) (bool, error) {
	_, err := kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	var nf *types.ResourceNotFoundException
	switch {
	case err == nil:
		return false, nil
	case !errors.As(err, &nf):
		return false, fmt.Errorf("describe stream %s: %w", name, err)
	}
	in := &kinesis.CreateStreamInput{StreamName: aws.String(name)}
	if mode == string(types.StreamModeOnDemand) {
		in.StreamModeDetails = &types.StreamModeDetails{StreamMode: types.StreamModeOnDemand}
	} else {
		in.ShardCount = aws.Int32(int32(max(shards, 1)))
	}
	if _, err := kin.CreateStream(ctx, in); err != nil {
		var inUse *types.ResourceInUseException
		if !errors.As(err, &inUse) { // created meanwhile by someone else: fine
			return false, fmt.Errorf("create stream %s: %w", name, err)
		}
	}
	w := kinesis.NewStreamExistsWaiter(kin, func(o *kinesis.StreamExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, time.Second
	})
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, provisionWait); err != nil {
		return false, fmt.Errorf("wait for stream %s: %w", name, err)
	}
	return true, nil
}
