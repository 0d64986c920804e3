package runner

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source/dynamostreams"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// The two kinds of source a mapping reads: a Kinesis stream (source/kinesis, the default) and a
// DynamoDB table's stream (source/dynamostreams), told apart by the ARN's service. Everything
// after the source is made is the same for both.

// isDynamoDB reports whether the mapping reads a DynamoDB stream.
func isDynamoDB(m Mapping) bool { return dynamostreams.IsStreamARN(m.Source.Stream) }

// resolveDynamoDB finds the DynamoDB stream of the mapping: its ARN, or the latest stream of a
// template's table (dynamostreams.Resolve). A consumer is refused: DynamoDB Streams has none.
func (r *Runner) resolveDynamoDB(ctx context.Context, m Mapping) (string, error) {
	if _, err := dynamostreams.ParseStreamARN(m.Source.Stream); err != nil {
		return "", err
	}
	if m.Source.Consumer != "" {
		return "", dynamostreams.RefuseConsumer(m.Source.Stream, m.Source.Consumer)
	}
	return dynamostreams.Resolve(ctx, r.ddbStart, m.Source.Stream)
}

// Source is the mapping's source as found (Resolve): its DynamoDB stream, or its Kinesis stream
// (read through its consumer when found has one, its events' invokeIdentityArn the function's
// role), read with the Runner's clients.
func (r *Runner) Source(m Mapping, found Resolved) (poller.Source, error) {
	if dynamostreams.IsStreamARN(found.StreamARN) {
		return dynamostreams.New(r.streams, found.StreamARN, dynamostreams.WithLogger(m.Hooks.Logger))
	}
	return r.stream(m, found)
}

// exists checks that the stream found exists (a wrong name writes nothing), with the start-up
// clients.
func (r *Runner) exists(ctx context.Context, found Resolved) error {
	var err error
	if dynamostreams.IsStreamARN(found.StreamARN) {
		_, err = dynamostreams.ListShards(ctx, r.streamsStart, found.StreamARN)
	} else {
		_, err = kinesissrc.ListShards(ctx, r.kinStart, found.StreamARN)
	}
	return err
}

// openFunction opens the mapping's function, once for all its starts (Function.Open), and
// refuses one that cannot take src's events: a Go handler of Kinesis events in this process for a
// DynamoDB stream (poller.CheckInvoker).
func openFunction(m Mapping, src poller.Source) (poller.Invoker, error) {
	inv, err := m.Function.Open(m.Hooks.Logger) // in process: nothing to close
	if err != nil {
		return nil, err
	}
	return inv, poller.CheckInvoker(src, inv)
}

// consumerOf is the consumer src is read through ("" when polled).
func consumerOf(src poller.Source) string {
	if s, ok := src.(poller.Subscriber); ok {
		return s.ConsumerARN()
	}
	return ""
}

// functionARN is the ARN of the function named name in the partition, region and account of the
// stream streamARN (a Kinesis stream's or a DynamoDB stream's).
func functionARN(streamARN, name string) (string, error) {
	if !dynamostreams.IsStreamARN(streamARN) {
		stream, err := kinesissrc.ParseStreamARN(streamARN)
		if err != nil {
			return "", err
		}
		return stream.FunctionARN(name), nil
	}
	a, err := arn.Parse(streamARN)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", a.Partition, a.Region, a.AccountID, name), nil
}
