package dynamostreams

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/kinesis-esm/esm/source"
)

// StreamARN is a parsed DynamoDB stream ARN,
// arn:<partition>:dynamodb:<region>:<account>:table/<table>/stream/<label>.
type StreamARN struct {
	Partition, Region, Account, Table, Label string
}

func (a StreamARN) String() string {
	return fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s/stream/%s", a.Partition, a.Region, a.Account, a.Table, a.Label)
}

// IsStreamARN reports whether s names a DynamoDB stream (its service is dynamodb), whether or not
// the rest of it is well formed: ParseStreamARN says that.
func IsStreamARN(s string) bool {
	a, err := arn.Parse(s)
	return err == nil && a.Service == "dynamodb"
}

// ParseStreamARN parses a DynamoDB stream ARN. A table's ARN (without /stream/<label>) is refused
// with a message that says what is missing: a mapping reads the table's stream, not its table.
// Every error is a *source.ValidationError of EventSourceArn.
func ParseStreamARN(s string) (StreamARN, error) {
	invalid := func(format string) error {
		return &source.ValidationError{Field: "EventSourceArn", Message: fmt.Sprintf(format, s)}
	}
	a, err := arn.Parse(s)
	if err != nil || a.Service != "dynamodb" {
		return StreamARN{}, invalid("EventSourceArn %q is not a DynamoDB stream ARN (arn:aws:dynamodb:<region>:<account>:table/<table>/stream/<label>)")
	}
	rest, isTable := strings.CutPrefix(a.Resource, "table/")
	table, label, hasStream := strings.Cut(rest, "/stream/")
	switch {
	case !isTable || table == "" || strings.Contains(table, "/"):
		return StreamARN{}, invalid("EventSourceArn %q is not a DynamoDB stream ARN (arn:aws:dynamodb:<region>:<account>:table/<table>/stream/<label>)")
	case !hasStream:
		return StreamARN{}, invalid("EventSourceArn %q is a table's ARN: give its stream's (the table's LatestStreamArn, …/stream/<label>)")
	case strings.Contains(label, "/consumer/"):
		return StreamARN{}, invalid("EventSourceArn %q names an enhanced fan-out consumer: DynamoDB Streams has none; give the stream's ARN (…:table/<table>/stream/<label>)")
	case label == "" || strings.Contains(label, "/"):
		return StreamARN{}, invalid("EventSourceArn %q: the stream label is missing or malformed (…:table/<table>/stream/<label>)")
	case a.Region == "":
		return StreamARN{}, invalid("EventSourceArn %q has no region")
	}
	return StreamARN{Partition: a.Partition, Region: a.Region, Account: a.AccountID, Table: table, Label: label}, nil
}

// TemplateStreamLabel is the label a template gives the stream of a table it declares
// (Fn::GetAtt Table.StreamArn): the real label is the time DynamoDB enabled the stream, known only
// once the table exists. A stream ARN with it stands for its table's latest stream (Resolve).
const TemplateStreamLabel = "1970-01-01T00:00:00.000"
