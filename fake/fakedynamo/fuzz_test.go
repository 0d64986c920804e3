package fakedynamo

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// FuzzHandler sends arbitrary bodies to every operation of the served DB (with a table that
// has a stream and a few records): whatever the body, the answer is a 200 or a 400 with a JSON
// error, never a panic or a server error.
func FuzzHandler(f *testing.F) {
	db := New()
	h := db.Handler()
	newStreamTable(&testing.T{}, db, "fuzz", "NEW_AND_OLD_IMAGES")
	put(&testing.T{}, db, "fuzz", "k", "a", "v", "1")
	targets := make([]string, 0, len(db.calls()))
	for t := range db.calls() {
		targets = append(targets, t)
	}
	seeds := []string{
		`{"TableName":"fuzz","Item":{"k":{"S":"b"},"n":{"N":"1"},"l":{"L":[{"M":{"x":{"BS":["AA=="]}}}]}}}`,
		`{"TableName":"fuzz","Key":{"k":{"S":"a"}},"UpdateExpression":"SET v = :v","ExpressionAttributeValues":{":v":{"NULL":true}}}`,
		`{"RequestItems":{"fuzz":[{"PutRequest":{"Item":{"k":{"S":"c"}}}},{"DeleteRequest":{"Key":{"k":{"S":"a"}}}}]}}`,
		`{"TransactItems":[{"Put":{"TableName":"fuzz","Item":{"k":{"S":"d"}}}}]}`,
		`{"StreamArn":"arn:aws:dynamodb:us-east-1:000000000000:table/fuzz/stream/x","ShardFilter":{"Type":"CHILD_SHARDS","ShardId":"shardId-1"}}`,
		`{"ShardIterator":"arn:aws:dynamodb:us-east-1:000000000000:table/fuzz/stream/x|1|c2hhcmQvMC8w","Limit":5}`,
		`{"StreamArn":"arn","ShardId":"shardId-00000000000000000000-00000000","ShardIteratorType":"AT_TIMESTAMP","Timestamp":1.5e9}`,
		`{"TableName":"fuzz2","KeySchema":[{"AttributeName":"k","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"k","AttributeType":"S"}],"BillingMode":"PAY_PER_REQUEST","StreamSpecification":{"StreamEnabled":true,"StreamViewType":"KEYS_ONLY"}}`,
		`null`, `[]`, `{"Item":{"k":{"S":"x","N":"1"}}}`, `{"Limit":99999999999}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		target := targets[int(which)%len(targets)]
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("X-Amz-Target", target)
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { h.ServeHTTP(w, req); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %q: no answer in 5 s", target, body)
		}
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("%s %q: status %d %s", target, body, w.Code, w.Body)
		}
		if w.Code == http.StatusBadRequest && !bytes.Contains(w.Body.Bytes(), []byte(`"__type":"com.amazonaws.dynamodb.v20120810#`)) {
			t.Fatalf("%s %q: error without a __type: %s", target, body, w.Body)
		}
	})
}
