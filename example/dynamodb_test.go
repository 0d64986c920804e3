package example

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

func ddbEvent(values ...string) events.DynamoDBEvent {
	var e events.DynamoDBEvent
	for i, v := range values {
		e.Records = append(e.Records, events.DynamoDBEventRecord{
			EventID: "id", EventName: "INSERT", EventSource: "aws:dynamodb", EventVersion: "1.1",
			Change: events.DynamoDBStreamRecord{
				Keys:           map[string]events.DynamoDBAttributeValue{"k": events.NewStringAttribute("key")},
				NewImage:       map[string]events.DynamoDBAttributeValue{"v": events.NewStringAttribute(v)},
				SequenceNumber: string(rune('1' + i)), StreamViewType: "NEW_AND_OLD_IMAGES",
			},
		})
	}
	return e
}

func TestHandleDynamoDBRecordsEveryRecord(t *testing.T) {
	dir := t.TempDir()
	c := Config{Output: filepath.Join(dir, "out"), EventDump: filepath.Join(dir, "dump")}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "r1"})
	e := ddbEvent("a", "b")
	if _, err := c.HandleDynamoDB(ctx, e); err != nil {
		t.Fatal(err)
	}
	out := readLines(t, c.Output)
	var d DDBDelivery
	if len(out) != 2 || json.Unmarshal([]byte(out[1]), &d) != nil {
		t.Fatalf("deliveries %q", out)
	}
	if d.RequestID != "r1" || d.BatchSize != 2 || d.Record.Change.SequenceNumber != "2" ||
		d.Record.Change.NewImage["v"].String() != "b" || d.InvokedAt == 0 || d.DoneAt < d.InvokedAt {
		t.Fatalf("delivery %+v", d)
	}
	want, _ := json.Marshal(e)
	if dump := readLines(t, c.EventDump); len(dump) != 1 || dump[0] != string(want) {
		t.Fatalf("event dump %q, want %s", dump, want)
	}
}

func TestHandleDynamoDBFailsMatchingBatches(t *testing.T) {
	c := Config{Fail: FailError, FailMatch: "poison"}
	if _, err := c.HandleDynamoDB(context.Background(), ddbEvent("fine")); err != nil {
		t.Fatalf("a batch without the text failed: %v", err)
	}
	if _, err := c.HandleDynamoDB(context.Background(), ddbEvent("fine", "a poison value")); err == nil {
		t.Fatal("a batch with the text in an image did not fail")
	}
}
