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
