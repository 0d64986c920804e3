package poller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesis-esm/esm/fake/fakedynamo"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/source"
	"github.com/kinesis-esm/esm/source/dynamostreams"
)

// ddbTable is a table of the in-memory DynamoDB whose NEW_AND_OLD_IMAGES stream's shards rotate
// every rotate, and the source that reads its stream.
func ddbTable(t *testing.T, rotate time.Duration) (*fakedynamo.DB, *dynamostreams.Stream) {
	t.Helper()
	db := fakedynamo.New(fakedynamo.WithShardRotation(rotate))
	arn, err := local.CreateStreamTable(context.Background(), db, "orders", ddbtypes.StreamViewTypeNewAndOldImages)
	if err != nil {
		t.Fatal(err)
	}
	src, err := dynamostreams.New(db, arn)
	if err != nil {
		t.Fatal(err)
	}
	return db, src
}

// payloads records the events a function was invoked with.
type payloads struct {
	mu  sync.Mutex
	got [][]byte
}

func (p *payloads) Invoke(_ context.Context, payload []byte) (invoke.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, append([]byte(nil), payload...))
	return invoke.Response{StatusCode: 200, Payload: []byte("null")}, nil
}

// TestDynamoDBStreamEndToEnd: the engine reads a DynamoDB stream through the seam alone. 60
// writes over 6 keys while the shards rotate every second reach the function as
// events.DynamoDBEvent, each event exactly {"Records":[…]} of the records' objects as the source
// gives them (no Kinesis shape), every change once, in order per key; the filter matches the
// record object (eventName); a caught-up shard is polled every 250 ms, DynamoDB Streams' pace
// from the source's Limits.
func TestDynamoDBStreamEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, src := ddbTable(t, time.Second)
		inv := &payloads{}
		cfg := Config{StartingPosition: TrimHorizon, BatchSize: 7, ShardSyncInterval: time.Second,
			FilterPatterns: []string{`{"eventName":["INSERT","MODIFY"]}`}}
		for i := range 60 {
			item := map[string]ddbtypes.AttributeValue{"k": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprint("key-", i%6)},
				"v": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(i)}}
			if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("orders"), Item: item}); err != nil {
				t.Fatal(err)
			}
			if i == 59 { // one change the filter leaves out
				key := map[string]ddbtypes.AttributeValue{"k": &ddbtypes.AttributeValueMemberS{Value: "key-0"}}
				if _, err := db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String("orders"), Key: key}); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(50 * time.Millisecond) // 3 s of writes: three rotations
		}
		p, err := New(src, cfg, NewMemoryStore(), inv, WithUntilCaughtUp(UntilCaughtUp{}))
		if err != nil {
			t.Fatal(err)
		}
		if p.cfg.PollInterval != dynamostreams.PollInterval {
			t.Fatalf("PollInterval %s, want DynamoDB Streams' %s", p.cfg.PollInterval, dynamostreams.PollInterval)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Run(ctx); err != nil {
			t.Fatal(err)
		}
		checkDDBEvents(t, src, inv.got)
		if shards, err := src.Shards(context.Background()); err != nil || len(shards) < 4 {
			t.Fatalf("%d shards (%v): want the writes across three rotations at least", len(shards), err)
		}
	})
}

// sourceData reads every shard of src from TRIM_HORIZON to its end or its tip: each record's Data
// by sequence number.
func sourceData(t *testing.T, src Source) map[string]string {
	t.Helper()
	ctx := context.Background()
	shards, err := src.Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]string{}
	for _, sh := range shards {
		it, err := src.Open(ctx, sh.ID, source.Position{Type: source.TrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		for it != "" {
			page, err := src.Read(ctx, sh.ID, it, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Records {
				data[r.SequenceNumber] = string(r.Data)
			}
			if len(page.Records) == 0 && !sh.Closed {
				break
			}
			it = page.Next
		}
	}
	return data
}

// checkDDBEvents checks the events of TestDynamoDBStreamEndToEnd: each is the source's records'
// Data in {"Records":[…]}, every put once and in put order per key, no REMOVE.
func checkDDBEvents(t *testing.T, src Source, events [][]byte) {
	t.Helper()
	data := sourceData(t, src)
	last, seen := map[string]int{}, 0
	for _, ev := range events {
		var e struct {
			Records []json.RawMessage `json:"Records"`
		}
		if err := json.Unmarshal(ev, &e); err != nil {
			t.Fatalf("event is not JSON: %v\n%s", err, ev)
		}
		var objs []string
		for _, r := range e.Records {
			objs = append(objs, string(r))
			var rec struct {
				EventName, EventSource, EventSourceARN string
				Dynamodb                               struct {
					NewImage       struct{ K, V struct{ S, N string } }
					SequenceNumber string
				}
			}
			if err := json.Unmarshal(r, &rec); err != nil {
				t.Fatal(err)
			}
			if string(r) != data[rec.Dynamodb.SequenceNumber] {
				t.Fatalf("record object\n%s\nis not the source's Data of %s\n%s", r, rec.Dynamodb.SequenceNumber, data[rec.Dynamodb.SequenceNumber])
			}
			key, v := rec.Dynamodb.NewImage.K.S, 0
			fmt.Sscan(rec.Dynamodb.NewImage.V.N, &v)
			if rec.EventName == "REMOVE" || rec.EventSource != "aws:dynamodb" || rec.EventSourceARN != src.Identity().ARN {
				t.Fatalf("record %s: want INSERT or MODIFY of aws:dynamodb from %s", r, src.Identity().ARN)
			}
			if prev, ok := last[key]; ok && v != prev+6 {
				t.Fatalf("key %s: change %d after %d, want %d", key, v, prev, prev+6)
			}
			last[key] = v
			seen++
		}
		if want := `{"Records":[` + strings.Join(objs, ",") + `]}`; string(ev) != want {
			t.Fatalf("event is not the records' objects in {\"Records\":[…]}:\n%s", ev)
		}
	}
	if seen != 60 || len(last) != 6 {
		t.Fatalf("%d changes of %d keys delivered, want 60 of 6", seen, len(last))
	}
}

// TestCheckInvoker: a Go handler of Kinesis events in this process is refused for a DynamoDB
// stream (it would decode the DynamoDB event into empty Kinesis records), by New and by
// CheckInvoker alike; a handler of any other signature, and a Kinesis source, are accepted.
func TestCheckInvoker(t *testing.T) {
	_, ddb := ddbTable(t, 0)
	kin := inprocess.New(func(context.Context, events.KinesisEvent) error { return nil })
	raw := inprocess.New(func(context.Context, json.RawMessage) error { return nil })
	cfg := Config{StartingPosition: TrimHorizon}
	_, err := New(ddb, cfg, NewMemoryStore(), kin)
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "Invoker" || !strings.Contains(err.Error(), "Go handler of Kinesis events") {
		t.Fatalf("New with a Kinesis handler for a DynamoDB stream: %v", err)
	}
	if err := CheckInvoker(ddb, raw); err != nil {
		t.Fatalf("a handler of raw JSON for a DynamoDB stream: %v", err)
	}
	if err := CheckInvoker(kinesisSource(nil, testStreamARN), kin); err != nil {
		t.Fatalf("a Kinesis handler for a Kinesis stream: %v", err)
	}
}

// TestDynamoDBWindowEventShape: a DynamoDB stream's windowed event decodes into aws-lambda-go's
// DynamoDBTimeWindowEvent: the source's record objects as its Records, the window's properties
// where the Go type expects them.
func TestDynamoDBWindowEventShape(t *testing.T) {
	db, src := ddbTable(t, 0)
	item := map[string]ddbtypes.AttributeValue{"k": &ddbtypes.AttributeValueMemberS{Value: "key-1"}}
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("orders"), Item: item}); err != nil {
		t.Fatal(err)
	}
	var rec source.Record
	for id, d := range sourceData(t, src) {
		rec = source.Record{SequenceNumber: id, Data: []byte(d)}
	}
	p, err := New(src, Config{StartingPosition: TrimHorizon, TumblingWindow: 2 * time.Minute}, NewMemoryStore(), &payloads{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2020, 12, 9, 7, 4, 0, 0, time.UTC)
	r := &reader{p: p, shardID: "shardId-000000000006", progress: ShardProgress{Window: &WindowState{Start: start, State: map[string]string{"n": "1"}}}}
	payload, n := r.encode(nil, []source.Record{rec}, 10, MaxPayloadBytes)
	var ev events.DynamoDBTimeWindowEvent
	if err := json.Unmarshal(payload, &ev); err != nil || n != 1 {
		t.Fatalf("%d records, %v\n%s", n, err, payload)
	}
	got := ev.TimeWindowProperties
	if !got.Window.Start.Equal(start) || !got.Window.End.Equal(start.Add(2*time.Minute)) || got.State["n"] != "1" ||
		got.ShardID != "shardId-000000000006" || got.EventSourceARN != src.Identity().ARN || got.IsFinalInvokeForWindow || got.IsWindowTerminatedEarly {
		t.Fatalf("window properties %+v", got)
	}
	if len(ev.Records) != 1 || ev.Records[0].EventName != "INSERT" || ev.Records[0].Change.Keys["k"].String() != "key-1" ||
		!strings.HasPrefix(string(payload), `{"Records":[`+string(rec.Data)+`],"window":`) {
		t.Fatalf("records %+v of\n%s", ev.Records, payload)
	}
}
