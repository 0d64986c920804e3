package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testenv"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

var (
	awsCfg  aws.Config
	kin     *kinesis.Client
	sqsSrv  *local.SQSServer
	sqsC    *sqs.Client
	nameSeq int
	nameMu  sync.Mutex
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	ctx := context.Background()
	endpoint, stop, err := testenv.KinesisEndpoint(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kinesis emulator:", err)
		return 1
	}
	defer stop()
	if awsCfg, err = local.AWSConfig(ctx, ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kin = local.NewKinesisClient(awsCfg, endpoint)
	if sqsSrv, sqsC, err = testenv.SQS(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sqsSrv.Close()
	return m.Run()
}

func uniqueName(prefix string) string {
	nameMu.Lock()
	defer nameMu.Unlock()
	nameSeq++
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), nameSeq)
}

func sampleFailure() poller.FailureRecord {
	at := time.Date(2026, 11, 29, 10, 0, 0, 123_000_000, time.UTC)
	return poller.FailureRecord{
		Condition: poller.ConditionRetryAttemptsExhausted, RequestID: "9f1c2a5e-0000-4000-8000-000000000001",
		FunctionARN: "arn:aws:lambda:us-east-1:000000000000:function:f", ApproximateInvokeCount: 3,
		Response:  &poller.FailureResponse{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: "Unhandled"},
		Timestamp: at, StreamARN: "arn:aws:kinesis:us-east-1:000000000000:stream/s", ShardID: "shardId-000000000002",
		StartSequenceNumber: "100", EndSequenceNumber: "200", FirstArrival: at, LastArrival: at, BatchSize: 4,
		Payload: []byte(`{"Records":[]}`),
	}
}

func TestQueueOnGoaws(t *testing.T) {
	ctx := context.Background()
	url, _, d := goawsQueue(t, "q")
	f := sampleFailure()
	if err := d.Deliver(ctx, f); err != nil {
		t.Fatal(err)
	}
	bodies, err := local.ReceiveAll(ctx, sqsC, url)
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 1 || bodies[0] != string(Message(f)) {
		t.Fatalf("queue holds %q, want exactly the failure message", bodies)
	}
	// A queue that does not exist is an error (retried by the poller), not a silent drop.
	missing, _ := New(awsCfg, "arn:aws:sqs:us-east-1:000000000000:"+uniqueName("missing"), WithEndpointURL(sqsSrv.Endpoint()), WithSQSProtocol("query"))
	if err := missing.Deliver(ctx, f); err == nil {
		t.Fatal("delivery to a missing queue succeeded")
	}
}

// TestTopicPublish checks the SNS Publish request against an httptest server that speaks SNS's
// query protocol: the message is the failure JSON, with no subject and no attributes.
func TestTopicPublish(t *testing.T) {
	var got url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got, _ = url.ParseQuery(string(body))
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprint(w, `<PublishResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishResult><MessageId>m-1</MessageId></PublishResult><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></PublishResponse>`)
	}))
	defer srv.Close()
	topic := "arn:aws:sns:us-east-1:000000000000:failures"
	d, err := New(awsCfg, topic, WithEndpointURL(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	f := sampleFailure()
	if err := d.Deliver(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if got.Get("Action") != "Publish" || got.Get("TopicArn") != topic || got.Get("Message") != string(Message(f)) {
		t.Fatalf("publish request %v", got)
	}
	for k := range got {
		if k == "Subject" || strings.HasPrefix(k, "MessageAttributes") {
			t.Fatalf("publish carries %s; Lambda sends neither subject nor attributes", k)
		}
	}
}

// TestBucketPut checks the S3 PutObject request against an httptest server: Lambda's key layout
// and the metadata-plus-payload body.
func TestBucketPut(t *testing.T) {
	var path string
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			http.Error(w, "want PUT", http.StatusMethodNotAllowed)
			return
		}
		path = r.URL.Path
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("ETag", `"e"`)
	}))
	defer srv.Close()
	id := "3d1e0c7a-9b2f-4c55-8e61-0f4a2b7c9d13" // the mapping's UUID, as the service passes it
	d, err := New(awsCfg, "arn:aws:s3:::failures", WithEndpointURL(srv.URL), WithMappingUUID(id))
	if err != nil {
		t.Fatal(err)
	}
	f := sampleFailure()
	if err := d.Deliver(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^/failures/aws/lambda/` + id + `/shardId-000000000002/2026/11/29/2026-11-29T10\.00\.00-[0-9a-f-]{36}$`)
	if !re.MatchString(path) {
		t.Fatalf("object path %q", path)
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatal(err)
	}
	if obj["payload"] != `{"Records":[]}` || obj["KinesisBatchInfo"] == nil || obj["requestContext"] == nil {
		t.Fatalf("object body %s", body)
	}
}

type mappingRun struct {
	store *poller.MemoryStore
	calls chan []string
	stop  func() error
}

// runMapping runs a poller on kinesis-local with an in-process handler that fails whenever a
// batch holds a record whose data is "poison".
func runMapping(t *testing.T, streamARN string, cfg poller.Config, dest poller.Destination, opts ...poller.Option) *mappingRun {
	t.Helper()
	run := &mappingRun{store: poller.NewMemoryStore(), calls: make(chan []string, 1000)}
	handler := func(_ context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		var data []string
		poison := false
		for _, r := range e.Records {
			data = append(data, string(r.Kinesis.Data))
			poison = poison || string(r.Kinesis.Data) == "poison"
		}
		run.calls <- data
		if poison {
			return events.KinesisEventResponse{}, errors.New("poison record")
		}
		return events.KinesisEventResponse{}, nil
	}
	cfg.StartingPosition = poller.TrimHorizon
	cfg.PollInterval = 100 * time.Millisecond
	fn := poller.WithFunctionARN("arn:aws:lambda:us-east-1:000000000000:function:f")
	p, err := poller.New(kinesissrc.MustNew(kin, streamARN), cfg, run.store, inprocess.New(handler), append([]poller.Option{poller.WithDestination(dest), fn}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	var runErr error
	run.stop = func() error { once.Do(func() { cancel(); runErr = <-done }); return runErr }
	t.Cleanup(func() { _ = run.stop() })
	return run
}

func newStream(t *testing.T, records []string) (arn string, seqs []string) {
	t.Helper()
	ctx := context.Background()
	name := uniqueName("dlq")
	arn, err := local.CreateStream(ctx, kin, name, 1)
	if err != nil {
		t.Fatal(err)
	}
	var recs []local.Record
	for _, r := range records {
		recs = append(recs, local.Record{PartitionKey: "k", Data: []byte(r)})
	}
	res, err := local.PutRecords(ctx, kin, name, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		seqs = append(seqs, aws.ToString(r.SequenceNumber))
	}
	return arn, seqs
}

func checkpointOf(run *mappingRun) string {
	p, _ := run.store.Load(context.Background())
	return p["shardId-000000000000"].Checkpoint
}

// TestPoisonRecordReachesQueue: 100 records with one poison record, MaximumRetryAttempts 2, an
// SQS destination on goaws. With bisect, every good record is handled and the poison record alone
// reaches the queue; without, the whole batch does. Either way the shard moves on.
func TestPoisonRecordReachesQueue(t *testing.T) {
	for _, bisect := range []bool{true, false} {
		t.Run(fmt.Sprintf("bisect=%v", bisect), func(t *testing.T) {
			ctx := context.Background()
			var records []string
			for i := range 100 {
				records = append(records, fmt.Sprint("good-", i))
			}
			records[61] = "poison"
			streamARN, seqs := newStream(t, records)
			queueURL, queueARN, dest := goawsQueue(t, "failures")
			run := runMapping(t, streamARN, poller.Config{BatchSize: 100, MaximumRetryAttempts: ptr(2),
				BisectBatchOnFunctionError: bisect, OnFailureDestination: queueARN}, dest)
			testkit.WaitFor(t, "the shard to move past the batch", 30*time.Second, func() bool { return checkpointOf(run) == seqs[99] })
			if err := run.stop(); err != nil {
				t.Fatal(err)
			}
			close(run.calls)
			handled := map[string]bool{}
			for call := range run.calls {
				if !containsPoison(call) {
					for _, d := range call {
						handled[d] = true
					}
				}
			}
			bodies, err := local.ReceiveAll(ctx, sqsC, queueURL)
			if err != nil {
				t.Fatal(err)
			}
			if len(bodies) != 1 {
				t.Fatalf("queue holds %d messages, want 1", len(bodies))
			}
			var msg struct {
				RequestContext struct {
					Condition              string `json:"condition"`
					ApproximateInvokeCount int    `json:"approximateInvokeCount"`
				} `json:"requestContext"`
				ResponseContext struct {
					FunctionError *string `json:"functionError"`
				} `json:"responseContext"`
				Info struct {
					Start     string `json:"startSequenceNumber"`
					End       string `json:"endSequenceNumber"`
					BatchSize int    `json:"batchSize"`
					StreamARN string `json:"streamArn"`
				} `json:"KinesisBatchInfo"`
			}
			if err := json.Unmarshal([]byte(bodies[0]), &msg); err != nil {
				t.Fatal(err)
			}
			wantStart, wantEnd, wantSize, wantHandled := seqs[61], seqs[61], 1, 99
			if !bisect {
				wantStart, wantEnd, wantSize, wantHandled = seqs[0], seqs[99], 100, 0
			}
			if msg.RequestContext.Condition != "RetryAttemptsExhausted" || msg.RequestContext.ApproximateInvokeCount != 3 ||
				msg.ResponseContext.FunctionError == nil || *msg.ResponseContext.FunctionError != "Unhandled" ||
				msg.Info.Start != wantStart || msg.Info.End != wantEnd || msg.Info.BatchSize != wantSize || msg.Info.StreamARN != streamARN {
				t.Fatalf("queue message %s", bodies[0])
			}
			if len(handled) != wantHandled {
				t.Fatalf("%d good records handled, want %d", len(handled), wantHandled)
			}
		})
	}
}

func containsPoison(call []string) bool {
	for _, d := range call {
		if d == "poison" {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// goawsQueue creates a queue on goaws (its name starts with prefix) and returns its URL, its ARN
// and New's destination for it.
func goawsQueue(t *testing.T, prefix string) (url, arn string, dest poller.Destination) {
	t.Helper()
	url, arn, err := local.CreateQueue(context.Background(), sqsC, uniqueName(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if dest, err = New(awsCfg, arn, WithEndpointURL(sqsSrv.Endpoint()), WithSQSProtocol("query")); err != nil {
		t.Fatal(err)
	}
	return url, arn, dest
}

// queueDown makes goaws answer 503 until the test ends or sets it up again.
func queueDown(t *testing.T) {
	sqsSrv.SetDown(true)
	t.Cleanup(func() { sqsSrv.SetDown(false) })
}

// TestDestinationOutage: while the queue's service is down the poison record is neither lost nor
// checkpointed and the records behind it wait; when it comes back, everything flows.
func TestDestinationOutage(t *testing.T) {
	ctx := context.Background()
	streamARN, seqs := newStream(t, []string{"a", "poison", "c", "d"})
	queueURL, queueARN, dest := goawsQueue(t, "outage")
	queueDown(t)
	run := runMapping(t, streamARN, poller.Config{BatchSize: 1, MaximumRetryAttempts: ptr(0), OnFailureDestination: queueARN}, dest)
	// "a" succeeds, "poison" fails once and is discarded, but its failure record cannot be sent.
	testkit.WaitFor(t, "the poison record's attempt", 30*time.Second, func() bool { return len(run.calls) >= 2 })
	deadline := time.Now().Add(3 * time.Second) // several delivery retries' worth of outage
	for time.Now().Before(deadline) {
		if cp := checkpointOf(run); cp != seqs[0] {
			t.Fatalf("checkpoint %q during the outage; want it held at the record before the poison one", cp)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(run.calls); n != 2 {
		t.Fatalf("%d invocations during the outage, want 2: records behind the undelivered one must wait", n)
	}
	sqsSrv.SetDown(false)
	testkit.WaitFor(t, "records to flow again", 30*time.Second, func() bool { return checkpointOf(run) == seqs[3] })
	bodies, err := local.ReceiveAll(ctx, sqsC, queueURL)
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 1 || !strings.Contains(bodies[0], seqs[1]) {
		t.Fatalf("queue holds %q, want the poison record's failure message", bodies)
	}
}

// failureCounts counts what Lambda counts when a destination cannot be reached.
type failureCounts struct {
	poller.NopObserver
	mu                              sync.Mutex
	deliveryFailures, dropped, sent int
}

func (c *failureCounts) DestinationDeliveryFailed(string) {
	c.mu.Lock()
	c.deliveryFailures++
	c.mu.Unlock()
}
func (c *failureCounts) RecordsDropped(_ string, n int)   { c.mu.Lock(); c.dropped += n; c.mu.Unlock() }
func (c *failureCounts) RecordsDelivered(_ string, n int) { c.mu.Lock(); c.sent += n; c.mu.Unlock() }

func (c *failureCounts) get() (failures, dropped, sent int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deliveryFailures, c.dropped, c.sent
}

// TestDestinationOutageDropMode: with --on-destination-failure drop, goaws answering 503 makes the
// poison record's failure record undeliverable; as Lambda does, the records are dropped, the
// failure is counted (DestinationDeliveryFailures, DroppedEventCount) and the shard moves on.
func TestDestinationOutageDropMode(t *testing.T) {
	ctx := context.Background()
	streamARN, seqs := newStream(t, []string{"a", "poison", "c", "d"})
	queueURL, queueARN, dest := goawsQueue(t, "outage-drop")
	queueDown(t)
	counts := &failureCounts{}
	run := runMapping(t, streamARN, poller.Config{BatchSize: 1, MaximumRetryAttempts: ptr(0), OnFailureDestination: queueARN,
		OnDestinationFailure: poller.DestinationFailureDrop}, dest, poller.WithObserver(counts))
	testkit.WaitFor(t, "the shard to move past the poison record", 30*time.Second, func() bool { return checkpointOf(run) == seqs[3] })
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	sqsSrv.SetDown(false)
	close(run.calls)
	var calls []string
	for c := range run.calls {
		calls = append(calls, c...)
	}
	if fmt.Sprint(calls) != "[a poison c d]" {
		t.Fatalf("invocations %v, want every record once: the shard did not wait", calls)
	}
	if failures, dropped, sent := counts.get(); failures != 1 || dropped != 1 || sent != 0 {
		t.Fatalf("DestinationDeliveryFailures %d, dropped %d, delivered %d; want 1, 1, 0", failures, dropped, sent)
	}
	bodies, err := local.ReceiveAll(ctx, sqsC, queueURL)
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 0 {
		t.Fatalf("queue holds %q; the dropped failure record must not arrive later", bodies)
	}
}
