package kinesis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/source"
)

// DescribeStreamAPI is the part of the Kinesis client that describes a stream.
type DescribeStreamAPI interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// ResolveStreamARN returns the ARN of a stream given by name or ARN, checking that it exists; a
// stream that does not is an error wrapping source.ErrNotFound.
func ResolveStreamARN(ctx context.Context, c DescribeStreamAPI, stream string) (string, error) {
	in := &kinesis.DescribeStreamSummaryInput{}
	if strings.HasPrefix(stream, "arn:") {
		in.StreamARN = aws.String(stream)
	} else {
		in.StreamName = aws.String(stream)
	}
	out, err := c.DescribeStreamSummary(ctx, in)
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return "", fmt.Errorf("%w: %s", source.ErrNotFound, stream)
		}
		return "", fmt.Errorf("describe stream %s: %w", stream, err)
	}
	return aws.ToString(out.StreamDescriptionSummary.StreamARN), nil
}
