// Package sam reads the SAM / CloudFormation template that deploys a function to Lambda and
// resolves the Kinesis and DynamoDB Streams event source mappings it declares, so that esm runs
// exactly what the same template deploys:
//
//   - AWS::Serverless::Function events of Type: Kinesis or Type: DynamoDB, with every property SAM passes to
//     AWS::Lambda::EventSourceMapping (Stream, StartingPosition, StartingPositionTimestamp, BatchSize,
//     BisectBatchOnFunctionError, DestinationConfig, Enabled, FilterCriteria, FunctionResponseTypes,
//     KmsKeyArn, MaximumBatchingWindowInSeconds, MaximumRecordAgeInSeconds, MaximumRetryAttempts,
//     MetricsConfig, ParallelizationFactor, TumblingWindowInSeconds) and Globals.Function;
//   - AWS::Lambda::EventSourceMapping resources whose EventSourceArn is a Kinesis stream or a
//     DynamoDB stream, with FunctionName a name, an ARN, or !Ref / !GetAtt of a function in the
//     template;
//   - AWS::DynamoDB::Table resources: !GetAtt Table.StreamArn of a table with a StreamSpecification
//     is its stream's ARN with the label TemplateStreamLabel (the real label is known only once the
//     table exists: the runner reads the table's LatestStreamArn), and a DynamoDB mapping refuses
//     AT_TIMESTAMP with Lambda's message;
//   - Parameters (defaults, AllowedValues, patterns, lengths, ranges) and overrides in SAM's
//     --parameter-overrides syntax, Conditions and Mappings;
//   - the intrinsic functions, in long (Fn::Sub) and short (!Sub) form: Ref (parameters, pseudo
//     parameters, resources), Fn::GetAtt, Fn::Sub (both forms), Fn::Join, Fn::Select, Fn::Split,
//     Fn::If, Fn::Equals, Fn::And, Fn::Or, Fn::Not, Fn::FindInMap, Fn::Base64, Fn::GetAZs,
//     Fn::ToJsonString and Fn::Length.
//
// Every field is checked with Lambda's ranges, reusing poller.Config's validation (Lambda's own
// messages where AWS recorded them) plus the checks SAM and CloudFormation make before Lambda sees
// the mapping. An error names the file, the line, the property path, the value and what is allowed;
// every one wraps poller.ErrInvalidConfig.
//
// Resolution is pure: resources get the names CloudFormation would give them when the template
// names them (Name, QueueName, TopicName, BucketName, FunctionName, RoleName) and their logical ID
// otherwise; ARNs use the region, account and partition of WithRegion, WithAccountID and
// WithPartition (default us-east-1, 123456789012 and aws, the values sam local uses). The caller
// checks the result against the endpoint in use (package runner describes the stream).
//
// # Why not goformation
//
// github.com/awslabs/goformation/v7 (v7.14.9, the newest the Go module proxy serves) was tried
// first. It cannot read these templates faithfully:
//
//   - its AWS::Serverless::Function Kinesis event type has 5 of SAM's 16 properties, and its event
//     union decoder rejects unknown fields per type and then drops the event without an error: an
//     event with ParallelizationFactor comes back as nil;
//   - its AWS::Lambda::EventSourceMapping type has no KmsKeyArn and no MetricsConfig;
//   - Fn::Sub bypasses handler overrides and hard-codes AWS::AccountId 123456789012 and
//     AWS::Region us-east-1, and replaces a variable it cannot resolve (${Stream.Arn}) with "";
//   - intrinsic handlers cannot return errors (an unresolvable !GetAtt becomes null), so no error
//     could name the property that is wrong, and positions are lost in its YAML→JSON round trip;
//   - `!Sub [x]` panics (index out of range), which a fuzzed loader must not do.
//
// So the template is parsed with gopkg.in/yaml.v3 (already in the module graph), which keeps line
// numbers and exposes CloudFormation's short-form tags (!Ref, !GetAtt, !Sub, …) on its nodes, and the
// intrinsics are evaluated here, lazily: only the properties a mapping needs are resolved, so an
// unrelated resource using Fn::ImportValue does not stop esm.
package sam
