package dynamostreams

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

const recordedStream = "arn:aws:dynamodb:<region>:111111111111:table/<table>/stream/<label>"

// recordedCreation stands for the recording's masked ApproximateCreationDateTime, a JSON number
// of epoch seconds (2025-11-25T12:28:01Z, the day of the recording).
var recordedCreation = time.Unix(1764073681, 0)

// recordedPut is the stream record GetRecords returns for the recording's PutItem on a table
// with StreamViewType NEW_IMAGE.
func recordedPut() types.Record {
	key := &types.AttributeValueMemberS{Value: "hello world"}
	return types.Record{
		EventID: aws.String("<event-id>"), EventName: types.OperationTypeInsert, EventVersion: aws.String("1.1"),
		EventSource: aws.String("aws:dynamodb"), AwsRegion: aws.String("<region>"),
		Dynamodb: &types.StreamRecord{
			ApproximateCreationDateTime: &recordedCreation,
			Keys:                        map[string]types.AttributeValue{"my_partition_key": key},
			NewImage: map[string]types.AttributeValue{
				"my_partition_key": key, "binary_key": &types.AttributeValueMemberB{Value: []byte("foobar")},
			},
			SequenceNumber: aws.String("<sequence-number>"), SizeBytes: aws.Int64(70), StreamViewType: types.StreamViewTypeNewImage,
		},
	}
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return buf.String()
}

// TestEventMatchesAWSRecording: the event of the recording's PutItem is AWS's recorded event
// byte for byte, key order included (the masked creation time as the number it stands for).
func TestEventMatchesAWSRecording(t *testing.T) {
	raw, err := os.ReadFile("testdata/aws-recorded-event.json")
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.Replace(raw, []byte(`"<approximate-creation-datetime>"`), []byte("1764073681"), 1)
	got, err := Event([]types.Record{recordedPut()}, recordedStream)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := compact(t, got), compact(t, raw); g != w {
		t.Fatalf("event differs from AWS's recording\n got: %s\nwant: %s", g, w)
	}
}

// everyType is a MODIFY of a TTL delete's shape with every attribute type in its images.
func everyType() types.Record {
	image := map[string]types.AttributeValue{
		"s": &types.AttributeValueMemberS{Value: "<tag> & \"quoted\" é"}, "n": &types.AttributeValueMemberN{Value: "-1.5E+3"},
		"b": &types.AttributeValueMemberB{Value: []byte{0, 1, 0xff}}, "t": &types.AttributeValueMemberBOOL{Value: true},
		"f": &types.AttributeValueMemberBOOL{Value: false}, "z": &types.AttributeValueMemberNULL{Value: true},
		"ss": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, "ns": &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}},
		"bs": &types.AttributeValueMemberBS{Value: [][]byte{[]byte("x"), {}}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"inner": &types.AttributeValueMemberL{Value: []types.AttributeValue{
				&types.AttributeValueMemberN{Value: "7"}, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
			}},
		}},
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
	}
	created := time.Unix(1764073681, 0)
	return types.Record{
		EventID: aws.String("e1"), EventName: types.OperationTypeRemove, EventVersion: aws.String("1.1"),
		EventSource: aws.String("aws:dynamodb"), AwsRegion: aws.String("eu-west-1"),
		Dynamodb: &types.StreamRecord{
			ApproximateCreationDateTime: &created,
			Keys:                        map[string]types.AttributeValue{"s": image["s"]},
			OldImage:                    image, NewImage: image,
			SequenceNumber: aws.String("000000000000000000001"), SizeBytes: aws.Int64(321), StreamViewType: types.StreamViewTypeNewAndOldImages,
		},
		UserIdentity: &types.Identity{Type: aws.String("Service"), PrincipalId: aws.String("dynamodb.amazonaws.com")},
	}
}

// TestEventDecodesAsAWSLambdaGo: a handler's events.DynamoDBEvent holds every field of the
// event, every attribute type included: decoded by aws-lambda-go and encoded again, it is the
// same JSON document.
func TestEventDecodesAsAWSLambdaGo(t *testing.T) {
	got, err := Event([]types.Record{everyType(), recordedPut()}, "arn:aws:dynamodb:eu-west-1:1:table/t/stream/2026")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(got, []byte(`{"S":"<tag> & \"quoted\" é"}`)) {
		t.Fatalf("attribute strings are not written as Lambda writes them (no HTML escapes): %s", got)
	}
	var e events.DynamoDBEvent
	if err := json.Unmarshal(got, &e); err != nil {
		t.Fatal(err)
	}
	r := e.Records[0]
	if r.EventVersion != "1.1" || r.EventSource != "aws:dynamodb" || r.UserIdentity == nil || r.UserIdentity.PrincipalID != "dynamodb.amazonaws.com" ||
		r.Change.SequenceNumber != "000000000000000000001" || !r.Change.ApproximateCreationDateTime.Equal(time.Unix(1764073681, 0)) ||
		string(r.Change.NewImage["b"].Binary()) != "\x00\x01\xff" || r.Change.OldImage["n"].Number() != "-1.5E+3" {
		t.Fatalf("decoded record %+v", r)
	}
	again, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("aws-lambda-go's round trip changed the event\n ours: %s\nagain: %s", got, again)
	}
}

// TestEventWithoutVersion: a stream record without eventVersion or eventSource gets DynamoDB
// Streams' ("1.1", "aws:dynamodb"); a record without Dynamodb still renders.
func TestEventWithoutVersion(t *testing.T) {
	got, err := Event([]types.Record{{EventID: aws.String("x"), EventName: types.OperationTypeInsert}}, "arn")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Records":[{"eventID":"x","eventName":"INSERT","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"","dynamodb":{"SequenceNumber":"","SizeBytes":0,"StreamViewType":""},"eventSourceARN":"arn"}]}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
