package sam

import (
	"github.com/kinesis-esm/esm/source/dynamostreams"
)

// TemplateStreamLabel is the label of the stream ARN that Fn::GetAtt Table.StreamArn gives for an
// AWS::DynamoDB::Table of the template: a stream's label is the time DynamoDB enabled it, known
// only once the table exists, so esm finds the stream by its table (the table's LatestStreamArn)
// when the mapping starts, as it finds a template's consumer by its name.
const TemplateStreamLabel = dynamostreams.TemplateStreamLabel

// tableARN is Fn::GetAtt Table.Arn or Table.StreamArn of an AWS::DynamoDB::Table. A table without
// a StreamSpecification has no stream: its StreamArn is refused, as CloudFormation refuses it.
func (r *resolver) tableARN(at *node, path, id, attr string) (any, error) {
	name, err := r.physicalName(at, path, id)
	if err != nil {
		return nil, err
	}
	table := r.arn("dynamodb", r.opts.region, "table/"+name)
	if attr == "Arn" {
		return table, nil
	}
	if r.property(id, "StreamSpecification") == nil {
		return nil, r.errAt(at, path, "Fn::GetAtt %s.StreamArn: table %s has no stream; give it a StreamSpecification (StreamViewType NEW_AND_OLD_IMAGES, NEW_IMAGE, OLD_IMAGE or KEYS_ONLY)", id, name)
	}
	return table + "/stream/" + TemplateStreamLabel, nil
}

// tableStream describes a DynamoDB mapping's stream: its table's name, linked to the template's
// table resource when it declares it.
func (b *builder) tableStream(sa dynamostreams.StreamARN) Stream {
	s := Stream{Name: sa.Table, Arn: sa.String()}
	if sa.Account == b.r.opts.accountID {
		s.LogicalID = b.r.declared(typeDynamoDBTable, sa.Table)
	}
	return s
}
