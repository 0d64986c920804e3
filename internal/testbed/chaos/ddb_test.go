package chaos

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"

	"github.com/kinesis-esm/esm/internal/testbed/local"
)

// TestDDBRecordData: a change's data is its key and counter, read from the new image of an
// INSERT or MODIFY and one past the old image's of a REMOVE; a record that is not the
// producer's (no counter, another key's counter, no string key) has none.
func TestDDBRecordData(t *testing.T) {
	img := func(k, v string) map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{"k": events.NewStringAttribute(k), "v": events.NewStringAttribute(v)}
	}
	rec := func(name string, keys, old, new map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
		return events.DynamoDBEventRecord{EventName: name, Change: events.DynamoDBStreamRecord{Keys: keys, OldImage: old, NewImage: new, SequenceNumber: "100"}}
	}
	key := map[string]events.DynamoDBAttributeValue{"k": events.NewStringAttribute("key-1")}
	for _, c := range []struct {
		name string
		rec  events.DynamoDBEventRecord
		want string
	}{
		{"insert", rec("INSERT", key, nil, img("key-1", "key-1:0")), "key-1:0"},
		{"modify", rec("MODIFY", key, img("key-1", "key-1:3"), img("key-1", "key-1:4")), "key-1:4"},
		{"remove", rec("REMOVE", key, img("key-1", "key-1:4"), nil), "key-1:5"},
		{"no counter", rec("INSERT", key, nil, map[string]events.DynamoDBAttributeValue{"k": events.NewStringAttribute("key-1")}), ""},
		{"another key's counter", rec("INSERT", key, nil, img("key-1", "key-2:0")), ""},
		{"a number key", rec("INSERT", map[string]events.DynamoDBAttributeValue{"k": events.NewNumberAttribute("1")}, nil, img("1", "1:0")), ""},
	} {
		r := ddbRecord(c.rec)
		if r.Data != c.want || r.Sequence != "100" || r.Change == nil {
			t.Errorf("%s: data %q, sequence %q, change %v; want %q, 100 and the record", c.name, r.Data, r.Sequence, r.Change, c.want)
		}
	}
}

// TestFunctionDecodesDynamoDBEvents: the function of a DynamoDB run records the records of a
// DynamoDB event, its key and counter each, and leaves the shard to be learnt from the stream.
func TestFunctionDecodesDynamoDBEvents(t *testing.T) {
	f, err := NewFunctionServer(1, 0, SourceDynamoDB)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	body := `{"Records":[{"eventID":"e1","eventName":"INSERT","eventSource":"aws:dynamodb","dynamodb":{"Keys":{"k":{"S":"key-0"}},` +
		`"NewImage":{"k":{"S":"key-0"},"v":{"S":"key-0:0"}},"SequenceNumber":"101","SizeBytes":20,"StreamViewType":"NEW_AND_OLD_IMAGES"}},` +
		`{"eventID":"e2","eventName":"REMOVE","eventSource":"aws:dynamodb","dynamodb":{"Keys":{"k":{"S":"key-0"}},` +
		`"OldImage":{"k":{"S":"key-0"},"v":{"S":"key-0:0"}},"SequenceNumber":"102","SizeBytes":20,"StreamViewType":"NEW_AND_OLD_IMAGES"}}]}`
	req, err := http.NewRequest(http.MethodPost, f.URL()+"/e0/2015-03-31/functions/chaos/invocations", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(workerHeader, "w1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	invs := f.Invocations()
	if resp.StatusCode != 200 || len(invs) != 1 || len(invs[0].Records) != 2 {
		t.Fatalf("status %d, invocations %+v", resp.StatusCode, invs)
	}
	inv := invs[0]
	if inv.Worker != "w1" || inv.Shard != "" || inv.Records[0].Data != "key-0:0" || inv.Records[1].Data != "key-0:1" ||
		inv.Records[1].Sequence != "102" || inv.Records[1].Change.EventName != "REMOVE" {
		t.Fatalf("invocation %+v", inv)
	}
}

// TestProxyRoutesDynamoDBStreams: DynamoDB Streams calls go to their own target, apart from
// DynamoDB's, are cut off by a partition of their own, and fail as DynamoDB Streams fails.
func TestProxyRoutesDynamoDBStreams(t *testing.T) {
	d := newBackend(t, "application/x-amz-json-1.0", `{}`)
	s := newBackend(t, "application/x-amz-json-1.0", `{"Records":[],"NextShardIterator":"it"}`)
	counts := &Counts{}
	var rates [numServices]Rates
	p, err := NewProxy("w7", 1, [numServices]string{DynamoDB: d.srv.URL, DynamoDBStreams: s.srv.URL}, rates, counts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cfg, err := local.AWSConfig(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.RetryMaxAttempts = 1
	_, dc := clients(t, p.URL())
	_, sc := local.DDBClients(cfg, p.URL())
	getRecords := func(sc *dynamodbstreams.Client) error {
		_, err := sc.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("it")})
		return err
	}
	if err := getRecords(sc); err != nil {
		t.Fatalf("GetRecords: %v", err)
	}
	if err := getItem(dc); err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if g := s.got(); len(g) != 1 || g[0] != "w7 DynamoDBStreams_20120810.GetRecords/" {
		t.Errorf("dynamodbstreams got %q", g)
	}
	if g := d.got(); len(g) != 1 || g[0] != "w7 DynamoDB_20120810.GetItem/" {
		t.Errorf("dynamodb got %q", g)
	}
	// A partition's kind names the services it cuts off; cut off from DynamoDB Streams alone,
	// the worker still reaches DynamoDB.
	cut := partitionOf("partition dynamodbstreams")
	if both := partitionOf("partition dynamodb+dynamodbstreams"); len(cut) != 1 || cut[0] != DynamoDBStreams ||
		len(both) != 2 || both[0] != DynamoDB || both[1] != DynamoDBStreams {
		t.Fatalf("partitionOf: %v, %v", cut, both)
	}
	p.Partition(cut[0])
	done := make(chan error, 1)
	go func() { done <- getRecords(sc) }()
	if err := getItem(dc); err != nil {
		t.Errorf("GetItem during a DynamoDB Streams partition: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); counts.Snapshot()["dynamodbstreams partitioned"] == 0; {
		if time.Now().After(deadline) {
			t.Fatal("GetRecords never reached the proxy")
		}
		time.Sleep(5 * time.Millisecond) // the held request is counted when it arrives
	}
	p.Heal(DynamoDBStreams)
	if err := <-done; err == nil {
		t.Error("GetRecords went through a partition")
	}
	if n := len(s.got()); n != 1 {
		t.Errorf("%d requests reached DynamoDB Streams, want the first only", n)
	}

	// Throttled and failing as DynamoDB Streams answers: the SDK reads its own exceptions.
	rates[DynamoDBStreams] = Rates{Throttle: 1}
	tp, err := NewProxy("w8", 2, [numServices]string{DynamoDBStreams: s.srv.URL}, rates, counts)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	_, tsc := local.DDBClients(cfg, tp.URL())
	seen := map[string]bool{}
	for range 20 {
		err := getRecords(tsc)
		var le *stypes.LimitExceededException
		var ae smithy.APIError
		switch {
		case errors.As(err, &le):
			seen["limit"] = true
		case errors.As(err, &ae) && ae.ErrorCode() == "ThrottlingException":
			seen["throttling"] = true
		default:
			t.Fatalf("throttled GetRecords: %v", err)
		}
	}
	if len(seen) != 2 {
		t.Errorf("shapes seen %v, want both", seen)
	}
	rates[DynamoDBStreams] = Rates{ServerError: 1}
	ep, err := NewProxy("w9", 3, [numServices]string{DynamoDBStreams: s.srv.URL}, rates, counts)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	_, esc := local.DDBClients(cfg, ep.URL())
	var ise *stypes.InternalServerError
	var ae smithy.APIError
	if err := getRecords(esc); !errors.As(err, &ise) && !(errors.As(err, &ae) && ae.ErrorCode() == "ServiceUnavailable") {
		t.Errorf("failing GetRecords: %v, want InternalServerError or ServiceUnavailable", err)
	}
	if c := counts.Snapshot(); c["dynamodbstreams throttle"] != 20 || c["dynamodbstreams 5xx"] != 1 {
		t.Errorf("counts %v", c)
	}
}
