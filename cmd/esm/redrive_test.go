package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// These tests run "esm run" with a function that fails on a poison record until the failure
// reaches the on-failure destination (goaws in this process, or an S3 stand-in), then "esm
// redrive" with the function fixed, both as real processes on kinesis-local.

var (
	sqsOnce sync.Once
	sqsSrv  *local.SQSServer
	sqsErr  error
)

// goaws starts the in-process SQS emulator once for the test binary; it stops with the process.
func goaws(t *testing.T) (*local.SQSServer, *sqs.Client) {
	t.Helper()
	sqsOnce.Do(func() { sqsSrv, sqsErr = local.StartSQS() })
	if sqsErr != nil {
		t.Fatal(sqsErr)
	}
	cfg, err := local.AWSConfig(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return sqsSrv, local.NewSQSClient(cfg, sqsSrv.Endpoint())
}

// redriveTemplate is a mapping with no retries whose failures go to destination.
func redriveTemplate(t *testing.T, stream, destinationType, destination string, batchSize int, bisect bool) string {
	t.Helper()
	tmpl := fmt.Sprintf(`Transform: AWS::Serverless-2016-10-31
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: redriven
      Runtime: provided.al2023
      Handler: bootstrap
      CodeUri: bin/
      Timeout: 5
      Events:
        Stream:
          Type: Kinesis
          Properties:
            Stream: arn:aws:kinesis:us-east-1:000000000000:stream/%s
            StartingPosition: TRIM_HORIZON
            BatchSize: %d
            BisectBatchOnFunctionError: %t
            MaximumRetryAttempts: 0
            DestinationConfig:
              OnFailure:
                Type: %s
                Destination: %s
`, stream, batchSize, bisect, destinationType, destination)
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(tmpl), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// endpoints points every AWS client of an esm process at the emulators.
func endpoints(sqsEndpoint, s3Endpoint string) []string {
	env := []string{"AWS_ENDPOINT_URL_KINESIS=" + kinesisEndpoint, "AWS_ACCESS_KEY_ID=AKIDLOCAL", "AWS_SECRET_ACCESS_KEY=local", "AWS_REGION=us-east-1"}
	if sqsEndpoint != "" {
		env = append(env, "AWS_ENDPOINT_URL_SQS="+sqsEndpoint)
	}
	if s3Endpoint != "" {
		env = append(env, "AWS_ENDPOINT_URL_S3="+s3Endpoint)
	}
	return env
}

// putSequenced writes data to the stream in one PutRecords call and returns the sequence numbers.
func putSequenced(t *testing.T, stream string, data ...string) []string {
	t.Helper()
	var recs []local.Record
	for i, d := range data {
		recs = append(recs, local.Record{PartitionKey: fmt.Sprint("key-", i), Data: []byte(d)})
	}
	res, err := local.PutRecords(context.Background(), kin, stream, recs)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []string
	for _, r := range res {
		seqs = append(seqs, aws.ToString(r.SequenceNumber))
	}
	return seqs
}

// failInto runs "esm run" with the function failing on poison until cond holds (the failure was
// delivered), then stops it.
func failInto(t *testing.T, tmpl string, env []string, dump string, cond func() bool) {
	t.Helper()
	env = append(env, "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH=poison", "EXAMPLE_EVENT_DUMP="+dump, "EXAMPLE_OUTPUT="+dump+".deliveries")
	cmd := spawnESM(t, append([]string{"ESM_INVOKE=example"}, env...), "run", "--template", tmpl, "--sqs-protocol", "query", "--poll-interval", "100ms", "--state-dir", filepath.Join(t.TempDir(), "state"))
	testkit.WaitFor(t, "the failure to reach the on-failure destination", 60*time.Second, cond)
	if code := cmd.stop(t); code != 0 {
		t.Fatalf("esm run exit code %d", code)
	}
}

// readEvents reads an EXAMPLE_EVENT_DUMP file: one event per invocation.
func readEvents(t *testing.T, path string) (lines []string, evs []events.KinesisEvent) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if l == "" {
			continue
		}
		var e events.KinesisEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		lines, evs = append(lines, l), append(evs, e)
	}
	return lines, evs
}

// lastFailed is the last invocation that held the poison record: the batch the failure record
// describes.
func lastFailed(t *testing.T, lines []string, evs []events.KinesisEvent) (string, events.KinesisEvent) {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		for _, r := range evs[i].Records {
			if string(r.Kinesis.Data) == "poison" {
				return lines[i], evs[i]
			}
		}
	}
	t.Fatal("no invocation held the poison record")
	return "", events.KinesisEvent{}
}

func queueCounts(t *testing.T, c *sqs.Client, url string) (visible, hidden string) {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)], out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]
}

// TestRedriveFromQueue: a poison record fails its batch, which goes to the SQS queue, bisected
// down to the record or whole; with the function fixed, "esm redrive" (reading the mapping's own
// on-failure queue) invokes it once with exactly the batch that failed: the same eventIDs, data
// and arrival timestamps, the records in order. The queue is empty after, and a second redrive
// does nothing. Without bisect, --dry-run and --to first show and export the batch (golden
// report) and keep the message.
func TestRedriveFromQueue(t *testing.T) {
	srv, sqsC := goaws(t)
	for _, bisect := range []bool{true, false} {
		t.Run(fmt.Sprintf("bisect=%v", bisect), func(t *testing.T) {
			ctx := context.Background()
			stream := newStream(t, 1)
			queue := "failures-" + stream
			url, arn, err := local.CreateQueue(ctx, sqsC, queue)
			if err != nil {
				t.Fatal(err)
			}
			data := []string{"a", "b", "poison", "d", "e", "f"}
			seqs := putSequenced(t, stream, data...)
			tmpl := redriveTemplate(t, stream, "SQS", arn, 6, bisect)
			env := endpoints(srv.Endpoint(), "")
			dir := t.TempDir()
			failInto(t, tmpl, env, filepath.Join(dir, "run.events"), func() bool { v, _ := queueCounts(t, sqsC, url); return v == "1" })
			lines, evs := readEvents(t, filepath.Join(dir, "run.events"))
			failedLine, failed := lastFailed(t, lines, evs)
			want := data
			if bisect {
				want = []string{"poison"}
			}
			if got := eventData(failed); !reflect.DeepEqual(got, want) {
				t.Fatalf("the failed batch held %q, want %q", got, want)
			}

			if !bisect {
				code, out, stderr := runESMEnv(t, env, "", "redrive", "--template", tmpl, "--sqs-protocol", "query", "--dry-run")
				if code != 0 {
					t.Fatalf("dry run: exit %d\n%s%s", code, out, stderr)
				}
				testkit.Golden(t, "redrive-dry-run.golden", normalize(out, seqs))
				export := filepath.Join(dir, "records.jsonl")
				code, out, stderr = runESMEnv(t, env, "", "redrive", "--template", tmpl, "--sqs-protocol", "query", "--to", export)
				if code != 0 {
					t.Fatalf("export: exit %d\n%s%s", code, out, stderr)
				}
				testkit.Golden(t, "redrive-export.golden", normalize(out, seqs))
				checkExport(t, export, failed)
				if v, h := queueCounts(t, sqsC, url); v != "1" || h != "0" {
					t.Fatalf("after the dry run and the export the queue shows %s visible, %s in flight; want the message, visible", v, h)
				}
			}

			code, out, stderr := runESMEnv(t, append(env, "EXAMPLE_EVENT_DUMP="+filepath.Join(dir, "redrive.events")), "",
				"redrive", "--template", tmpl, "--sqs-protocol", "query")
			if code != 0 || !strings.Contains(out, "1 message: 1 redriven, 0 exported, 0 still failing, 0 expired") {
				t.Fatalf("redrive: exit %d\n%s%s", code, out, stderr)
			}
			redriven, _ := readEvents(t, filepath.Join(dir, "redrive.events"))
			if len(redriven) != 1 || redriven[0] != failedLine {
				t.Fatalf("redrive invoked %d times; want once with the failed batch\n got: %q\nwant: %s", len(redriven), redriven, failedLine)
			}
			if bodies, err := local.ReceiveAll(ctx, sqsC, url); err != nil || len(bodies) != 0 {
				t.Fatalf("queue after the redrive: %q, %v", bodies, err)
			}
			if v, h := queueCounts(t, sqsC, url); v != "0" || h != "0" {
				t.Fatalf("queue after the redrive: %s visible, %s in flight", v, h)
			}
			code, out, stderr = runESMEnv(t, append(env, "EXAMPLE_EVENT_DUMP="+filepath.Join(dir, "redrive.events")), "",
				"redrive", "--template", tmpl, "--sqs-protocol", "query")
			if again, _ := readEvents(t, filepath.Join(dir, "redrive.events")); code != 0 || len(again) != 1 || !strings.Contains(out, "0 messages: 0 redriven") {
				t.Fatalf("second redrive: exit %d, %d invocations in all\n%s%s", code, len(again), out, stderr)
			}
		})
	}
}

func eventData(e events.KinesisEvent) []string {
	var out []string
	for _, r := range e.Records {
		out = append(out, string(r.Kinesis.Data))
	}
	return out
}

// checkExport: the exported lines are the failed event's records, in order.
func checkExport(t *testing.T, path string, failed events.KinesisEvent) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []events.KinesisEventRecord
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r events.KinesisEventRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("export line %q: %v", l, err)
		}
		got = append(got, r)
	}
	// The event carries arrival times in milliseconds; the function's dump of it (re-marshalled by
	// aws-lambda-go, float seconds twice) can differ below that, the export (read once) not.
	want := slices.Clone(failed.Records)
	for _, rs := range [][]events.KinesisEventRecord{got, want} {
		for i := range rs {
			at := &rs[i].Kinesis.ApproximateArrivalTimestamp
			at.Time = at.Round(time.Millisecond)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("exported %+v\nwant %+v", got, want)
	}
}

var messageID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// normalize makes a report comparable across runs: sequence numbers become <seq:N> (their index
// in seqs) and message IDs <message-id>.
func normalize(out string, seqs []string) []byte {
	for i, s := range seqs {
		out = strings.ReplaceAll(out, s, fmt.Sprintf("<seq:%d>", i))
	}
	return []byte(messageID.ReplaceAllString(out, "<message-id>"))
}

// s3Bucket is an S3 stand-in on 127.0.0.1 for one bucket, path-style: PutObject, GetObject,
// DeleteObject and ListObjectsV2 (one page).
type s3Bucket struct {
	mu      sync.Mutex
	name    string
	objects map[string][]byte
}

func (b *s3Bucket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key, ok := strings.CutPrefix(r.URL.Path, "/"+b.name)
	if !ok {
		http.Error(w, "NoSuchBucket", http.StatusNotFound)
		return
	}
	key = strings.TrimPrefix(key, "/")
	switch {
	case r.Method == http.MethodPut && key != "":
		body, _ := io.ReadAll(r.Body)
		b.objects[key] = body
		w.Header().Set("ETag", `"e"`)
	case r.Method == http.MethodGet && key == "":
		var keys []string
		for k := range b.objects {
			if strings.HasPrefix(k, r.URL.Query().Get("prefix")) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		var buf bytes.Buffer
		fmt.Fprintf(&buf, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>%s</Name><KeyCount>%d</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>`, b.name, len(keys))
		for _, k := range keys {
			buf.WriteString("<Contents><Key>")
			_ = xml.EscapeText(&buf, []byte(k))
			fmt.Fprintf(&buf, "</Key><Size>%d</Size></Contents>", len(b.objects[k]))
		}
		buf.WriteString("</ListBucketResult>")
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write(buf.Bytes())
	case r.Method == http.MethodGet:
		body, ok := b.objects[key]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>`)
			return
		}
		_, _ = w.Write(body)
	case r.Method == http.MethodDelete:
		delete(b.objects, key)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "not implemented", http.StatusNotImplemented)
	}
}

func (b *s3Bucket) keys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for k := range b.objects {
		out = append(out, k)
	}
	return out
}

// TestRedriveFromS3: the failure object esm wrote to the mapping's S3 destination is redriven
// from the payload it carries: the function gets the failed batch's bytes again, and the object
// is deleted.
func TestRedriveFromS3(t *testing.T) {
	bucket := &s3Bucket{name: "failures", objects: map[string][]byte{}}
	srv := httptest.NewServer(bucket)
	defer srv.Close()
	stream := newStream(t, 1)
	putSequenced(t, stream, "a", "poison", "c")
	tmpl := redriveTemplate(t, stream, "S3", "arn:aws:s3:::failures", 3, false)
	env := endpoints("", srv.URL)
	dir := t.TempDir()
	failInto(t, tmpl, env, filepath.Join(dir, "run.events"), func() bool { return len(bucket.keys()) == 1 })
	key := bucket.keys()[0]
	if !strings.HasPrefix(key, "aws/lambda/") {
		t.Fatalf("object key %s", key)
	}
	lines, evs := readEvents(t, filepath.Join(dir, "run.events"))
	failedLine, _ := lastFailed(t, lines, evs)
	code, out, stderr := runESMEnv(t, append(env, "EXAMPLE_EVENT_DUMP="+filepath.Join(dir, "redrive.events")), "", "redrive", "--template", tmpl)
	if code != 0 || !strings.Contains(out, "redriven       s3://failures/"+key) {
		t.Fatalf("redrive: exit %d\n%s%s", code, out, stderr)
	}
	if redriven, _ := readEvents(t, filepath.Join(dir, "redrive.events")); len(redriven) != 1 || redriven[0] != failedLine {
		t.Fatalf("redriven %q, want %s", redriven, failedLine)
	}
	if left := bucket.keys(); len(left) != 0 {
		t.Fatalf("bucket after the redrive: %q", left)
	}
}

// TestRedriveStillFailing: while the function still fails, redrive exits 1, reports the message
// as still failing and keeps it, visible for the next try.
func TestRedriveStillFailing(t *testing.T) {
	srv, sqsC := goaws(t)
	stream := newStream(t, 1)
	url, arn, err := local.CreateQueue(context.Background(), sqsC, "failures-"+stream)
	if err != nil {
		t.Fatal(err)
	}
	putSequenced(t, stream, "poison")
	tmpl := redriveTemplate(t, stream, "SQS", arn, 1, false)
	env := endpoints(srv.Endpoint(), "")
	failInto(t, tmpl, env, filepath.Join(t.TempDir(), "run.events"), func() bool { v, _ := queueCounts(t, sqsC, url); return v == "1" })
	code, out, stderr := runESMEnv(t, append(env, "EXAMPLE_FAIL=error", "EXAMPLE_FAIL_MATCH=poison"), "", "redrive", "--template", tmpl, "--sqs-protocol", "query", "--queue-url", url)
	if code != 1 || !strings.Contains(out, "function error (Unhandled)") || !strings.Contains(out, "1 message: 0 redriven, 0 exported, 1 still failing, 0 expired") ||
		!strings.Contains(stderr, "not everything was redriven") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	if v, h := queueCounts(t, sqsC, url); v != "1" || h != "0" {
		t.Fatalf("queue after a failing redrive: %s visible, %s in flight; want the message, visible", v, h)
	}
}

// TestRedriveUsage: where the messages would come from is checked before anything is read; a
// wrong choice is a usage error (exit 2) that says what to pass.
func TestRedriveUsage(t *testing.T) {
	noDest := writeTemplate(t, t.TempDir(), "s")
	topic := redriveTemplate(t, "s", "SNS", "arn:aws:sns:us-east-1:000000000000:failures", 1, false)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--template", noDest}, "the mapping has no on-failure destination: pass --queue-url, --bucket or --from"},
		{[]string{"--template", topic}, "is an SNS topic, which cannot be read back: pass --queue-url of a queue subscribed to it"},
		{[]string{"--template", topic, "--from", "f", "--queue-url", "u"}, "--queue-url and --from can't be used together"},
	} {
		code, out, stderr := runESMOutput(t, "", append([]string{"redrive"}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) || out != "" {
			t.Errorf("esm redrive %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, stderr, c.want)
		}
	}
}
