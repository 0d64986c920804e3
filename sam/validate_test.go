package sam

import (
	"errors"
	"strings"
	"testing"

	"github.com/kinesis-esm/esm/poller"
)

const stream = "arn:aws:kinesis:us-east-1:123456789012:stream/s"

// eventTemplate is a SAM function with one Kinesis event whose properties are props (one per line,
// written from line 13). Without Stream and StartingPosition in props, valid ones come first, so the
// first line of props is line 15.
func eventTemplate(props string) string {
	var b strings.Builder
	b.WriteString("Transform: AWS::Serverless-2016-10-31\nResources:\n  Fn:\n    Type: AWS::Serverless::Function\n" +
		"    Properties:\n      Handler: bootstrap\n      Runtime: provided.al2023\n      CodeUri: .\n      Events:\n" +
		"        K:\n          Type: Kinesis\n          Properties:\n")
	if !strings.Contains(props, "Stream:") && !strings.Contains(props, "StartingPosition:") {
		props = "Stream: " + stream + "\nStartingPosition: LATEST\n" + props
	}
	for _, l := range strings.Split(strings.TrimRight(props, "\n"), "\n") {
		b.WriteString("            " + l + "\n")
	}
	return b.String()
}

// functionTemplate is a SAM function whose extra properties (from line 6) are props, with a valid
// Kinesis event after them.
func functionTemplate(props string) string {
	var b strings.Builder
	b.WriteString("Transform: AWS::Serverless-2016-10-31\nResources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Properties:\n")
	for _, l := range strings.Split(strings.TrimRight(props, "\n"), "\n") {
		b.WriteString("      " + l + "\n")
	}
	b.WriteString("      Events:\n        K:\n          Type: Kinesis\n          Properties:\n            Stream: " + stream +
		"\n            StartingPosition: LATEST\n")
	return b.String()
}

const ev = "t.yaml:15: Resources.Fn.Properties.Events.K.Properties."

// flagNames are the esm command's names for the inputs messages name (cmd/esm/internal/cli gives them
// to Load): with them, a message reads as the command prints it.
var flagNames = map[Input]string{
	InputParameterOverrides: "--parameter-overrides",
	InputRegion:             "--region",
	InputSelector:           "--function",
}

// TestValidationMessages checks each message a template can get: the location, the property, the
// value and what is allowed, in Lambda's, SAM's or CloudFormation's words where they have them.
func TestValidationMessages(t *testing.T) {
	long := strings.Repeat("x", 330)
	tests := []struct {
		name      string
		template  string
		overrides string
		want      string
	}{
		// Lambda's ranges, with Lambda's text (poller.Config's validation).
		{"batch size too large", eventTemplate("BatchSize: 10001"),
			"", ev + "BatchSize: 1 validation error detected: Value '10001' at 'batchSize' failed to satisfy constraint: Member must have value less than or equal to 10000"},
		{"batch size zero", eventTemplate("BatchSize: 0"),
			"", ev + "BatchSize: 1 validation error detected: Value '0' at 'batchSize' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{"batch size not a number", eventTemplate("BatchSize: ten"),
			"", ev + `BatchSize: BatchSize must be an integer, not "ten"`},
		{"batching window", eventTemplate("MaximumBatchingWindowInSeconds: 301"),
			"", ev + "MaximumBatchingWindowInSeconds: 1 validation error detected: Value '301' at 'maximumBatchingWindowInSeconds' failed to satisfy constraint: Member must have value less than or equal to 300"},
		{"parallelization factor", eventTemplate("ParallelizationFactor: 11"),
			"", ev + "ParallelizationFactor: 1 validation error detected: Value '11' at 'parallelizationFactor' failed to satisfy constraint: Member must have value less than or equal to 10"},
		{"parallelization factor zero", eventTemplate("ParallelizationFactor: 0"),
			"", ev + "ParallelizationFactor: 1 validation error detected: Value '0' at 'parallelizationFactor' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{"retry attempts", eventTemplate("MaximumRetryAttempts: -2"),
			"", ev + "MaximumRetryAttempts: 1 validation error detected: Value '-2' at 'maximumRetryAttempts' failed to satisfy constraint: Member must have value greater than or equal to -1"},
		{"retry attempts too many", eventTemplate("MaximumRetryAttempts: 10001"),
			"", ev + "MaximumRetryAttempts: 1 validation error detected: Value '10001' at 'maximumRetryAttempts' failed to satisfy constraint: Member must have value less than or equal to 10000"},
		{"record age below 60", eventTemplate("MaximumRecordAgeInSeconds: 59"),
			"", ev + "MaximumRecordAgeInSeconds: MaximumRecordAgeInSeconds must be either -1 (forever) or between 60 and 604800 (inclusive); got 59"},
		{"record age above a week", eventTemplate("MaximumRecordAgeInSeconds: 604801"),
			"", ev + "MaximumRecordAgeInSeconds: MaximumRecordAgeInSeconds must be either -1 (forever) or between 60 and 604800 (inclusive); got 604801"},
		{"tumbling window", eventTemplate("TumblingWindowInSeconds: 901"),
			"", ev + "TumblingWindowInSeconds: 1 validation error detected: Value '901' at 'tumblingWindowInSeconds' failed to satisfy constraint: Member must have value less than or equal to 900"},
		{"starting position missing", eventTemplate("Stream: " + stream),
			"", "t.yaml:13: Resources.Fn.Properties.Events.K.Properties.StartingPosition: 1 validation error detected: Value null at 'startingPosition' failed to satisfy constraint: Member must not be null."},
		{"starting position unknown", eventTemplate("Stream: " + stream + "\nStartingPosition: EARLIEST"),
			"", "t.yaml:14: Resources.Fn.Properties.Events.K.Properties.StartingPosition: 1 validation error detected: Value 'EARLIEST' at 'startingPosition' failed to satisfy constraint: Member must satisfy enum value set: [LATEST, AT_TIMESTAMP, TRIM_HORIZON]"},
		{"AT_TIMESTAMP without a timestamp", eventTemplate("Stream: " + stream + "\nStartingPosition: AT_TIMESTAMP"),
			"", "t.yaml:13: Resources.Fn.Properties.Events.K.Properties.StartingPositionTimestamp: Need to specify a timestamp: StartingPositionTimestamp is required with StartingPosition AT_TIMESTAMP"},
		{"timestamp without AT_TIMESTAMP", eventTemplate("StartingPositionTimestamp: 1700000000"),
			"", ev + "StartingPositionTimestamp: StartingPositionTimestamp is only allowed with StartingPosition AT_TIMESTAMP, not LATEST"},
		{"timestamp not a number", eventTemplate("Stream: " + stream + "\nStartingPosition: AT_TIMESTAMP\nStartingPositionTimestamp: yesterday"),
			"", ev + `StartingPositionTimestamp: StartingPositionTimestamp must be a time in Unix seconds (e.g. 1700000000 or 1700000000.5), not "yesterday"`},
		{"timestamp in the future", eventTemplate("Stream: " + stream + "\nStartingPosition: AT_TIMESTAMP\nStartingPositionTimestamp: 4102444800"),
			"", ev + "StartingPositionTimestamp: StartingPositionTimestamp 2100-01-01T00:00:00Z is in the future"},

		// The stream.
		{"stream missing", eventTemplate("StartingPosition: LATEST"),
			"", "t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: Missing required property 'Stream': the ARN of the Kinesis stream"},
		{"stream is a name", eventTemplate("Stream: orders\nStartingPosition: LATEST"),
			"", "t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: 1 validation error detected: Value 'orders' at 'eventSourceArn' failed to satisfy constraint: Member must satisfy regular expression pattern: arn:(aws[a-zA-Z0-9-]*):([a-zA-Z0-9\\-])+:([a-z]{2}(-gov)?-[a-z]+-\\d{1})?:(\\d{12})?:(.*)"},
		{"stream is a queue", eventTemplate("Stream: arn:aws:sqs:us-east-1:123456789012:q\nStartingPosition: LATEST"),
			"", `t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: EventSourceArn "arn:aws:sqs:us-east-1:123456789012:q" is not a Kinesis stream ARN (arn:aws:kinesis:<region>:<account>:stream/<name>)`},
		{"consumer without its creation time", eventTemplate("Stream: " + stream + "/consumer/c\nStartingPosition: LATEST"),
			"", `t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: EventSourceArn "` + stream + `/consumer/c" is not a Kinesis stream consumer ARN (arn:aws:kinesis:<region>:<account>:stream/<name>/consumer/<consumer>:<epoch seconds>): no creation timestamp after the consumer name`},
		{"stream in another region", eventTemplate("Stream: arn:aws:kinesis:eu-west-1:123456789012:stream/s\nStartingPosition: LATEST"),
			"", "t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: stream arn:aws:kinesis:eu-west-1:123456789012:stream/s is in eu-west-1 but the function runs in us-east-1 (AWS::Region, --region): Lambda reads streams of its own region only"},

		// Booleans and lists.
		{"bisect not a bool", eventTemplate("BisectBatchOnFunctionError: maybe"),
			"", ev + `BisectBatchOnFunctionError: BisectBatchOnFunctionError must be true or false, not "maybe"`},
		{"enabled a number", eventTemplate("Enabled: 1"),
			"", ev + "Enabled: Enabled must be true or false, not 1"},
		{"function response type unknown", eventTemplate("FunctionResponseTypes: [ReportFailures]"),
			"", ev + "FunctionResponseTypes: 1 validation error detected: Value '[ReportFailures]' at 'functionResponseTypes' failed to satisfy constraint: Member must satisfy constraint: [Member must satisfy enum value set: [ReportBatchItemFailures]]"},
		{"function response types two", eventTemplate("FunctionResponseTypes: [ReportBatchItemFailures, ReportBatchItemFailures]"),
			"", ev + "FunctionResponseTypes: 1 validation error detected: Value '[ReportBatchItemFailures, ReportBatchItemFailures]' at 'functionResponseTypes' failed to satisfy constraint: Member must have length less than or equal to 1"},
		{"kms key not an ARN", eventTemplate("KmsKeyArn: key-1"),
			"", ev + "KmsKeyArn: 1 validation error detected: Value 'key-1' at 'kMSKeyArn' failed to satisfy constraint: Member must satisfy regular expression pattern: (arn:(aws[a-zA-Z-]*)?:[a-z0-9-.]+:.*)|()"},
		{"metrics unknown", eventTemplate("MetricsConfig:\n  Metrics: [Count]"),
			"", ev + "MetricsConfig: 1 validation error detected: Value '[Count]' at 'metricsConfig.metrics' failed to satisfy constraint: Member must satisfy constraint: [Member must satisfy enum value set: [EventCount, ErrorCount, KafkaMetrics]]"},
		{"unknown property", eventTemplate("BatchSzie: 10"),
			"", ev + "BatchSzie: property BatchSzie not defined for resource of type Kinesis; the properties are Stream, StartingPosition, StartingPositionTimestamp, BatchSize, BisectBatchOnFunctionError, DestinationConfig, Enabled, FilterCriteria, FunctionResponseTypes, KmsKeyArn, MaximumBatchingWindowInSeconds, MaximumRecordAgeInSeconds, MaximumRetryAttempts, MetricsConfig, ParallelizationFactor, TumblingWindowInSeconds"},

		// Destinations (SAM's Type check, Lambda's OnSuccess and destination rules).
		{"destination type", eventTemplate("DestinationConfig:\n  OnFailure:\n    Type: Lambda\n    Destination: arn:aws:sqs:us-east-1:123456789012:q"),
			"", ev + `DestinationConfig: DestinationConfig.OnFailure.Type "Lambda": The only valid values for 'Type' are 'SQS', 'SNS', 'S3', and 'Kafka'`},
		{"destination type intrinsic", eventTemplate("DestinationConfig:\n  OnFailure:\n    Type: !Sub SQS\n    Destination: arn:aws:sqs:us-east-1:123456789012:q"),
			"", ev + "DestinationConfig: DestinationConfig.OnFailure.Type must be written out (SQS, SNS, S3 or Kafka): SAM does not resolve intrinsic functions there"},
		{"on success", eventTemplate("DestinationConfig:\n  OnSuccess:\n    Destination: arn:aws:sqs:us-east-1:123456789012:q"),
			"", ev + "DestinationConfig: Unsupported DestinationConfig parameter for given event source mapping type."},
		{"destination not a queue, topic or bucket", eventTemplate("DestinationConfig:\n  OnFailure:\n    Destination: " + stream),
			"", ev + `DestinationConfig: DestinationConfig.OnFailure.Destination "` + stream + `" must be the ARN of an SQS queue, an SNS topic or an S3 bucket`},
		{"destination a FIFO queue", eventTemplate("DestinationConfig:\n  OnFailure:\n    Destination: arn:aws:sqs:us-east-1:123456789012:failures.fifo"),
			"", ev + "DestinationConfig: DestinationConfig.OnFailure.Destination arn:aws:sqs:us-east-1:123456789012:failures.fifo is a FIFO queue: it cannot take Lambda's on-failure message, which has no message group id, so every delivery would fail; use a standard queue"},
		{"destination a FIFO topic", eventTemplate("DestinationConfig:\n  OnFailure:\n    Type: SNS\n    Destination: arn:aws:sns:us-east-1:123456789012:failures.fifo"),
			"", ev + "DestinationConfig: DestinationConfig.OnFailure.Destination arn:aws:sns:us-east-1:123456789012:failures.fifo is a FIFO topic: it cannot take Lambda's on-failure message, which has no message group id, so every delivery would fail; use a standard topic"},
		{"destination too long", eventTemplate("DestinationConfig:\n  OnFailure:\n    Destination: arn:aws:sqs:us-east-1:123456789012:" + long),
			"", ev + "DestinationConfig: 1 validation error detected: Value 'arn:aws:sqs:us-east-1:123456789012:" + long + "' at 'destinationConfig.onFailure.destination' failed to satisfy constraint: Member must have length less than or equal to 350"},

		// Filters (SAM's format check, Lambda's pattern and quota checks).
		{"filter criteria wrong key", eventTemplate("FilterCriteria:\n  Patterns: []"),
			"", ev + "FilterCriteria: FilterCriteria field has a wrong format: Patterns is not allowed; the only key is Filters"},
		{"filter pattern not JSON", eventTemplate("FilterCriteria:\n  Filters:\n    - Pattern: 'data: x'"),
			"", ev + "FilterCriteria: " + pollerMessage(t, "data: x")},
		{"filter pattern not a string", eventTemplate("FilterCriteria:\n  Filters:\n    - Pattern: {data: {a: [1]}}"),
			"", ev + "FilterCriteria: FilterCriteria.Filters[0].Pattern must be a JSON string, not a mapping"},
		{"too many filters", eventTemplate("FilterCriteria:\n  Filters: [{Pattern: '{}'}, {Pattern: '{}'}, {Pattern: '{}'}, {Pattern: '{}'}, {Pattern: '{}'}, {Pattern: '{}'}]"),
			"", ev + "FilterCriteria: " + pollerMessage(t, "{}", "{}", "{}", "{}", "{}", "{}")},
		{"filter pattern too long", eventTemplate(`FilterCriteria: {Filters: [{Pattern: '{"data":"` + strings.Repeat("y", 4090) + `"}'}]}`),
			"", ev + "FilterCriteria: " + pollerMessage(t, `{"data":"`+strings.Repeat("y", 4090)+`"}`)},

		// The function.
		{"timeout", functionTemplate("Timeout: 901"),
			"", "t.yaml:6: Resources.Fn.Properties.Timeout: 1 validation error detected: Value '901' at 'timeout' failed to satisfy constraint: Member must have value less than or equal to 900"},
		{"memory", functionTemplate("MemorySize: 64"),
			"", "t.yaml:6: Resources.Fn.Properties.MemorySize: 1 validation error detected: Value '64' at 'memorySize' failed to satisfy constraint: Member must have value greater than or equal to 128"},
		{"role not an ARN", functionTemplate("Role: my-role"),
			"", `t.yaml:6: Resources.Fn.Properties.Role: 1 validation error detected: Value 'my-role' at 'role' failed to satisfy constraint: Member must satisfy regular expression pattern: arn:(aws[a-zA-Z-]*)?:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+`},
		{"architectures", functionTemplate("Architectures: [arm64, x86_64]"),
			"", "t.yaml:6: Resources.Fn.Properties.Architectures: 1 validation error detected: Value '[arm64, x86_64]' at 'architectures' failed to satisfy constraint: Member must satisfy constraint: [Member must have length less than or equal to 1, Member must satisfy enum value set: [x86_64, arm64]]"},
		{"events in globals", "Transform: AWS::Serverless-2016-10-31\nGlobals:\n  Function:\n    Events: {}\n" + functionTemplate("Handler: x")[38:],
			"", "t.yaml:4: Globals.Function.Events: 'Events' is not a supported property of 'Function' in Globals: declare events on each function"},
		{"no transform", functionTemplate("Handler: x")[38:],
			"", "t.yaml:1: Transform: the template has AWS::Serverless resources but no 'Transform: AWS::Serverless-2016-10-31' (CloudFormation would reject it: Unrecognized resource types)"},

		// Parameters, with CloudFormation's messages.
		{"parameter not allowed", paramTemplate("AllowedValues: [dev, prod]"), "P=test",
			`t.yaml:4: Parameters.P: value "test": Parameter 'P' must be one of AllowedValues [dev, prod]`},
		{"parameter pattern", paramTemplate("AllowedPattern: '[a-z]+'"), "P=Dev1",
			`t.yaml:4: Parameters.P: value "Dev1": Parameter 'P' must match pattern [a-z]+`},
		{"parameter too short", paramTemplate("MinLength: 3"), "P=ab",
			`t.yaml:4: Parameters.P: value "ab": Parameter 'P' must contain at least 3 characters`},
		{"parameter below minimum", paramTemplate("Type: Number\n    MinValue: 10"), "P=9",
			`t.yaml:5: Parameters.P: value "9": Parameter 'P' must be a number not less than 10`},
		{"parameter not a number", paramTemplate("Type: Number"), "P=ten",
			`t.yaml:4: Parameters.P: value "ten": Parameter 'P' must be a number`},
		{"parameter without value", paramTemplate("Description: no default"), "",
			"t.yaml:16: Resources.Fn.Properties.Events.K.Properties.Stream: Parameters: [P] must have values: give it a Default or pass --parameter-overrides P=..."},
		{"unknown override", paramTemplate("Default: x"), "Q=1 R=2",
			"t.yaml: --parameter-overrides: Parameters: [Q, R] do not exist in the template"},

		// AWS::Lambda::EventSourceMapping, with CloudFormation's messages.
		{"esm unknown property", esmTemplate("Bogus: 1"),
			"", "t.yaml:15: Resources.M.Properties.Bogus: Encountered unsupported property Bogus"},
		{"esm property of another source", esmTemplate("Queues: [q]"),
			"", "t.yaml:15: Resources.M.Properties.Queues: Queues does not apply to a Kinesis event source (it is for SQS, Kafka, MQ or DocumentDB sources)"},
		{"esm destination type", esmTemplate("DestinationConfig: {OnFailure: {Type: SQS, Destination: arn:aws:sqs:us-east-1:123456789012:q}}"),
			"", "t.yaml:15: Resources.M.Properties.DestinationConfig: Encountered unsupported property DestinationConfig.OnFailure.Type"},
		{"esm filter criteria wrong key", esmTemplate("FilterCriteria: {Filter: []}"),
			"", "t.yaml:15: Resources.M.Properties.FilterCriteria: Encountered unsupported property FilterCriteria.Filter: the only property is Filters"},

		// Intrinsic functions.
		{"GetAtt of a missing resource", eventTemplate("Stream: !GetAtt Nope.Arn\nStartingPosition: LATEST"),
			"", `t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: Fn::GetAtt Nope.Arn: no resource "Nope" in the template`},
		{"GetAtt of an unknown attribute", eventTemplate("Stream: !GetAtt Fn.StreamArn\nStartingPosition: LATEST"),
			"", "t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: Fn::GetAtt Fn.StreamArn: AWS::Serverless::Function resources have the attributes Arn"},
		{"Ref of nothing", eventTemplate("Stream: !Ref Nope\nStartingPosition: LATEST"),
			"", `t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: Ref Nope: no parameter or resource "Nope" in the template (Unresolved resource dependencies [Nope])`},
		{"Sub unclosed", eventTemplate("Stream: !Sub 'arn:${AWS::Partition'\nStartingPosition: LATEST"),
			"", "t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: Fn::Sub: unclosed ${ in the string"},
		{"Sub with one argument", eventTemplate("Stream: !Sub [x]\nStartingPosition: LATEST"),
			"", "t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: Fn::Sub takes a string, or [string, {Var: value}]"},
		{"Select out of range", eventTemplate("Stream: !Select [3, [a, b]]\nStartingPosition: LATEST"),
			"", "t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: Fn::Select index 3 is out of range for a list of 2"},
		{"ImportValue", eventTemplate("Stream: !ImportValue shared-stream\nStartingPosition: LATEST"),
			"", "t.yaml:13: Resources.Fn.Properties.Events.K.Properties.Stream: Fn::ImportValue reads another stack's outputs, which only CloudFormation can resolve; use a parameter and --parameter-overrides instead"},
		{"unknown tag", eventTemplate("Stream: !Arn s\nStartingPosition: LATEST"),
			"", "t.yaml:13: unknown tag !Arn: CloudFormation's short forms are !Ref, !GetAtt, !Sub, !Join, !Select, !Split, !If, !Equals, !And, !Or, !Not, !FindInMap, !Base64, !GetAZs, !ImportValue, !Cidr, !Condition"},
		{"condition cycle", "Conditions:\n  A: !Condition B\n  B: !Condition A\n" + eventTemplate("Stream: !If [A, "+stream+", "+stream+"]\nStartingPosition: LATEST"),
			"", `t.yaml:3: Conditions.B: condition "A" depends on itself`},

		// The template as a whole.
		{"duplicate mapping", eventTemplate("BatchSize: 10") + "        K2:\n          Type: Kinesis\n          Properties: {Stream: " + stream + ", StartingPosition: LATEST}\n",
			"", `t.yaml:16: Resources.Fn.Properties.Events.K2: The event source arn (" ` + stream + ` ") and function (" Fn ") provided mapping already exists (Fn/K and Fn/K2 map the same stream to the same function)`},
		{"not YAML", "Resources: [\n", "", "t.yaml: not a valid YAML or JSON template: line 1: did not find expected node content"},
		{"no resources", "AWSTemplateFormatVersion: '2010-09-09'\n", "", "t.yaml: Resources: Template format error: At least one Resources member must be defined."},
		{"duplicate key", "Resources:\n  A: {Type: X}\n  A: {Type: Y}\n", "", `t.yaml:3: duplicate key "A"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			po, err := ParseParameterOverrides(tt.overrides)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse("t.yaml", []byte(tt.template), WithParameterOverrides(po), WithClock(fixedNow), WithInputNames(flagNames))
			if err == nil {
				t.Fatalf("no error; want %s\ntemplate:\n%s", tt.want, tt.template)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tt.want)
			}
			if !errors.Is(err, poller.ErrInvalidConfig) {
				t.Errorf("error does not wrap poller.ErrInvalidConfig: %v", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
		})
	}
}

// pollerMessage is poller.Config's validation message for these filter patterns: the text a
// template's FilterCriteria must get too (the filter rules are the poller's).
func pollerMessage(t *testing.T, patterns ...string) string {
	t.Helper()
	err := poller.Config{StartingPosition: poller.Latest, FilterPatterns: patterns}.Validate("")
	if err == nil {
		t.Fatalf("poller.Config accepts the patterns %q", patterns)
	}
	return err.Error()
}

// paramTemplate declares parameter P (definition lines from line 4) and uses it as the stream.
func paramTemplate(def string) string {
	return "Transform: AWS::Serverless-2016-10-31\nParameters:\n  P:\n    " + def + "\n" +
		strings.TrimPrefix(eventTemplate("Stream: !Sub 'arn:aws:kinesis:us-east-1:123456789012:stream/${P}'\nStartingPosition: LATEST"), "Transform: AWS::Serverless-2016-10-31\n")
}

// esmTemplate is a function and an AWS::Lambda::EventSourceMapping whose extra properties start at
// line 15.
func esmTemplate(props string) string {
	return "Resources:\n  Fn:\n    Type: AWS::Lambda::Function\n    Properties:\n      Handler: bootstrap\n" +
		"      Runtime: provided.al2023\n      Role: arn:aws:iam::123456789012:role/r\n      Code: {ZipFile: x}\n" +
		"  M:\n    Type: AWS::Lambda::EventSourceMapping\n    Properties:\n      FunctionName: !Ref Fn\n" +
		"      EventSourceArn: " + stream + "\n      StartingPosition: LATEST\n      " + props + "\n"
}

func TestSelect(t *testing.T) {
	tpl := "Transform: AWS::Serverless-2016-10-31\nResources:\n" +
		"  A:\n    Type: AWS::Serverless::Function\n    Properties:\n      FunctionName: alpha\n      Events:\n" +
		"        One: {Type: Kinesis, Properties: {Stream: " + stream + "1, StartingPosition: LATEST}}\n" +
		"        Two: {Type: Kinesis, Properties: {Stream: " + stream + "2, StartingPosition: LATEST}}\n" +
		"  B:\n    Type: AWS::Serverless::Function\n    Properties:\n      Events:\n" +
		"        One: {Type: Kinesis, Properties: {Stream: " + stream + "1, StartingPosition: LATEST}}\n"
	parsed, err := Parse("t.yaml", []byte(tpl), WithInputNames(flagNames))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		selector, want, err string
	}{
		{"B", "B/One", ""},
		{"A/Two", "A/Two", ""},
		{"alpha/One", "A/One", ""},
		{"", "", "t.yaml has 3 Kinesis mappings; choose one with --function: A/One, A/Two, B/One"},
		{"A", "", `t.yaml: --function "A" matches 2 Kinesis mappings; choose one of: A/One, A/Two`},
		{"C", "", `t.yaml: --function "C" matches no Kinesis mapping; the template has: A/One, A/Two, B/One`},
	} {
		m, err := parsed.Select(tt.selector)
		switch {
		case tt.err != "" && (err == nil || err.Error() != tt.err):
			t.Errorf("Select(%q) error %v, want %s", tt.selector, err, tt.err)
		case tt.err == "" && (err != nil || m.ID != tt.want):
			t.Errorf("Select(%q) = %v, %v; want %s", tt.selector, m, err, tt.want)
		}
	}
	empty, err := Parse("t.yaml", []byte("Resources:\n  Q: {Type: AWS::SQS::Queue}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = empty.Select("")
	if !errors.Is(err, ErrNoMapping) || !errors.Is(err, poller.ErrInvalidConfig) {
		t.Fatalf("Select on a template without mappings: %v", err)
	}
}

func TestParseParameterOverrides(t *testing.T) {
	got, err := ParseParameterOverrides(`A=1 B="two words"  C='x=y' ParameterKey=D,ParameterValue=d E=`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "1", "B": "two words", "C": "x=y", "D": "d", "E": ""}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, bad := range []string{"novalue", `A="open`, "=x", "ParameterKey=A"} {
		if _, err := ParseParameterOverrides(bad); err == nil {
			t.Errorf("ParseParameterOverrides(%q) accepted it", bad)
		}
	}
}

func TestGlobalsMerge(t *testing.T) {
	tpl := "Transform: AWS::Serverless-2016-10-31\nGlobals:\n  Function:\n    Timeout: 20\n    MemorySize: 512\n" +
		"    Environment: {Variables: {A: global, B: global}}\n    Architectures: [arm64]\nResources:\n" +
		"  Fn:\n    Type: AWS::Serverless::Function\n    Properties:\n      Timeout: 40\n" +
		"      Environment: {Variables: {B: local, C: local}}\n      Events:\n" +
		"        K: {Type: Kinesis, Properties: {Stream: " + stream + ", StartingPosition: LATEST}}\n"
	parsed, err := Parse("t.yaml", []byte(tpl))
	if err != nil {
		t.Fatal(err)
	}
	f := parsed.Mappings[0].Function
	if f.Timeout != 40 || f.MemorySize != 512 || f.Architectures[0] != "arm64" ||
		f.Environment["A"] != "global" || f.Environment["B"] != "local" || f.Environment["C"] != "local" {
		t.Fatalf("globals merged wrong: %+v", f)
	}
}

func TestPollerConfig(t *testing.T) {
	parsed, err := Load("testdata/orders.yaml", WithClock(fixedNow))
	if err != nil {
		t.Fatal(err)
	}
	m, err := parsed.Select("OrdersFunction/Orders")
	if err != nil {
		t.Fatal(err)
	}
	c := m.PollerConfig()
	if err := c.Validate(m.EventSourceArn); err != nil {
		t.Fatal(err)
	}
	if c.BatchSize != 50 || c.MaximumBatchingWindow.Seconds() != 1 ||
		*c.MaximumRetryAttempts != 2 || *c.MaximumRecordAgeInSeconds != 3600 || !c.BisectBatchOnFunctionError ||
		!c.ReportBatchItemFailures || c.OnFailureDestination != m.DestinationConfig.OnFailure.Destination ||
		len(c.FilterPatterns) != 2 || c.Disabled {
		t.Fatalf("poller.Config does not carry the mapping: %+v", c)
	}
}

// TestWindowWithParallelizationFactorAccepted: AWS documents no rejection of a tumbling window
// with ParallelizationFactor > 1, so a template that deploys is accepted (esm then runs the
// mapping one batch in flight per shard, with a warning).
func TestWindowWithParallelizationFactorAccepted(t *testing.T) {
	tpl, err := Parse("t.yaml", []byte(eventTemplate("TumblingWindowInSeconds: 60\nParallelizationFactor: 4\nMetricsConfig:\n  Metrics: [EventCount]")),
		WithClock(fixedNow))
	if err != nil {
		t.Fatal(err)
	}
	m := tpl.Mappings[0]
	if m.TumblingWindowInSeconds != 60 || m.ParallelizationFactor != 4 || m.MetricsConfig == nil || m.MetricsConfig.Metrics[0] != "EventCount" {
		t.Fatalf("mapping %+v", m)
	}
}
