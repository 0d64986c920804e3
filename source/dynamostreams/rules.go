package dynamostreams

import (
	"fmt"

	"github.com/kinesis-esm/esm/source"
)

// StartingPositions are the starting positions Lambda accepts for a DynamoDB stream: AT_TIMESTAMP
// is Kinesis' (and Kafka's) only, although the DynamoDB Streams API has it since 2026-10.
var StartingPositions = []string{string(source.TrimHorizon), string(source.Latest)}

// RefuseConsumer is the error of an enhanced fan-out consumer given for a DynamoDB stream's
// mapping (a consumer ARN, or a consumer to register): DynamoDB Streams has none.
func RefuseConsumer(streamARN, consumer string) error {
	return &source.ValidationError{Field: "ConsumerARN", Message: fmt.Sprintf(
		"DynamoDB Streams has no enhanced fan-out consumers: %s cannot be read through consumer %q; remove it (a DynamoDB stream is polled, four times a second per shard)", streamARN, consumer)}
}
