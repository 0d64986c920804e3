package dlq

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/kinesis-esm/esm/poller"
)

// SQSAPI is the part of the SQS client a queue destination uses.
type SQSAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// SNSAPI is the part of the SNS client a topic destination uses.
type SNSAPI interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// S3API is the part of the S3 client a bucket destination uses.
type S3API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// Queue sends failure records to an SQS queue as plain messages (no attributes), as Lambda does.
// The queue URL is looked up on first use, so an unreachable queue blocks delivery (retried by the
// poller) rather than the start.
type Queue struct {
	client      SQSAPI
	name, owner string
	mu          sync.Mutex
	url         string
}

// NewQueue returns a destination for the queue with the given ARN.
func NewQueue(client SQSAPI, queueARN string) (*Queue, error) {
	a, err := arn.Parse(queueARN)
	if err != nil || a.Service != "sqs" || a.Resource == "" || strings.Contains(a.Resource, ":") {
		return nil, fmt.Errorf("not an SQS queue ARN: %q", queueARN)
	}
	return &Queue{client: client, name: a.Resource, owner: a.AccountID}, nil
}

func (q *Queue) queueURL(ctx context.Context) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.url != "" {
		return q.url, nil
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(q.name)}
	if q.owner != "" {
		in.QueueOwnerAWSAccountId = aws.String(q.owner)
	}
	out, err := q.client.GetQueueUrl(ctx, in)
	if err != nil {
		return "", fmt.Errorf("get URL of queue %s: %w", q.name, err)
	}
	q.url = aws.ToString(out.QueueUrl)
	return q.url, nil
}

// Deliver implements poller.Destination.
func (q *Queue) Deliver(ctx context.Context, f poller.FailureRecord) error {
	url, err := q.queueURL(ctx)
	if err != nil {
		return err
	}
	if _, err := q.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(string(Message(f)))}); err != nil {
		return fmt.Errorf("send to queue %s: %w", q.name, err)
	}
	return nil
}

// Topic publishes failure records to an SNS topic, without subject or attributes, as Lambda does.
type Topic struct {
	client   SNSAPI
	topicARN string
}

// NewTopic returns a destination for the topic.
func NewTopic(client SNSAPI, topicARN string) *Topic {
	return &Topic{client: client, topicARN: topicARN}
}

// Deliver implements poller.Destination.
func (t *Topic) Deliver(ctx context.Context, f poller.FailureRecord) error {
	if _, err := t.client.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(t.topicARN), Message: aws.String(string(Message(f)))}); err != nil {
		return fmt.Errorf("publish to topic %s: %w", t.topicARN, err)
	}
	return nil
}

// Bucket writes failure records, with the invocation payload, as objects under Lambda's key layout.
type Bucket struct {
	client      S3API
	bucket      string
	mappingUUID string
}

// NewBucket returns a destination for the bucket named by arn:aws:s3:::<bucket>.
func NewBucket(client S3API, bucketARN, mappingUUID string) (*Bucket, error) {
	a, err := arn.Parse(bucketARN)
	if err != nil || a.Service != "s3" || a.Region != "" || a.AccountID != "" || a.Resource == "" || strings.ContainsAny(a.Resource, "/:") {
		return nil, fmt.Errorf("not an S3 bucket ARN: %q", bucketARN)
	}
	return &Bucket{client: client, bucket: a.Resource, mappingUUID: mappingUUID}, nil
}

// Deliver implements poller.Destination.
func (b *Bucket) Deliver(ctx context.Context, f poller.FailureRecord) error {
	key := S3Key(b.mappingUUID, f)
	body := S3Object(f)
	if _, err := b.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key),
		Body: bytes.NewReader(body), ContentType: aws.String("application/json")}); err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", b.bucket, key, err)
	}
	return nil
}

// New returns the destination for an on-failure ARN: an SQS queue, an SNS topic or an S3 bucket.
func New(cfg aws.Config, destination string, opts ...Option) (poller.Destination, error) {
	o := configure(opts)
	a, err := arn.Parse(destination)
	if err != nil {
		return nil, fmt.Errorf("on-failure destination %q is not an ARN", destination)
	}
	switch a.Service {
	case "sqs":
		switch o.sqsProtocol {
		case "", "json", "query":
		default:
			return nil, fmt.Errorf("SQS protocol %q: want json or query", o.sqsProtocol)
		}
		return NewQueue(NewSQSClient(cfg, opts...), destination)
	case "sns":
		return NewTopic(sns.NewFromConfig(o.aws(cfg)), destination), nil
	case "s3":
		id := o.mappingUUID
		if id == "" {
			id = "esm"
		}
		return NewBucket(NewS3Client(cfg, opts...), destination, id)
	}
	return nil, fmt.Errorf("on-failure destination %q: Lambda accepts an SQS queue, an SNS topic or an S3 bucket", destination)
}
