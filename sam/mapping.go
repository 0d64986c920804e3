package sam

import (
	"slices"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// Mapping is one resolved Kinesis event source mapping: the mapping's settings with Lambda's
// defaults applied, under the names CreateEventSourceMapping returns, plus what esm needs to know
// about the function and the stream.
type Mapping struct {
	// ID is "<function logical ID>/<event name>" for a SAM event, "<function>/<ESM logical ID>" for
	// an AWS::Lambda::EventSourceMapping.
	ID string `json:"Id"`
	// Source is AWS::Serverless::Function (a SAM event) or AWS::Lambda::EventSourceMapping.
	Source   string   `json:"Source"`
	Function Function `json:"Function"`
	Stream   Stream   `json:"Stream"`
	// Consumer is the enhanced fan-out consumer the mapping reads through, when its source is one.
	Consumer *StreamConsumer `json:"Consumer,omitempty"`

	EventSourceArn                 string            `json:"EventSourceArn"`
	StartingPosition               string            `json:"StartingPosition"`
	StartingPositionTimestamp      *time.Time        `json:"StartingPositionTimestamp,omitempty"`
	BatchSize                      int               `json:"BatchSize"`
	MaximumBatchingWindowInSeconds int               `json:"MaximumBatchingWindowInSeconds"`
	ParallelizationFactor          int               `json:"ParallelizationFactor"`
	BisectBatchOnFunctionError     bool              `json:"BisectBatchOnFunctionError"`
	MaximumRetryAttempts           int               `json:"MaximumRetryAttempts"`
	MaximumRecordAgeInSeconds      int               `json:"MaximumRecordAgeInSeconds"`
	TumblingWindowInSeconds        int               `json:"TumblingWindowInSeconds"`
	FunctionResponseTypes          []string          `json:"FunctionResponseTypes"`
	DestinationConfig              DestinationConfig `json:"DestinationConfig"`
	FilterCriteria                 *FilterCriteria   `json:"FilterCriteria,omitempty"`
	KMSKeyArn                      string            `json:"KMSKeyArn,omitempty"`
	MetricsConfig                  *MetricsConfig    `json:"MetricsConfig,omitempty"`
	Enabled                        bool              `json:"Enabled"`

	event string // the event name or the ESM's logical ID
	line  int
	path  string
}

// Function is the mapped function as the template declares it.
type Function struct {
	// LogicalID is empty when an AWS::Lambda::EventSourceMapping names a function outside the template.
	LogicalID    string `json:"LogicalId,omitempty"`
	Type         string `json:"Type,omitempty"`
	FunctionName string `json:"FunctionName"`
	FunctionArn  string `json:"FunctionArn"`
	// Role is the execution role's ARN: the event's invokeIdentityArn. For a SAM function without a
	// Role, the role SAM creates, <LogicalId>Role.
	Role          string   `json:"Role,omitempty"`
	Handler       string   `json:"Handler,omitempty"`
	Runtime       string   `json:"Runtime,omitempty"`
	CodeUri       string   `json:"CodeUri,omitempty"`
	ImageUri      string   `json:"ImageUri,omitempty"`
	PackageType   string   `json:"PackageType,omitempty"`
	Architectures []string `json:"Architectures,omitempty"`
	// Timeout is in seconds, 1–900. Default 3, as in SAM.
	Timeout int `json:"Timeout"`
	// MemorySize is in MB, 128–10240. Default 128.
	MemorySize                   int               `json:"MemorySize"`
	ReservedConcurrentExecutions *int              `json:"ReservedConcurrentExecutions,omitempty"`
	Environment                  map[string]string `json:"Environment,omitempty"`
}

// Stream is the mapping's stream.
type Stream struct {
	// LogicalID is set when the stream is an AWS::Kinesis::Stream of the template.
	LogicalID string `json:"LogicalId,omitempty"`
	Name      string `json:"Name"`
	Arn       string `json:"Arn"`
	// ShardCount and StreamMode are the template's, for a stream it declares.
	ShardCount int    `json:"ShardCount,omitempty"`
	StreamMode string `json:"StreamMode,omitempty"`
}

// DestinationConfig is where discarded batches are described.
type DestinationConfig struct {
	OnFailure OnFailure `json:"OnFailure"`
}

// OnFailure is the on-failure destination: an SQS queue, an SNS topic or an S3 bucket.
type OnFailure struct {
	Destination string `json:"Destination,omitempty"`
	// Type is SAM's DestinationConfig.OnFailure.Type (SQS, SNS, S3 or Kafka), when given; otherwise
	// derived from the ARN.
	Type string `json:"Type,omitempty"`
	// QueueUrl is the queue's URL on the endpoint in use, for an SQS destination.
	QueueUrl string `json:"QueueUrl,omitempty"`
	// Bucket is the bucket's name, for an S3 destination.
	Bucket string `json:"Bucket,omitempty"`
}

// FilterCriteria are the mapping's event filters.
type FilterCriteria struct {
	Filters []Filter `json:"Filters"`
}

// Filter is one filter pattern, a JSON document.
type Filter struct {
	Pattern string `json:"Pattern"`
}

// MetricsConfig lists the opt-in mapping metrics.
type MetricsConfig struct {
	Metrics []string `json:"Metrics"`
}

// PollerConfig is the mapping's settings as poller.Config, for poller.New. The polling cadence
// fields (PollInterval, ShardSyncInterval, …) are left zero: they are esm's, not the template's.
// The function is not a setting: its ARN is m.Function.FunctionArn (runner.Function.ARN).
func (m *Mapping) PollerConfig() poller.Config {
	retries, age := m.MaximumRetryAttempts, m.MaximumRecordAgeInSeconds
	c := poller.Config{
		BatchSize:                  m.BatchSize,
		MaximumBatchingWindow:      time.Duration(m.MaximumBatchingWindowInSeconds) * time.Second,
		StartingPosition:           m.StartingPosition,
		Disabled:                   !m.Enabled,
		MaximumRetryAttempts:       &retries,
		MaximumRecordAgeInSeconds:  &age,
		BisectBatchOnFunctionError: m.BisectBatchOnFunctionError,
		ReportBatchItemFailures:    slices.Contains(m.FunctionResponseTypes, reportBatchItemFailures),
		OnFailureDestination:       m.DestinationConfig.OnFailure.Destination,
		ParallelizationFactor:      m.ParallelizationFactor,
		TumblingWindow:             time.Duration(m.TumblingWindowInSeconds) * time.Second,
	}
	if m.StartingPositionTimestamp != nil {
		c.StartingPositionTimestamp = *m.StartingPositionTimestamp
	}
	if m.FilterCriteria != nil {
		for _, f := range m.FilterCriteria.Filters {
			c.FilterPatterns = append(c.FilterPatterns, f.Pattern)
		}
	}
	return c
}
