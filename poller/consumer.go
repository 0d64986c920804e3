package poller

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

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

// splitConsumerARN moves a consumer ARN given as StreamARN to ConsumerARN and checks that
// ConsumerARN belongs to StreamARN.
func (c *Config) splitConsumerARN() error {
	if IsConsumerARN(c.StreamARN) {
		if c.ConsumerARN != "" && c.ConsumerARN != c.StreamARN {
			return &ValidationError{Field: "ConsumerARN", Message: fmt.Sprintf(
				"EventSourceArn %q is a consumer ARN, and ConsumerARN %q is another", c.StreamARN, c.ConsumerARN)}
		}
		c.ConsumerARN = c.StreamARN
		ca, err := ParseConsumerARN(c.ConsumerARN)
		if err != nil {
			return err
		}
		c.StreamARN = ca.Stream.String()
		return nil
	}
	if c.ConsumerARN == "" {
		return nil
	}
	ca, err := ParseConsumerARN(c.ConsumerARN)
	if err != nil {
		err.(*ValidationError).Field = "ConsumerARN"
		return err
	}
	if ca.Stream.String() != c.StreamARN {
		return &ValidationError{Field: "ConsumerARN", Message: fmt.Sprintf(
			"ConsumerARN %q is a consumer of stream %s, not of %s", c.ConsumerARN, ca.Stream, c.StreamARN)}
	}
	return nil
}
