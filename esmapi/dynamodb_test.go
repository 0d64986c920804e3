package esmapi_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// ddbStream is a DynamoDB stream's ARN in the API's account and region; no such stream need
// exist: every answer below is given before a source is looked up.
const ddbStream = "arn:aws:dynamodb:us-east-1:000000000000:table/orders/stream/2026-12-07T20:00:00.000"

// TestRecordedDynamoDBErrors: a create on a DynamoDB stream with no starting position, an
// invalid one, or AT_TIMESTAMP gets AWS's recorded answer (status, error type, message).
func TestRecordedDynamoDBErrors(t *testing.T) {
	s := startServer(t, t.TempDir(), map[string]*recorder{"golden-function": {}})
	want := recorded(t, "errors_dynamodb.json").(map[string]any)
	replace := []string{"table/orders/", "table/<table-name>/", "stream/2026-12-07T20:00:00.000", "stream/<stream-name>"}
	for key, position := range map[string]any{"no_starting_position": nil, "invalid_starting_position": "invalid", "incompatible_starting_position": "AT_TIMESTAMP"} {
		t.Run(key, func(t *testing.T) {
			body := map[string]any{"FunctionName": "golden-function", "EventSourceArn": ddbStream}
			if position != nil {
				body["StartingPosition"] = position
				body["StartingPositionTimestamp"] = 1700000000
			}
			r := s.call(t, "POST", mappings, body)
			compareGolden(t, key, snapshot(t, r, replace...), want[key])
		})
	}
	if len(want) != 3 {
		t.Fatalf("%d recorded errors, 3 cases", len(want))
	}
}

// TestDynamoDBValidation: Lambda's ranges hold for a DynamoDB stream's mapping as for a Kinesis
// one (batch size, record age), a consumer is refused, a table's ARN is refused naming what to
// give, and a valid mapping is created; golden.
func TestDynamoDBValidation(t *testing.T) {
	s := startServer(t, t.TempDir(), map[string]*recorder{"fn": {}})
	var out bytes.Buffer
	for _, c := range []struct {
		name  string
		extra map[string]any
	}{
		{"BatchSize 10001", map[string]any{"BatchSize": 10001}},
		{"BatchSize 0", map[string]any{"BatchSize": 0}},
		{"MaximumRecordAgeInSeconds 59", map[string]any{"MaximumRecordAgeInSeconds": 59}},
		{"a consumer ARN", map[string]any{"EventSourceArn": ddbStream + "/consumer/c:1700000000"}},
		{"a table's ARN", map[string]any{"EventSourceArn": strings.Split(ddbStream, "/stream/")[0]}},
		{"valid (TRIM_HORIZON)", nil},
	} {
		body := map[string]any{"FunctionName": "fn", "EventSourceArn": ddbStream, "StartingPosition": "TRIM_HORIZON"}
		for k, v := range c.extra {
			body[k] = v
		}
		r := s.call(t, "POST", mappings, body)
		msg, _ := r.body["message"].(string)
		if m, ok := r.body["Message"].(string); ok {
			msg = m
		}
		fmt.Fprintf(&out, "# %s\n%d %s\n%s\n", c.name, r.status, r.errorType, msg)
	}
	testkit.Golden(t, "dynamodb_validation.golden", out.Bytes())
}
