package dynamostreams

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/source"
)

type tables map[string]*types.TableDescription

func (t tables) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	d, ok := t[aws.ToString(in.TableName)]
	if !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
	}
	return &dynamodb.DescribeTableOutput{Table: d}, nil
}

// TestResolve: a template's table stream is the table's latest stream; a real stream ARN is
// itself, without a call; a table without a stream, or none at all, is not found.
func TestResolve(t *testing.T) {
	const latest = "arn:aws:dynamodb:us-east-1:1:table/orders/stream/2026-12-07T20:00:00.000"
	ddb := tables{
		"arn:aws:dynamodb:us-east-1:1:table/orders": {LatestStreamArn: aws.String(latest),
			StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}},
		"arn:aws:dynamodb:us-east-1:1:table/plain": {},
	}
	got, err := Resolve(context.Background(), ddb, "arn:aws:dynamodb:us-east-1:1:table/orders/stream/"+TemplateStreamLabel)
	if err != nil || got != latest {
		t.Fatalf("template stream: %q, %v", got, err)
	}
	if got, err := Resolve(context.Background(), nil, latest); err != nil || got != latest {
		t.Fatalf("a stream ARN: %q, %v", got, err)
	}
	for _, table := range []string{"plain", "missing"} {
		_, err := Resolve(context.Background(), ddb, "arn:aws:dynamodb:us-east-1:1:table/"+table+"/stream/"+TemplateStreamLabel)
		if !errors.Is(err, source.ErrNotFound) {
			t.Fatalf("%s: %v, want ErrNotFound", table, err)
		}
	}
}
