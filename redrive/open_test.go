package redrive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPick(t *testing.T) {
	for _, c := range []struct {
		name                                string
		file, queueURL, bucket, destination string
		want                                Origin
		err                                 string
	}{
		{name: "file first", file: "f.jsonl", queueURL: "http://q", destination: "arn:aws:sqs:us-east-1:1:q", want: Origin{FromFile, "f.jsonl"}},
		{name: "queue URL", queueURL: "http://q", bucket: "b", want: Origin{FromQueue, "http://q"}},
		{name: "bucket", bucket: "b", destination: "arn:aws:sqs:us-east-1:1:q", want: Origin{FromBucket, "b"}},
		{name: "queue destination", destination: "arn:aws:sqs:us-east-1:123456789012:failures", want: Origin{FromQueue, "arn:aws:sqs:us-east-1:123456789012:failures"}},
		{name: "bucket destination", destination: "arn:aws:s3:::failures", want: Origin{FromBucket, "failures"}},
		{name: "topic destination", destination: "arn:aws:sns:us-east-1:123456789012:t", err: "the on-failure destination arn:aws:sns:us-east-1:123456789012:t is an SNS topic, which cannot be read back"},
		{name: "function destination", destination: "arn:aws:lambda:us-east-1:123456789012:function:f", err: `on-failure destination "arn:aws:lambda:us-east-1:123456789012:function:f": want an SQS queue or an S3 bucket`},
		{name: "not an ARN", destination: "failures", err: `on-failure destination "failures": want an SQS queue or an S3 bucket`},
		{name: "none", err: "the mapping has no on-failure destination"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Pick(c.file, c.queueURL, c.bucket, c.destination)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("Pick: %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Pick: %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
	if _, err := Pick("", "", "", "arn:aws:sns:us-east-1:1:t"); !errors.Is(err, ErrUnreadable) {
		t.Errorf("a topic: %v, want ErrUnreadable", err)
	}
	if _, err := Pick("", "", "", ""); !errors.Is(err, ErrNoDestination) {
		t.Errorf("no destination: %v, want ErrNoDestination", err)
	}
}

const openMessage = `{"KinesisBatchInfo":{"shardId":"shardId-000000000000"}}`

func TestOpenFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.jsonl")
	if err := os.WriteFile(path, []byte(openMessage+"\n"+openMessage+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := Opener{}.Open(ctx, Origin{FromFile, path})
	if err != nil || src.(*File).Len() != 2 {
		t.Fatalf("file: %v, %v; want 2 messages", src, err)
	}
	src, err = Opener{Stdin: strings.NewReader(openMessage)}.Open(ctx, Origin{FromFile, "-"})
	if err != nil || src.(*File).Len() != 1 {
		t.Fatalf("stdin: %v, %v; want 1 message", src, err)
	}
	if it, err := src.Next(ctx); err != nil || it.ID != "stdin:1" {
		t.Fatalf("stdin's message: %+v, %v", it, err)
	}
	if _, err := (Opener{}).Open(ctx, Origin{FromFile, filepath.Join(t.TempDir(), "none")}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	for _, o := range []Origin{{FromQueue, "http://q"}, {FromBucket, "b"}, {"topic", "t"}} {
		if _, err := (Opener{}).Open(ctx, o); err == nil {
			t.Errorf("%+v opened without its client", o)
		}
	}
}

// TestOpenQueueByARN looks the queue's URL up (goaws) and reads its message.
func TestOpenQueueByARN(t *testing.T) {
	ctx := context.Background()
	url, arn, err := createQueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send(t, url, []byte(openMessage))
	src, err := Opener{SQS: sqsC}.Open(ctx, Origin{FromQueue, arn})
	if err != nil {
		t.Fatal(err)
	}
	it, err := src.Next(ctx)
	if err != nil || string(it.Body) != openMessage {
		t.Fatalf("read %+v, %v; want the message sent", it, err)
	}
	if _, err := src.Next(ctx); err != io.EOF {
		t.Fatalf("after the only message: %v, want io.EOF", err)
	}
	if err := src.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := (Opener{SQS: sqsC}).Open(ctx, Origin{FromQueue, "arn:aws:sqs:us-east-1:1:a:b"}); err == nil || !strings.Contains(err.Error(), "not an SQS queue ARN") {
		t.Errorf("a resource with a colon: %v", err)
	}
}

func TestSummaryErr(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		sum  Summary
		err  error
		want string
	}{
		{Summary{Messages: 3, Redriven: 3}, nil, ""},
		{Summary{Messages: 3, Exported: 2, Skipped: 1}, nil, ""},
		{Summary{Messages: 4, Failing: 1, Expired: 2, Invalid: 1}, nil, "not everything was redriven: 1 still failing, 2 expired, 1 invalid (their messages were kept)"},
		{Summary{Messages: 2, Failing: 1}, fmt.Errorf("read: %w", context.Canceled), "interrupted after 2 messages: the rest are kept for the next redrive"},
		{Summary{Messages: 2, Failing: 1}, boom, "boom"},
	} {
		err := c.sum.Err(c.err)
		if (c.want == "" && err != nil) || (c.want != "" && (err == nil || err.Error() != c.want)) {
			t.Errorf("%+v.Err(%v) = %v, want %q", c.sum, c.err, err, c.want)
		}
	}
}
