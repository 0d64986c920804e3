package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/poller"
)

// streamCreator is the part of the Kinesis client provisioning uses.
type streamCreator interface {
	kinesis.DescribeStreamAPIClient // for the StreamExists waiter
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	CreateStream(ctx context.Context, in *kinesis.CreateStreamInput, optFns ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error)
}

// provisionWait bounds how long a created stream may take to become ACTIVE.
const provisionWait = time.Minute

// ErrNotDeclared is Provision's error for a mapping whose stream the template does not declare.
var ErrNotDeclared = errors.New("the template does not declare the stream")

// Provision creates the template's stream through cfg's endpoint when it does not exist yet, with
// the template's ShardCount (or on demand), and waits until it is ACTIVE; created says whether it
// did. A consumer the template declares is then registered by Run (Source.RegisterConsumer). It
// acts only on a stream the template declares (AWS::Kinesis::Stream; otherwise the error wraps
// ErrNotDeclared): it is meant for emulators, and never to be pointed at an account's real
// streams.
func (t *TemplateMapping) Provision(ctx context.Context, cfg aws.Config) (created bool, err error) {
	if t.Template == nil || t.Template.Stream.LogicalID == "" {
		return false, &poller.ValidationError{Field: "Stream", Err: ErrNotDeclared,
			Message: "provisioning creates the stream a template declares (AWS::Kinesis::Stream); this mapping's stream is not one"}
	}
	if c := t.Template.Consumer; c != nil && c.LogicalID != "" {
		t.Mapping.Source.RegisterConsumer = true
	}
	return provisionStream(ctx, kinesis.NewFromConfig(cfg), t.Mapping.Source.Stream, t.Template.Stream.ShardCount, t.Template.Stream.StreamMode)
}

// provisionStream creates the stream name unless it exists, and waits until it is ACTIVE.
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
