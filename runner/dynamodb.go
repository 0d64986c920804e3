package runner

import (
	"github.com/kinesis-esm/esm/source/dynamostreams"
)

// checkDynamoDB checks a mapping of a DynamoDB stream (its ARN, no consumer, Lambda's starting
// positions) and refuses it: the engine does not read DynamoDB streams yet (see
// dynamostreams.NotReadYet). ok is false for a source that is not a DynamoDB stream.
func checkDynamoDB(m Mapping) (ok bool, err error) {
	if !dynamostreams.IsStreamARN(m.Source.Stream) {
		return false, nil
	}
	if _, err := dynamostreams.ParseStreamARN(m.Source.Stream); err != nil {
		return true, err
	}
	if m.Source.Consumer != "" {
		return true, dynamostreams.RefuseConsumer(m.Source.Stream, m.Source.Consumer)
	}
	if err := dynamostreams.CheckStartingPosition(m.Source.Stream, m.Config.StartingPosition); err != nil {
		return true, err
	}
	return true, dynamostreams.NotReadYet(m.Source.Stream)
}
