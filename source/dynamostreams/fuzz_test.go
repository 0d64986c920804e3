package dynamostreams

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// FuzzEvent: whatever strings, numbers and binaries a record holds (nested in a map and a list,
// as a key and as attribute names), its event is one JSON document that aws-lambda-go decodes
// to the same values, and a record's Data is that record's object.
func FuzzEvent(f *testing.F) {
	f.Add("hello world", []byte("foobar"), "101", "k")
	f.Add("<&>\u2028\"\\", []byte{0, 0xff}, "-1.5E+3", "")
	f.Add("é\x7f\t", []byte{}, "0", "a/b")
	f.Fuzz(func(t *testing.T, s string, b []byte, n, name string) {
		if !utf8.ValidString(s) || !utf8.ValidString(name) || !utf8.ValidString(n) || name == "n" || name == "b" || name == "m" {
			return // DynamoDB's strings are UTF-8; the fixed attributes keep their names
		}
		image := map[string]types.AttributeValue{
			name: &types.AttributeValueMemberS{Value: s}, "n": &types.AttributeValueMemberN{Value: n}, "b": &types.AttributeValueMemberB{Value: b},
			"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{name: &types.AttributeValueMemberL{Value: []types.AttributeValue{
				&types.AttributeValueMemberS{Value: s}, &types.AttributeValueMemberBS{Value: [][]byte{b}}}}}},
		}
		rec := types.Record{EventID: aws.String(s), EventName: types.OperationTypeModify, Dynamodb: &types.StreamRecord{
			Keys: map[string]types.AttributeValue{name: image[name]}, NewImage: image, SequenceNumber: aws.String("1")}}
		ev, err := Event([]types.Record{rec}, "arn:aws:dynamodb:us-east-1:1:table/t/stream/l")
		if err != nil {
			t.Fatal(err)
		}
		var e events.DynamoDBEvent
		if err := json.Unmarshal(ev, &e); err != nil {
			t.Fatalf("%v: %s", err, ev)
		}
		got := e.Records[0]
		img := got.Change.NewImage
		if got.EventID != s || img[name].String() != s || img["n"].Number() != n || !bytes.Equal(img["b"].Binary(), b) ||
			got.Change.Keys[name].String() != s || img["m"].Map()[name].List()[0].String() != s ||
			!bytes.Equal(img["m"].Map()[name].List()[1].BinarySet()[0], b) {
			t.Fatalf("decoded %+v from %s", got, ev)
		}
		data, err := appendRecord(nil, &rec, "arn:aws:dynamodb:us-east-1:1:table/t/stream/l")
		if err != nil || string(ev) != `{"Records":[`+string(data)+`]}` {
			t.Fatalf("the record's object %s is not the event's %s (%v)", data, ev, err)
		}
	})
}
