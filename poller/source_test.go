package poller

import (
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// kinesisSource is the Kinesis source of the stream streamARN read with kin; it panics when the
// source is refused (the tests' ARNs are valid).
func kinesisSource(kin kinesissrc.API, streamARN string, opts ...kinesissrc.Option) Source {
	s, err := kinesissrc.New(kin, streamARN, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// testStreamARN is the stream of tests that read no records.
const testStreamARN = "arn:aws:kinesis:us-east-1:111111111111:stream/s"

// kinesisEncoder is the event encoder of a mapping that reads the Kinesis stream streamARN (whose
// region is the events' awsRegion) with role as the events' invokeIdentityArn, through a consumer
// (aggregates de-aggregated) when consumer is true.
func kinesisEncoder(streamARN, role string, consumer bool) *eventEncoder {
	opts := []kinesissrc.Option{kinesissrc.WithInvokeIdentity(role)}
	if consumer {
		opts = append(opts, kinesissrc.WithConsumer(streamARN+"/consumer/c:1"))
	}
	return newEventEncoder(kinesisSource(nil, streamARN, opts...), nil)
}
