package sam

// mappingKind describes one of the two resources a Kinesis mapping is declared with, and the
// ways their specifications differ: where the stream's ARN is, which properties apply, and how
// each words what it refuses.
type mappingKind struct {
	// source is Mapping.Source: the resource type.
	source string
	// sourceKey is the property that holds the stream's (or consumer's) ARN.
	sourceKey string
	// missingSource is the message for a mapping without one.
	missingSource string
	// unknownFilterKey is the message (with the key) for a key of FilterCriteria other than
	// Filters.
	unknownFilterKey string
	// destinationType reports whether DestinationConfig.OnFailure may have a Type (SAM's).
	destinationType bool
}

// The two kinds of Kinesis mapping a template declares.
var (
	// samEvent is an event of Type: Kinesis of an AWS::Serverless::Function, in SAM's words.
	samEvent = mappingKind{
		source:           typeServerlessFunction,
		sourceKey:        "Stream",
		missingSource:    "Missing required property 'Stream': the ARN of the Kinesis stream",
		unknownFilterKey: "FilterCriteria field has a wrong format: %s is not allowed; the only key is Filters",
		destinationType:  true,
	}
	// esmResource is an AWS::Lambda::EventSourceMapping, in CloudFormation's and Lambda's words.
	esmResource = mappingKind{
		source:           typeEventSourceMapping,
		sourceKey:        "EventSourceArn",
		missingSource:    "Unrecognized event source.",
		unknownFilterKey: "Encountered unsupported property FilterCriteria.%s: the only property is Filters",
	}
)

// Properties of a SAM Kinesis event (spec §1.5), in SAM's documentation order; a SAM DynamoDB
// event has the same.
var kinesisEventProperties = []string{
	"Stream", "StartingPosition", "StartingPositionTimestamp", "BatchSize", "BisectBatchOnFunctionError",
	"DestinationConfig", "Enabled", "FilterCriteria", "FunctionResponseTypes", "KmsKeyArn",
	"MaximumBatchingWindowInSeconds", "MaximumRecordAgeInSeconds", "MaximumRetryAttempts",
	"MetricsConfig", "ParallelizationFactor", "TumblingWindowInSeconds",
}

// Properties of AWS::Lambda::EventSourceMapping that apply to a Kinesis or DynamoDB source.
var esmKinesisProperties = []string{
	"EventSourceArn", "FunctionName", "StartingPosition", "StartingPositionTimestamp", "BatchSize",
	"BisectBatchOnFunctionError", "DestinationConfig", "Enabled", "FilterCriteria", "FunctionResponseTypes",
	"KmsKeyArn", "MaximumBatchingWindowInSeconds", "MaximumRecordAgeInSeconds", "MaximumRetryAttempts",
	"MetricsConfig", "ParallelizationFactor", "TumblingWindowInSeconds", "Tags",
}

// Properties of AWS::Lambda::EventSourceMapping for other kinds of source.
var esmOtherProperties = []string{
	"AmazonManagedKafkaEventSourceConfig", "DocumentDBEventSourceConfig", "LoggingConfig",
	"ProvisionedPollerConfig", "Queues", "ScalingConfig", "SchemaRegistryConfig", "SelfManagedEventSource",
	"SelfManagedKafkaEventSourceConfig", "SourceAccessConfigurations", "Topics",
}
