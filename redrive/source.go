package redrive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Item is one message read from a Source.
type Item struct {
	// ID names the message in reports: the SQS message ID, the S3 object key, or FILE:N.
	ID   string
	Body []byte

	handle string // SQS receipt handle, S3 key
	index  int    // position in a file
}

// Source is where on-failure messages come from. A redrive reads every message with Next and
// deletes, with Delete, only those whose records all succeeded.
type Source interface {
	// Next returns the next message, or io.EOF when there are no more.
	Next(ctx context.Context) (*Item, error)
	// Delete removes a message whose records were redriven.
	Delete(ctx context.Context, it *Item) error
	// Close ends the reading; the messages read and not deleted stay, ready for the next redrive.
	Close(ctx context.Context) error
}

// sized is a Source that knows how many messages it holds.
type sized interface{ Len() int }

// SQSAPI is the part of the SQS client a queue source uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// QueueURLAPI looks a queue's URL up from its name.
type QueueURLAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
}

// QueueURL returns the URL of the queue with ARN arn:<partition>:sqs:<region>:<account>:<name>.
func QueueURL(ctx context.Context, c QueueURLAPI, queueARN string) (string, error) {
	a, err := arn.Parse(queueARN)
	if err != nil || a.Service != "sqs" || a.Resource == "" || strings.Contains(a.Resource, ":") {
		return "", fmt.Errorf("not an SQS queue ARN: %q", queueARN)
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(a.Resource)}
	if a.AccountID != "" {
		in.QueueOwnerAWSAccountId = aws.String(a.AccountID)
	}
	out, err := c.GetQueueUrl(ctx, in)
	if err != nil {
		return "", fmt.Errorf("get URL of queue %s: %w", a.Resource, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// Queue reads messages from an SQS queue. A received message stays invisible to other consumers
// while the redrive runs (the visibility timeout given to NewQueue); a message not deleted is made
// visible again by Close, so the next redrive sees it at once.
type Queue struct {
	client     SQSAPI
	url        string
	visibility time.Duration
	buf        []*Item
	kept       map[string]*Item // received and not deleted, by message ID
	done       bool
}

// receiveWait is how long one receive waits for messages (long polling), so that a queue whose
// messages are spread over servers is read to its end.
const receiveWait = 1

// NewQueue returns the source for the queue at url. visibility must cover the redrive of ten
// messages (one receive); at most 12 hours.
func NewQueue(client SQSAPI, url string, visibility time.Duration) *Queue {
	return &Queue{client: client, url: url, visibility: min(max(visibility, time.Minute), 12*time.Hour), kept: map[string]*Item{}}
}

// Next implements Source.
func (q *Queue) Next(ctx context.Context) (*Item, error) {
	for len(q.buf) == 0 {
		if q.done {
			return nil, io.EOF
		}
		out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), MaxNumberOfMessages: 10,
			VisibilityTimeout: int32(q.visibility / time.Second), WaitTimeSeconds: receiveWait})
		if err != nil {
			return nil, fmt.Errorf("receive from %s: %w", q.url, err)
		}
		if len(out.Messages) == 0 {
			q.done = true
		}
		for _, m := range out.Messages {
			id := aws.ToString(m.MessageId)
			if old, ok := q.kept[id]; ok { // seen in this run already: keep the newest handle only
				old.handle = aws.ToString(m.ReceiptHandle)
				continue
			}
			it := &Item{ID: id, Body: []byte(aws.ToString(m.Body)), handle: aws.ToString(m.ReceiptHandle)}
			q.kept[id] = it
			q.buf = append(q.buf, it)
		}
	}
	it := q.buf[0]
	q.buf = q.buf[1:]
	return it, nil
}

// Delete implements Source.
func (q *Queue) Delete(ctx context.Context, it *Item) error {
	if _, err := q.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: aws.String(it.handle)}); err != nil {
		return fmt.Errorf("delete message %s from %s: %w", it.ID, q.url, err)
	}
	delete(q.kept, it.ID)
	return nil
}

// Close implements Source: every message kept is visible again at once.
func (q *Queue) Close(ctx context.Context) error {
	var errs []error
	for _, it := range q.kept {
		if _, err := q.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q.url),
			ReceiptHandle: aws.String(it.handle), VisibilityTimeout: 0}); err != nil {
			errs = append(errs, fmt.Errorf("make message %s visible again: %w", it.ID, err))
		}
	}
	q.kept = map[string]*Item{}
	return errors.Join(errs...)
}

// S3API is the part of the S3 client a bucket source uses.
type S3API interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// Bucket reads the on-failure objects under a prefix of an S3 bucket, in key order (Lambda's keys
// sort by mapping, shard and time).
type Bucket struct {
	client S3API
	bucket string
	keys   []string
}

// maxObjectBytes bounds one failure object: a 6 MiB payload, escaped, with its metadata.
const maxObjectBytes = 16 << 20

// ListBucket lists the objects under prefix and returns the source that reads them.
func ListBucket(ctx context.Context, client S3API, bucket, prefix string) (*Bucket, error) {
	b := &Bucket{client: client, bucket: bucket}
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, o := range out.Contents {
			b.keys = append(b.keys, aws.ToString(o.Key))
		}
	}
	return b, nil
}

// Len is how many objects remain to be read.
func (b *Bucket) Len() int { return len(b.keys) }

// Next implements Source.
func (b *Bucket) Next(ctx context.Context) (*Item, error) {
	if len(b.keys) == 0 {
		return nil, io.EOF
	}
	key := b.keys[0]
	b.keys = b.keys[1:]
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s: %w", b.bucket, key, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(io.LimitReader(out.Body, maxObjectBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s: %w", b.bucket, key, err)
	}
	if len(body) > maxObjectBytes {
		body = nil // too large to be a failure object: reported as not a message
	}
	return &Item{ID: "s3://" + b.bucket + "/" + key, Body: body, handle: key}, nil
}

// Delete implements Source.
func (b *Bucket) Delete(ctx context.Context, it *Item) error {
	if _, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(it.handle)}); err != nil {
		return fmt.Errorf("delete %s: %w", it.ID, err)
	}
	return nil
}

// Close implements Source.
func (b *Bucket) Close(context.Context) error { return nil }

// File reads messages from a file: JSON values one after another (JSON lines, or pretty-printed),
// each an on-failure message, an array of them, or an SQS ReceiveMessage response (its Messages'
// bodies). Close rewrites the file without the messages that were deleted, one message a line, so
// a second redrive of the same file redrives nothing twice.
type File struct {
	path    string // "" for a stream that is not rewritten
	items   []*Item
	next    int
	deleted map[int]bool
}

// ReadFile reads the messages of the file at path.
func ReadFile(path string) (*File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := ReadMessages(bytes.NewReader(raw), path)
	if err != nil {
		return nil, err
	}
	f.path = path
	return f, nil
}

// ReadMessages reads messages from r, as ReadFile does, naming them name:N; Close rewrites nothing.
func ReadMessages(r io.Reader, name string) (*File, error) {
	f := &File{deleted: map[int]bool{}}
	dec := json.NewDecoder(r)
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: message %d: %w", name, len(f.items)+1, err)
		}
		for _, body := range splitValue(v) {
			n := len(f.items)
			f.items = append(f.items, &Item{ID: fmt.Sprintf("%s:%d", name, n+1), Body: body, index: n})
		}
	}
	return f, nil
}

// splitValue returns the messages one JSON value of a file holds.
func splitValue(v json.RawMessage) [][]byte {
	var arr []json.RawMessage
	if json.Unmarshal(v, &arr) == nil {
		var out [][]byte
		for _, e := range arr {
			out = append(out, splitValue(e)...)
		}
		return out
	}
	var resp struct {
		Messages []struct {
			Body *string `json:"Body"`
		} `json:"Messages"`
	}
	if json.Unmarshal(v, &resp) == nil && len(resp.Messages) > 0 {
		var out [][]byte
		for _, m := range resp.Messages {
			if m.Body != nil {
				out = append(out, []byte(*m.Body))
			}
		}
		return out
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return [][]byte{v}
	}
	return [][]byte{buf.Bytes()}
}

// Len is how many messages remain to be read.
func (f *File) Len() int { return len(f.items) - f.next }

// Next implements Source.
func (f *File) Next(context.Context) (*Item, error) {
	if f.next == len(f.items) {
		return nil, io.EOF
	}
	f.next++
	return f.items[f.next-1], nil
}

// Delete implements Source: the message is left out when Close rewrites the file.
func (f *File) Delete(_ context.Context, it *Item) error {
	f.deleted[it.index] = true
	return nil
}

// Close implements Source: the file is rewritten, atomically, without the deleted messages.
func (f *File) Close(context.Context) error {
	if f.path == "" || len(f.deleted) == 0 {
		return nil
	}
	var buf bytes.Buffer
	for i, it := range f.items {
		if !f.deleted[i] {
			buf.Write(it.Body)
			buf.WriteByte('\n')
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), "."+filepath.Base(f.path)+".*")
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", f.path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("rewrite %s: %w", f.path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("rewrite %s: %w", f.path, err)
	}
	if st, err := os.Stat(f.path); err == nil {
		_ = os.Chmod(tmp.Name(), st.Mode().Perm())
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return fmt.Errorf("rewrite %s: %w", f.path, err)
	}
	f.deleted = map[int]bool{}
	return nil
}
