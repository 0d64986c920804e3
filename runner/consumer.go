package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// ErrConsumerNotFound is returned by Run when the enhanced fan-out consumer does not exist and was
// not to be registered.
var ErrConsumerNotFound = errors.New("stream consumer not found")

// consumerWait bounds how long a consumer may take to become ACTIVE after registration.
const consumerWait = 2 * time.Minute

// consumerAPI is the part of the Kinesis client that finds and registers consumers.
type consumerAPI interface {
	DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error)
	RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput, optFns ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error)
}

// splitSource separates a consumer ARN given as the stream (Lambda's EventSourceArn may be one):
// it returns the stream ARN to look up and the consumer.
func splitSource(stream, consumer string) (string, string, error) {
	if !kinesissrc.IsConsumerARN(stream) {
		return stream, consumer, nil
	}
	ca, err := kinesissrc.ParseConsumerARN(stream)
	if err != nil {
		return "", "", err
	}
	switch consumer {
	case "":
		consumer = stream
	case stream, ca.Name:
	default:
		return "", "", &poller.ValidationError{Field: "Consumer", Message: fmt.Sprintf(
			"the stream %s is a consumer ARN, and the consumer %s is another", stream, consumer)}
	}
	return ca.Stream.String(), consumer, nil
}

// resolveConsumer returns the ARN of an ACTIVE consumer of the stream, given by ARN or by name.
// With register, a consumer name that is not registered yet is registered (RegisterStreamConsumer)
// and waited for until ACTIVE; a consumer being created is waited for in any case.
func resolveConsumer(ctx context.Context, c consumerAPI, streamARN, consumer string, register bool, log *slog.Logger) (string, error) {
	in := &kinesis.DescribeStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String(consumer)}
	if kinesissrc.IsConsumerARN(consumer) {
		ca, err := kinesissrc.ParseConsumerARN(consumer)
		if err != nil {
			return "", err
		}
		if ca.Stream.String() != streamARN {
			return "", &poller.ValidationError{Field: "Consumer", Message: fmt.Sprintf(
				"consumer %s is not a consumer of stream %s", consumer, streamARN)}
		}
		in = &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(consumer)}
		register = false // an ARN names a consumer that was registered
	}
	deadline := time.Now().Add(consumerWait)
	for registered := false; ; {
		out, err := c.DescribeStreamConsumer(ctx, in)
		var nf *types.ResourceNotFoundException
		switch {
		case errors.As(err, &nf) && register && !registered:
			if err := registerConsumer(ctx, c, streamARN, consumer); err != nil {
				return "", err
			}
			log.Info("stream consumer registered", "stream", streamARN, "consumer", consumer)
			registered = true
			continue
		case errors.As(err, &nf):
			return "", fmt.Errorf("%w: %s of %s (register it, or pass --register-consumer NAME)", ErrConsumerNotFound, consumer, streamARN)
		case err != nil:
			return "", fmt.Errorf("describe stream consumer %s: %w", consumer, err)
		}
		d := out.ConsumerDescription
		switch d.ConsumerStatus {
		case types.ConsumerStatusActive:
			return aws.ToString(d.ConsumerARN), nil
		case types.ConsumerStatusDeleting:
			return "", fmt.Errorf("%w: %s is being deleted", ErrConsumerNotFound, aws.ToString(d.ConsumerARN))
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("stream consumer %s still %s after %s", consumer, d.ConsumerStatus, consumerWait)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// registerConsumer registers a consumer; one that another worker registered meanwhile is fine.
func registerConsumer(ctx context.Context, c consumerAPI, streamARN, name string) error {
	_, err := c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String(name)})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("register stream consumer %s on %s: %w", name, streamARN, err)
	}
	return nil
}
