package sam

import kinesissrc "github.com/kinesis-esm/esm/source/kinesis"

// StreamConsumer is the enhanced fan-out consumer a mapping reads through.
type StreamConsumer struct {
	// LogicalID is set when the consumer is an AWS::Kinesis::StreamConsumer of the template. Its
	// Arn then ends in ":0": the creation time is known only once it is registered, so esm finds
	// it by Name.
	LogicalID string `json:"LogicalId,omitempty"`
	Name      string `json:"Name"`
	Arn       string `json:"Arn"`
}

// source parses the mapping's EventSourceArn: a stream ARN, or a consumer ARN (the ConsumerARN of
// an AWS::Kinesis::StreamConsumer, through !GetAtt or !Ref) and its stream.
func (b *builder) source(src string) (kinesissrc.StreamARN, *StreamConsumer, error) {
	if !kinesissrc.IsConsumerARN(src) {
		sa, err := kinesissrc.ParseStreamARN(src)
		return sa, nil, err
	}
	ca, err := kinesissrc.ParseConsumerARN(src)
	if err != nil {
		return kinesissrc.StreamARN{}, nil, err
	}
	c := &StreamConsumer{Name: ca.Name, Arn: src}
	r := b.r
	for _, id := range r.logicalIDs(typeStreamConsumer) {
		if ok, _ := r.exists(id); !ok {
			continue
		}
		if arn, err := r.getAtt(nil, "", id, "ConsumerARN"); err == nil && arn == src {
			c.LogicalID = id
			break
		}
	}
	return ca.Stream, c, nil
}
