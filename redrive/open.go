package redrive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/arn"
)

// Kinds of Origin.
const (
	FromFile   = "file"
	FromQueue  = "queue"
	FromBucket = "bucket"
)

// Origin is where a redrive reads its messages, as Pick chooses it.
type Origin struct {
	// Kind is FromFile, FromQueue or FromBucket.
	Kind string
	// Target is the file (- for the Opener's Stdin), the queue's URL or ARN, or the bucket.
	Target string
}

// Errors of Pick: no source is given and the mapping has no on-failure destination, or its
// destination is a topic, whose messages cannot be read back.
var (
	ErrNoDestination = errors.New("the mapping has no on-failure destination")
	ErrUnreadable    = errors.New("cannot be read back")
)

// Pick decides where the messages come from, before anything is read: a file, a queue's URL or a
// bucket when one is given (the first non-empty of them), or else the mapping's on-failure
// destination ARN: a queue or a bucket. A topic cannot be read back (its ARN names no queue), and
// is refused, as is anything else.
func Pick(file, queueURL, bucket, destination string) (Origin, error) {
	switch {
	case file != "":
		return Origin{FromFile, file}, nil
	case queueURL != "":
		return Origin{FromQueue, queueURL}, nil
	case bucket != "":
		return Origin{FromBucket, bucket}, nil
	case destination == "":
		return Origin{}, ErrNoDestination
	}
	if a, err := arn.Parse(destination); err == nil {
		switch a.Service {
		case "sqs":
			return Origin{FromQueue, destination}, nil
		case "s3":
			return Origin{FromBucket, a.Resource}, nil
		case "sns":
			return Origin{}, fmt.Errorf("the on-failure destination %s is an SNS topic, which %w", destination, ErrUnreadable)
		}
	}
	return Origin{}, fmt.Errorf("on-failure destination %q: want an SQS queue or an S3 bucket", destination)
}

// QueueClient is the part of the SQS client a queue Origin needs: reading its messages, and
// looking its URL up when the Origin gives its ARN.
type QueueClient interface {
	SQSAPI
	QueueURLAPI
}

// Opener opens the Source of an Origin. The zero value opens files.
type Opener struct {
	// Stdin is the file "-" (default: no messages).
	Stdin io.Reader
	// SQS reads a queue (required for FromQueue).
	SQS QueueClient
	// S3 lists a bucket (required for FromBucket), and Prefix the keys read (default: every key;
	// Lambda writes aws/lambda/<mapping UUID>/<shard>/...).
	S3     S3API
	Prefix string
	// FunctionTimeout is the function's timeout: a queue's messages stay invisible to other
	// consumers for long enough to invoke the function with each message of a receive.
	FunctionTimeout time.Duration
}

// Open opens the source of o: ReadFile (ReadMessages for "-"), ListBucket, or NewQueue (after
// QueueURL when o names the queue by ARN).
func (op Opener) Open(ctx context.Context, o Origin) (Source, error) {
	switch o.Kind {
	case FromFile:
		if o.Target == "-" {
			return ReadMessages(orEmpty(op.Stdin), "stdin")
		}
		return ReadFile(o.Target)
	case FromBucket:
		if op.S3 == nil {
			return nil, errors.New("redrive: a bucket needs an S3 client")
		}
		return ListBucket(ctx, op.S3, o.Target, op.Prefix)
	case FromQueue:
		if op.SQS == nil {
			return nil, errors.New("redrive: a queue needs an SQS client")
		}
		url := o.Target
		if strings.HasPrefix(url, "arn:") {
			var err error
			if url, err = QueueURL(ctx, op.SQS, url); err != nil {
				return nil, err
			}
		}
		// A receive of ten messages stays invisible for long enough to invoke the function for each.
		return NewQueue(op.SQS, url, 10*(op.FunctionTimeout+10*time.Second)+time.Minute), nil
	}
	return nil, fmt.Errorf("redrive: origin kind %q: want %s, %s or %s", o.Kind, FromFile, FromQueue, FromBucket)
}

func orEmpty(r io.Reader) io.Reader {
	if r == nil {
		return strings.NewReader("")
	}
	return r
}
