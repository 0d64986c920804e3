package dlq

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqsschemas "github.com/aws/aws-sdk-go-v2/service/sqs/schemas"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"
)

// Option configures New, NewSQSClient and NewS3Client. A nil Option is ignored.
type Option func(*config)

type config struct {
	endpointURL string
	sqsProtocol string
	mappingUUID string
}

// WithEndpointURL sets where the destination's service is reached (a local emulator; default:
// the SDK's endpoint for the region; "" keeps it).
func WithEndpointURL(url string) Option { return func(c *config) { c.endpointURL = url } }

// WithSQSProtocol sets the protocol of an SQS queue's client: "json" (the SDK's default, for
// real SQS) or "query" (for emulators that speak only the query protocol, such as goaws; real
// SQS accepts it too). New rejects any other value.
func WithSQSProtocol(protocol string) Option { return func(c *config) { c.sqsProtocol = protocol } }

// WithMappingUUID sets the mapping's UUID, which names it in S3 object keys
// (aws/lambda/<UUID>/...), as Lambda's event source mapping UUID does; the service passes the
// one kept with the mapping's progress (default, and for "": "esm").
func WithMappingUUID(id string) Option { return func(c *config) { c.mappingUUID = id } }

func configure(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// aws is cfg with the options' endpoint, for every client built from it ("" keeps cfg's).
func (c config) aws(cfg aws.Config) aws.Config {
	if c.endpointURL != "" {
		cfg.BaseEndpoint = aws.String(c.endpointURL)
	}
	return cfg
}

// NewSQSClient returns the SQS client New uses for a queue: cfg, with the endpoint and the
// protocol of the options (any protocol but "query" is the SDK's JSON protocol).
func NewSQSClient(cfg aws.Config, opts ...Option) *sqs.Client {
	c := configure(opts)
	if c.sqsProtocol != "query" {
		return sqs.NewFromConfig(c.aws(cfg))
	}
	return sqs.NewFromConfig(c.aws(cfg), func(so *sqs.Options) { so.Protocol = awsquery.New(sqsschemas.AmazonSQS) })
}

// NewS3Client returns the S3 client New uses for a bucket: cfg, with the endpoint of the
// options, addressed path-style there (as emulators need).
func NewS3Client(cfg aws.Config, opts ...Option) *s3.Client {
	c := configure(opts)
	return s3.NewFromConfig(c.aws(cfg), func(so *s3.Options) { so.UsePathStyle = c.endpointURL != "" })
}
