package dlq

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// TestDestinationARNs: New, NewQueue and NewBucket take what Lambda's ARNs look like and refuse
// the rest with the messages the service's start reports.
func TestDestinationARNs(t *testing.T) {
	for _, c := range []struct{ arn, name, owner string }{
		{"arn:aws:sqs:us-east-1:123456789012:failures", "failures", "123456789012"},
		{"arn:aws-cn:sqs:cn-north-1:111122223333:f.fifo", "f.fifo", "111122223333"},
		{"arn:aws:sqs:us-east-1::local", "local", ""},
	} {
		q, err := NewQueue(nil, c.arn)
		if err != nil || q.name != c.name || q.owner != c.owner {
			t.Errorf("NewQueue(%s) = %+v, %v; want queue %s of %q", c.arn, q, err, c.name, c.owner)
		}
	}
	for _, bad := range []string{"failures", "arn:aws:sqs:us-east-1:1:", "arn:aws:sqs:us-east-1:1:a:b", "arn:aws:sns:us-east-1:1:t"} {
		if _, err := NewQueue(nil, bad); err == nil || err.Error() != `not an SQS queue ARN: "`+bad+`"` {
			t.Errorf("NewQueue(%s): %v", bad, err)
		}
	}
	for arn, name := range map[string]string{"arn:aws:s3:::failures": "failures", "arn:aws-us-gov:s3:::gov-failures": "gov-failures"} {
		b, err := NewBucket(nil, arn, "id")
		if err != nil || b.bucket != name {
			t.Errorf("NewBucket(%s) = %+v, %v; want bucket %s", arn, b, err, name)
		}
	}
	for _, bad := range []string{"failures", "arn:aws:s3:::", "arn:aws:s3:::b/key", "arn:aws:s3:us-east-1:1:b", "arn:aws:sqs:::b"} {
		if _, err := NewBucket(nil, bad, "id"); err == nil || err.Error() != `not an S3 bucket ARN: "`+bad+`"` {
			t.Errorf("NewBucket(%s): %v", bad, err)
		}
	}
	cfg := aws.Config{Region: "us-east-1"}
	for bad, want := range map[string]string{
		"failures": `on-failure destination "failures" is not an ARN`,
		"arn:aws:lambda:us-east-1:123456789012:function:f": `on-failure destination "arn:aws:lambda:us-east-1:123456789012:function:f": Lambda accepts an SQS queue, an SNS topic or an S3 bucket`,
	} {
		if _, err := New(cfg, bad); err == nil || err.Error() != want {
			t.Errorf("New(%s): %v, want %q", bad, err, want)
		}
	}
	if d, err := New(cfg, "arn:aws:sns:us-east-1:123456789012:t", WithEndpointURL("http://127.0.0.1:1")); err != nil || d.(*Topic).topicARN != "arn:aws:sns:us-east-1:123456789012:t" {
		t.Errorf("New(topic) = %v, %v", d, err)
	}
}

// TestEndpointInConfig: the endpoint option reaches the clients through their aws.Config.
func TestEndpointInConfig(t *testing.T) {
	cfg := aws.Config{Region: "us-east-1"}
	if got := aws.ToString(NewSQSClient(cfg, WithEndpointURL("http://127.0.0.1:9324")).Options().BaseEndpoint); got != "http://127.0.0.1:9324" {
		t.Errorf("SQS client's endpoint %q", got)
	}
	s3c := NewS3Client(cfg, WithEndpointURL("http://127.0.0.1:9000")).Options()
	if aws.ToString(s3c.BaseEndpoint) != "http://127.0.0.1:9000" || !s3c.UsePathStyle {
		t.Errorf("S3 client: endpoint %q, path style %v", aws.ToString(s3c.BaseEndpoint), s3c.UsePathStyle)
	}
	if o := NewS3Client(cfg).Options(); o.BaseEndpoint != nil || o.UsePathStyle {
		t.Errorf("S3 client without an endpoint: %q, path style %v", aws.ToString(o.BaseEndpoint), o.UsePathStyle)
	}
}
