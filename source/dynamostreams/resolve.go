package dynamostreams

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/source"
)

// DescribeTableAPI is the part of the DynamoDB client that finds a table's stream.
// *dynamodb.Client has it.
type DescribeTableAPI interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Resolve returns the stream ARN streamARN stands for: itself, or, for the stream of a template's
// table (label TemplateStreamLabel), its table's latest stream (DescribeTable's LatestStreamArn).
// A table that does not exist, or has no stream, is an error wrapping source.ErrNotFound.
func Resolve(ctx context.Context, ddb DescribeTableAPI, streamARN string) (string, error) {
	a, err := ParseStreamARN(streamARN)
	if err != nil || a.Label != TemplateStreamLabel {
		return streamARN, err
	}
	table := fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", a.Partition, a.Region, a.Account, a.Table)
	out, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return "", fmt.Errorf("%w: table %s (the stream of %s): %w", source.ErrNotFound, a.Table, streamARN, err)
		}
		return "", fmt.Errorf("find the stream of table %s: %w", a.Table, err)
	}
	latest := ""
	if t := out.Table; t != nil && t.StreamSpecification != nil && aws.ToBool(t.StreamSpecification.StreamEnabled) {
		latest = aws.ToString(t.LatestStreamArn)
	}
	if latest == "" {
		return "", fmt.Errorf("%w: table %s has no stream enabled (StreamSpecification)", source.ErrNotFound, a.Table)
	}
	return latest, nil
}
