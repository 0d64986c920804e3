package runner

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// TestSDKGetRecordsOption: the mappings of a Runner read on one shared lean GetRecords path, and
// with WithSDKGetRecords(true) with the SDK client itself (esm run and esm serve's
// --sdk-getrecords).
func TestSDKGetRecordsOption(t *testing.T) {
	cfg := aws.Config{Region: "us-east-1"}
	found := Resolved{StreamARN: "arn:aws:kinesis:us-east-1:123456789012:stream/s"}
	for _, sdk := range []bool{false, true} {
		r, err := New(cfg, WithSDKGetRecords(sdk))
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.stream(Mapping{}, found)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := r.stream(Mapping{}, found)
		_, isSDK := a.Client().(*kinesis.Client)
		if isSDK != sdk {
			t.Fatalf("WithSDKGetRecords(%v): the stream reads with %T", sdk, a.Client())
		}
		if !sdk && a.Client() != b.Client() {
			t.Fatal("two mappings of one Runner read on two lean paths")
		}
	}
}
