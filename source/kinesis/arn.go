package kinesis

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/kinesis-esm/esm/source"
)

// ValidationError is the error an ARN is refused with (poller.ValidationError).
type ValidationError = source.ValidationError

// StreamARN is a parsed Kinesis stream ARN.
type StreamARN struct {
	Partition, Region, Account, Name string
}

// ParseStreamARN parses arn:<partition>:kinesis:<region>:<account>:stream/<name>.
func ParseStreamARN(s string) (StreamARN, error) {
	a, err := arn.Parse(s)
	name, isStream := strings.CutPrefix(a.Resource, "stream/")
	if err != nil || !isStream || a.Service != "kinesis" {
		return StreamARN{}, &ValidationError{Field: "EventSourceArn", Message: fmt.Sprintf(
			"EventSourceArn %q is not a Kinesis stream ARN (arn:aws:kinesis:<region>:<account>:stream/<name>)", s)}
	}
	if name == "" || strings.Contains(name, "/") {
		return StreamARN{}, &ValidationError{Field: "EventSourceArn", Message: fmt.Sprintf(
			"EventSourceArn %q: stream name missing, or not a stream ARN (a consumer ARN is ConsumerARN's)", s)}
	}
	if a.Region == "" {
		return StreamARN{}, &ValidationError{Field: "EventSourceArn", Message: fmt.Sprintf("EventSourceArn %q has no region", s)}
	}
	return StreamARN{Partition: a.Partition, Region: a.Region, Account: a.AccountID, Name: name}, nil
}

func (a StreamARN) String() string {
	return fmt.Sprintf("arn:%s:kinesis:%s:%s:stream/%s", a.Partition, a.Region, a.Account, a.Name)
}

// FunctionARN is the ARN of a function named name in the stream's partition, region and
// account: the function of a mapping that names no ARN, which keys its checkpoints.
func (a StreamARN) FunctionARN(name string) string {
	return fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", a.Partition, a.Region, a.Account, name)
}

// ConsumerARN is a parsed enhanced fan-out consumer ARN.
type ConsumerARN struct {
	Stream StreamARN
	// Name is the consumer's name; Created its creation time in epoch seconds, as in the ARN.
	Name    string
	Created int64
}

// consumerName is RegisterStreamConsumer's ConsumerName constraint.
var consumerName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

// IsConsumerARN reports whether s has the shape of a consumer ARN (…:stream/<name>/consumer/…),
// valid or not.
func IsConsumerARN(s string) bool {
	return strings.HasPrefix(s, "arn:") && strings.Contains(s, "/consumer/")
}

// ParseConsumerARN parses
// arn:<partition>:kinesis:<region>:<account>:stream/<name>/consumer/<consumer>:<creation epoch seconds>.
func ParseConsumerARN(s string) (ConsumerARN, error) {
	bad := func(why string) (ConsumerARN, error) {
		return ConsumerARN{}, &ValidationError{Field: "EventSourceArn", Message: fmt.Sprintf(
			"EventSourceArn %q is not a Kinesis stream consumer ARN (arn:aws:kinesis:<region>:<account>:stream/<name>/consumer/<consumer>:<epoch seconds>): %s", s, why)}
	}
	streamPart, rest, ok := strings.Cut(s, "/consumer/")
	if !ok {
		return bad("no /consumer/")
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return bad("no creation timestamp after the consumer name")
	}
	name, ts := rest[:i], rest[i+1:]
	if !consumerName.MatchString(name) {
		return bad("the consumer name must be 1-128 letters, digits, '_', '.' or '-'")
	}
	created, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || created < 0 {
		return bad("the creation timestamp must be epoch seconds")
	}
	stream, err := ParseStreamARN(streamPart)
	if err != nil {
		return bad("its stream part is not a stream ARN")
	}
	return ConsumerARN{Stream: stream, Name: name, Created: created}, nil
}

func (a ConsumerARN) String() string {
	return fmt.Sprintf("%s/consumer/%s:%d", a.Stream, a.Name, a.Created)
}

// ParseSource checks a mapping's source as New does, without a client: a stream ARN and a
// consumer ARN ("" when polling). A consumer ARN given as the stream (as Lambda's EventSourceArn
// may be) moves to the consumer, and a consumer must belong to the stream. It returns the stream's
// ARN parsed, and the consumer's ARN. An empty stream ARN is Lambda's "Unrecognized event
// source.".
func ParseSource(streamARN, consumerARN string) (StreamARN, string, error) {
	if streamARN == "" {
		return StreamARN{}, "", &ValidationError{Field: "EventSourceArn", Message: "Unrecognized event source."}
	}
	return splitConsumerARN(streamARN, consumerARN)
}

// splitConsumerARN is ParseSource of a stream ARN that is set.
func splitConsumerARN(streamARN, consumerARN string) (StreamARN, string, error) {
	if IsConsumerARN(streamARN) {
		if consumerARN != "" && consumerARN != streamARN {
			return StreamARN{}, "", &ValidationError{Field: "ConsumerARN", Message: fmt.Sprintf(
				"EventSourceArn %q is a consumer ARN, and ConsumerARN %q is another", streamARN, consumerARN)}
		}
		ca, err := ParseConsumerARN(streamARN)
		if err != nil {
			return StreamARN{}, "", err
		}
		return ca.Stream, streamARN, nil
	}
	stream, err := ParseStreamARN(streamARN)
	if err != nil || consumerARN == "" {
		return stream, "", err
	}
	ca, err := ParseConsumerARN(consumerARN)
	if err != nil {
		err.(*ValidationError).Field = "ConsumerARN"
		return StreamARN{}, "", err
	}
	if ca.Stream.String() != streamARN {
		return StreamARN{}, "", &ValidationError{Field: "ConsumerARN", Message: fmt.Sprintf(
			"ConsumerARN %q is a consumer of stream %s, not of %s", consumerARN, ca.Stream, streamARN)}
	}
	return stream, consumerARN, nil
}
