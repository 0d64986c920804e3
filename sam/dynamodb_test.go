package sam

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kinesis-esm/esm/poller"
)

// ddbTemplate is a table Orders (with a stream unless noStream) and a SAM function with one
// DynamoDB event whose properties are props (from line 18).
func ddbTemplate(props string, noStream bool) string {
	var b strings.Builder
	b.WriteString("Transform: AWS::Serverless-2016-10-31\nResources:\n  Orders:\n    Type: AWS::DynamoDB::Table\n    Properties:\n      TableName: orders\n")
	if noStream {
		b.WriteString("      BillingMode: PAY_PER_REQUEST\n")
	} else {
		b.WriteString("      StreamSpecification: {StreamViewType: NEW_IMAGE}\n")
	}
	b.WriteString("  Fn:\n    Type: AWS::Serverless::Function\n    Properties:\n      Handler: bootstrap\n      Runtime: provided.al2023\n" +
		"      CodeUri: .\n      Events:\n        D:\n          Type: DynamoDB\n          Properties:\n")
	for _, l := range strings.Split(strings.TrimRight(props, "\n"), "\n") {
		b.WriteString("            " + l + "\n")
	}
	return b.String()
}

// TestDynamoDBTemplateMessages: what a DynamoDB mapping of a template is refused with: Lambda's
// message for AT_TIMESTAMP, a table without a stream, a table's ARN, a property SAM's DynamoDB
// event does not have.
func TestDynamoDBTemplateMessages(t *testing.T) {
	const at = "Resources.Fn.Properties.Events.D.Properties."
	for _, c := range []struct {
		name, template, want string
	}{
		{"AT_TIMESTAMP", ddbTemplate("Stream: !GetAtt Orders.StreamArn\nStartingPosition: AT_TIMESTAMP\nStartingPositionTimestamp: 1700000000", false),
			"t.yaml:19: " + at + "StartingPosition: Unsupported starting position for arn type: arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/1970-01-01T00:00:00.000"},
		{"no stream", ddbTemplate("Stream: !GetAtt Orders.StreamArn\nStartingPosition: LATEST", true),
			"t.yaml:18: " + at + "Stream: Fn::GetAtt Orders.StreamArn: table orders has no stream; give it a StreamSpecification (StreamViewType NEW_AND_OLD_IMAGES, NEW_IMAGE, OLD_IMAGE or KEYS_ONLY)"},
		{"table ARN", ddbTemplate("Stream: !GetAtt Orders.Arn\nStartingPosition: LATEST", false),
			"t.yaml:18: " + at + `Stream: EventSourceArn "arn:aws:dynamodb:us-east-1:123456789012:table/orders" is a table's ARN: give its stream's (the table's LatestStreamArn, …/stream/<label>)`},
		{"unknown property", ddbTemplate("Stream: !GetAtt Orders.StreamArn\nStartingPosition: LATEST\nQueues: [q]", false),
			"t.yaml:20: " + at + "Queues: property Queues not defined for resource of type DynamoDB; the properties are " + strings.Join(kinesisEventProperties, ", ")},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "t.yaml")
			if err := os.WriteFile(path, []byte(c.template), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path, WithAccountID("123456789012"), WithClock(fixedNow))
			if err == nil {
				t.Fatal("accepted")
			}
			if got := strings.Replace(err.Error(), path, "t.yaml", 1); got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
			if c.name != "unknown property" && c.name != "no stream" && !errors.Is(err, poller.ErrInvalidConfig) {
				t.Fatalf("%v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}
