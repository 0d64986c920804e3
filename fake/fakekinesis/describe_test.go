package fakekinesis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
)

func TestDescribeStreamSummary(t *testing.T) {
	f := fakekinesis.New()
	arn := f.CreateStream("s", 2)
	ctx := context.Background()
	out, err := f.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamARN: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	d := out.StreamDescriptionSummary
	if aws.ToString(d.StreamName) != "s" || aws.ToString(d.StreamARN) != arn || d.StreamStatus != types.StreamStatusActive ||
		aws.ToInt32(d.RetentionPeriodHours) != 24 || aws.ToInt32(d.OpenShardCount) != 2 {
		t.Fatalf("summary %+v", d)
	}
	f.SetRetention("s", 48*time.Hour)
	out, err = f.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
	if err != nil || aws.ToInt32(out.StreamDescriptionSummary.RetentionPeriodHours) != 48 {
		t.Fatalf("after SetRetention(48h): %v %+v", err, out)
	}
	_, err = f.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("missing")})
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Fatalf("unknown stream: %v, want ResourceNotFoundException", err)
	}
	if n := f.Calls(fakekinesis.OpDescribeStreamSummary); n != 3 {
		t.Fatalf("Calls = %d, want 3", n)
	}
	f.Inject(func(op string, _ any) error {
		if op == fakekinesis.OpDescribeStreamSummary {
			return fakekinesis.ErrInternal()
		}
		return nil
	})
	if _, err := f.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")}); err == nil {
		t.Fatal("injected error not returned")
	}
}
