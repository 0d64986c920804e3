package sam

import (
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws/arn"
)

// The ARN patterns of Lambda's API, as its validation messages quote them.
const (
	roleARNPattern        = `arn:(aws[a-zA-Z-]*)?:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+`
	eventSourceARNPattern = `arn:(aws[a-zA-Z0-9-]*):([a-zA-Z0-9\-])+:([a-z]{2}(-gov)?-[a-z]+-\d{1})?:(\d{12})?:(.*)`
	kmsKeyARNPattern      = `(arn:(aws[a-zA-Z-]*)?:[a-z0-9-.]+:.*)|()`
)

var (
	roleARN        = regexp.MustCompile(`^` + roleARNPattern + `$`)
	eventSourceARN = regexp.MustCompile(`^` + eventSourceARNPattern + `$`)
	kmsKeyARN      = regexp.MustCompile(`^(?:` + kmsKeyARNPattern + `)$`)
)

// isStreamARN reports whether s is the ARN of a stream esm reads: a Kinesis resource (a stream or a
// consumer) or a DynamoDB resource (a table's stream; anything else of DynamoDB is refused with a
// message that says so).
func isStreamARN(s string) bool {
	a, err := arn.Parse(s)
	return err == nil && (a.Service == "kinesis" || a.Service == "dynamodb")
}
