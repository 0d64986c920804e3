package dynamostreams

import (
	"fmt"

	"github.com/kinesis-esm/esm/source"
)

// StartingPositions are the starting positions Lambda accepts for a DynamoDB stream: AT_TIMESTAMP
// is Kinesis' (and Kafka's) only, although the DynamoDB Streams API has it since 2026-10.
var StartingPositions = []string{string(source.TrimHorizon), string(source.Latest)}

// CheckStartingPosition refuses AT_TIMESTAMP for a DynamoDB stream's mapping with Lambda's
// InvalidParameterValueException message; streamARN of another kind, and the other positions
// (whose missing or unknown values the settings' validation words), pass.
func CheckStartingPosition(streamARN, position string) error {
	if !IsStreamARN(streamARN) || position != string(source.AtTimestamp) {
		return nil
	}
	return &source.ValidationError{Field: "StartingPosition", Message: "Unsupported starting position for arn type: " + streamARN}
}

// RefuseConsumer is the error of an enhanced fan-out consumer given for a DynamoDB stream's
// mapping (a consumer ARN, or a consumer to register): DynamoDB Streams has none.
func RefuseConsumer(streamARN, consumer string) error {
	return &source.ValidationError{Field: "ConsumerARN", Message: fmt.Sprintf(
		"DynamoDB Streams has no enhanced fan-out consumers: %s cannot be read through consumer %q; remove it (a DynamoDB stream is polled, four times a second per shard)", streamARN, consumer)}
}

// NotReadYet is the refusal of a valid DynamoDB stream's mapping by a build whose engine reads
// shards with Kinesis' client (poller.Source's Open and Read are not used by its reader yet): the
// mapping is checked, then refused, rather than started to fail.
func NotReadYet(streamARN string) error {
	return &source.ValidationError{Field: "EventSourceArn", Message: fmt.Sprintf(
		"esm does not read DynamoDB streams yet: %s is valid, but this build's engine reads Kinesis streams only.", streamARN)}
}
