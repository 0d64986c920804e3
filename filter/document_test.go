package filter

import "testing"

// A DynamoDB stream's record as the Lambda event holds it.
const (
	ddbInsert = `{"eventID":"1","eventName":"INSERT","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1",` +
		`"dynamodb":{"ApproximateCreationDateTime":1764073681,"Keys":{"id":{"S":"id_value"}},` +
		`"NewImage":{"id":{"S":"id_value"},"price":{"N":"101"},"tags":{"SS":["a","b"]}},"SequenceNumber":"100","SizeBytes":40,"StreamViewType":"NEW_AND_OLD_IMAGES"},` +
		`"eventSourceARN":"arn:aws:dynamodb:us-east-1:1:table/t/stream/l"}`
	ddbRemove = `{"eventID":"2","eventName":"REMOVE","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1",` +
		`"dynamodb":{"Keys":{"id":{"S":"other"}},"OldImage":{"id":{"S":"other"}},"SequenceNumber":"200","SizeBytes":20,"StreamViewType":"NEW_AND_OLD_IMAGES"},` +
		`"eventSourceARN":"arn:aws:dynamodb:us-east-1:1:table/t/stream/l"}`
)

// TestMatchDocument: DynamoDB patterns (AWS's recorded filters on eventName, and the documented
// ones on the dynamodb key) match a record's event object.
func TestMatchDocument(t *testing.T) {
	for _, c := range []struct {
		pattern        string
		insert, remove bool
	}{
		{`{"eventName":["INSERT","MODIFY"]}`, true, false},
		{`{"eventName":["REMOVE"]}`, false, true},
		{`{"dynamodb":{"NewImage":{"id":{"S":["id_value"]}}}}`, true, false},
		{`{"dynamodb":{"Keys":{"id":{"S":[{"prefix":"oth"}]}}}}`, false, true},
		{`{"dynamodb":{"NewImage":{"tags":{"SS":["b"]}}}}`, true, false},
		{`{"dynamodb":{"NewImage":{"price":{"N":["101"]}}}}`, true, false},
		{`{"dynamodb":{"NewImage":{"id":{"S":[{"exists":true}]}}}}`, true, false},
		{`{"dynamodb":{"OldImage":{"id":{"S":[{"exists":false}]}}}}`, true, false},
		{`{"eventName":["INSERT"],"dynamodb":{"Keys":{"id":{"S":["other"]}}}}`, false, false},
		{`{"$or":[{"eventName":["REMOVE"]},{"dynamodb":{"NewImage":{"id":{"S":["id_value"]}}}}]}`, true, true},
		{`{"data":{"x":[1]}}`, false, false}, // a Kinesis pattern: a DynamoDB record has no data
	} {
		f, err := Compile([]string{c.pattern})
		if err != nil {
			t.Fatalf("%s: %v", c.pattern, err)
		}
		if got := f.MatchDocument([]byte(ddbInsert)); got != c.insert {
			t.Errorf("%s on the INSERT: %v, want %v", c.pattern, got, c.insert)
		}
		if got := f.MatchDocument([]byte(ddbRemove)); got != c.remove {
			t.Errorf("%s on the REMOVE: %v, want %v", c.pattern, got, c.remove)
		}
	}
	var none *Filters
	if !none.MatchDocument([]byte("not json")) {
		t.Fatal("no filters must pass every record")
	}
	f, _ := Compile([]string{`{"eventName":["INSERT"]}`})
	if f.MatchDocument([]byte("not json")) || f.MatchDocument([]byte(`["INSERT"]`)) {
		t.Fatal("a record that is not an object matched eventName")
	}
}
