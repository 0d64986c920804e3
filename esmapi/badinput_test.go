package esmapi_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// TestBadInput: every parameter outside Lambda's ranges gets Lambda's status, type and message.
func TestBadInput(t *testing.T) {
	s := startServer(t, t.TempDir(), map[string]*recorder{"fn": {}, "other": {}})
	_, arn := newStream(t)
	base := func(extra map[string]any) map[string]any {
		b := map[string]any{"FunctionName": "fn", "EventSourceArn": arn, "StartingPosition": "TRIM_HORIZON"}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	const ve, ipve = "ValidationException", "InvalidParameterValueException"
	cases := []struct {
		name         string
		body         map[string]any
		typ, message string
	}{
		{"BatchSize 0", base(map[string]any{"BatchSize": 0}), ve, "1 validation error detected: Value '0' at 'batchSize' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{"BatchSize 10001", base(map[string]any{"BatchSize": 10001}), ve, "1 validation error detected: Value '10001' at 'batchSize' failed to satisfy constraint: Member must have value less than or equal to 10000"},
		{"window 301", base(map[string]any{"MaximumBatchingWindowInSeconds": 301}), ve, "Value '301' at 'maximumBatchingWindowInSeconds' failed to satisfy constraint: Member must have value less than or equal to 300"},
		{"ParallelizationFactor 11", base(map[string]any{"ParallelizationFactor": 11}), ve, "Value '11' at 'parallelizationFactor'"},
		{"ParallelizationFactor 0", base(map[string]any{"ParallelizationFactor": 0}), ve, "Value '0' at 'parallelizationFactor'"},
		{"MaximumRetryAttempts -2", base(map[string]any{"MaximumRetryAttempts": -2}), ve, "Value '-2' at 'maximumRetryAttempts' failed to satisfy constraint: Member must have value greater than or equal to -1"},
		{"MaximumRetryAttempts 10001", base(map[string]any{"MaximumRetryAttempts": 10001}), ve, "Value '10001' at 'maximumRetryAttempts'"},
		{"TumblingWindowInSeconds 901", base(map[string]any{"TumblingWindowInSeconds": 901}), ve, "Value '901' at 'tumblingWindowInSeconds'"},
		{"MaximumRecordAgeInSeconds 30", base(map[string]any{"MaximumRecordAgeInSeconds": 30}), ipve, "MaximumRecordAgeInSeconds must be either -1 (forever) or between 60 and 604800 (inclusive)"},
		{"MaximumRecordAgeInSeconds 604801", base(map[string]any{"MaximumRecordAgeInSeconds": 604801}), ve, "Value '604801' at 'maximumRecordAgeInSeconds'"},
		{"FunctionResponseTypes", base(map[string]any{"FunctionResponseTypes": []string{"Nope"}}), ve, "at 'functionResponseTypes' failed to satisfy constraint"},
		{"filter pattern", base(map[string]any{"FilterCriteria": map[string]any{"Filters": []any{map[string]any{"Pattern": "{not json"}}}}), ipve, "Invalid filter pattern definition."},
		{"six filters", base(map[string]any{"FilterCriteria": map[string]any{"Filters": []any{
			map[string]any{"Pattern": "{}"}, map[string]any{"Pattern": "{}"}, map[string]any{"Pattern": "{}"},
			map[string]any{"Pattern": "{}"}, map[string]any{"Pattern": "{}"}, map[string]any{"Pattern": "{}"}}}}), ipve, "at most 5"},
		{"destination", base(map[string]any{"DestinationConfig": map[string]any{"OnFailure": map[string]any{"Destination": "arn:aws:lambda:us-east-1:000000000000:function:f"}}}), ipve, "must be the ARN of an SQS queue, an SNS topic or an S3 bucket"},
		{"AT_TIMESTAMP without a timestamp", base(map[string]any{"StartingPosition": "AT_TIMESTAMP"}), ipve, "Need to specify a timestamp"},
		{"timestamp in the future", base(map[string]any{"StartingPosition": "AT_TIMESTAMP", "StartingPositionTimestamp": float64(time.Now().Add(time.Hour).Unix())}), ipve, "is in the future"},
		{"timestamp with TRIM_HORIZON", base(map[string]any{"StartingPositionTimestamp": 1700000000}), ipve, "only allowed with StartingPosition AT_TIMESTAMP"},
		{"ARN pattern", base(map[string]any{"EventSourceArn": "not-an-arn"}), ve, "at 'eventSourceArn' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		{"SQS source", base(map[string]any{"EventSourceArn": "arn:aws:sqs:us-east-1:000000000000:q"}), ipve, "Unrecognized event source."},
		{"FunctionName null", map[string]any{"EventSourceArn": arn, "StartingPosition": "LATEST"}, ve, "Value null at 'functionName'"},
		{"FunctionName too long", base(map[string]any{"FunctionName": strings.Repeat("f", 141)}), ve, "at 'functionName' failed to satisfy constraint: Member must have length less than or equal to 140"},
		{"ScalingConfig", base(map[string]any{"ScalingConfig": map[string]any{"MaximumConcurrency": 2}}), ipve, "ScalingConfig is not supported for a Kinesis event source mapping."},
		{"BatchSize not a number", base(map[string]any{"BatchSize": "ten"}), "SerializationException", "Could not parse the request body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := s.call(t, "POST", mappings, c.body)
			msg, _ := r.body["message"].(string)
			if r.status != 400 || r.errorType != c.typ || !strings.Contains(msg, c.message) {
				t.Fatalf("got %d %s %q, want 400 %s containing %q", r.status, r.errorType, msg, c.typ, c.message)
			}
			if c.typ == ipve && r.body["Type"] != "User" {
				t.Errorf("Type %v, want User", r.body["Type"])
			}
		})
	}

	// Update: the same checks, and Lambda's conflicts.
	created := s.call(t, "POST", mappings, base(nil))
	id := created.body["UUID"].(string)
	testkit.WaitFor(t, "Enabled", 20*time.Second, func() bool { return s.call(t, "GET", mappings+id, nil).body["State"] == "Enabled" })
	for _, c := range []struct {
		name              string
		body              map[string]any
		status            int
		typ, message      string
		untouchedSettings bool
	}{
		{"BatchSize 0", map[string]any{"BatchSize": 0}, 400, ve, "Value '0' at 'batchSize'", true},
		{"unknown function", map[string]any{"FunctionName": "nope"}, 400, ipve, "Function does not exist", true},
		{"OnSuccess", map[string]any{"DestinationConfig": map[string]any{"OnSuccess": map[string]any{"Destination": "arn:aws:sqs:us-east-1:000000000000:q"}}}, 400, ipve, "Unsupported DestinationConfig parameter for given event source mapping type.", true},
	} {
		t.Run("update "+c.name, func(t *testing.T) {
			r := s.call(t, "PUT", mappings+id, c.body)
			msg, _ := r.body["message"].(string)
			if r.status != c.status || r.errorType != c.typ || !strings.Contains(msg, c.message) {
				t.Fatalf("got %d %s %q", r.status, r.errorType, msg)
			}
			if g := s.call(t, "GET", mappings+id, nil); g.body["BatchSize"] != 100.0 || g.body["State"] != "Enabled" {
				t.Fatalf("a refused update changed the mapping: %v", g.body)
			}
		})
	}

	// Updating the function to one that already has a mapping of the stream is a conflict.
	second := s.call(t, "POST", mappings, base(map[string]any{"FunctionName": "other"}))
	if second.status != 202 {
		t.Fatalf("second function on the stream: %d %v", second.status, second.body)
	}
	r := s.call(t, "PUT", mappings+id, map[string]any{"FunctionName": "other"})
	if r.status != 409 || r.errorType != "ResourceConflictException" || !strings.Contains(r.body["message"].(string), second.body["UUID"].(string)) {
		t.Fatalf("update to a taken function: %d %v", r.status, r.body)
	}

	// List: MaxItems out of range, a marker that is not one.
	for q, typ := range map[string]string{"?MaxItems=0": ve, "?MaxItems=10001": ve, "?MaxItems=x": "SerializationException", "?Marker=not-a-marker!": ipve} {
		if r := s.call(t, "GET", mappings+q, nil); r.status != 400 || r.errorType != typ {
			t.Errorf("list %s: %d %s", q, r.status, r.errorType)
		}
	}
	// Unknown routes answer in AWS's error shape.
	if r := s.call(t, "GET", "/2015-03-31/functions", nil); r.status != 404 || r.errorType != "UnknownOperationException" {
		t.Errorf("unknown route: %d %s", r.status, r.errorType)
	}
}

// TestFunctionNameForms: a qualified ARN gives a qualified FunctionArn; a partial ARN and a
// plain name name the same function.
func TestFunctionNameForms(t *testing.T) {
	s := startServer(t, t.TempDir(), map[string]*recorder{"fn": {}})
	for name, want := range map[string]string{
		"arn:aws:lambda:us-east-1:000000000000:function:fn:live": "arn:aws:lambda:us-east-1:000000000000:function:fn:live",
		"000000000000:function:fn":                               "arn:aws:lambda:us-east-1:000000000000:function:fn",
		"fn:v2":                                                  "arn:aws:lambda:us-east-1:000000000000:function:fn:v2",
	} {
		_, arn := newStream(t)
		r := s.call(t, "POST", mappings, map[string]any{"FunctionName": name, "EventSourceArn": arn, "StartingPosition": "LATEST"})
		if r.status != 202 || r.body["FunctionArn"] != want {
			t.Errorf("FunctionName %s: %d FunctionArn %v, want %s", name, r.status, r.body["FunctionArn"], want)
		}
	}
}

// TestTags: tags given at create, added, listed and removed through the tags API.
func TestTags(t *testing.T) {
	s := startServer(t, t.TempDir(), map[string]*recorder{"fn": {}})
	_, arn := newStream(t)
	r := s.call(t, "POST", mappings, map[string]any{"FunctionName": "fn", "EventSourceArn": arn, "StartingPosition": "LATEST", "Tags": map[string]string{"team": "a"}})
	esmARN := r.body["EventSourceMappingArn"].(string)
	if r := s.call(t, "POST", "/2017-03-31/tags/"+esmARN, map[string]any{"Tags": map[string]string{"env": "dev"}}); r.status != 204 {
		t.Fatalf("tag: %d %v", r.status, r.body)
	}
	if r := s.call(t, "DELETE", "/2017-03-31/tags/"+esmARN+"?tagKeys=team", nil); r.status != 204 {
		t.Fatalf("untag: %d %v", r.status, r.body)
	}
	got := s.call(t, "GET", "/2017-03-31/tags/"+esmARN, nil)
	if tags, _ := got.body["Tags"].(map[string]any); got.status != 200 || len(tags) != 1 || tags["env"] != "dev" {
		t.Fatalf("tags: %d %v", got.status, got.body)
	}
	if r := s.call(t, "GET", "/2017-03-31/tags/arn:aws:lambda:us-east-1:000000000000:event-source-mapping:nope", nil); r.status != 404 {
		t.Fatalf("tags of an unknown mapping: %d", r.status)
	}
}

// TestResourceInUse: while an update waits for the batch in flight, the mapping is Updating, and
// another update or a delete is refused with ResourceInUseException; once it is Enabled again
// both are accepted.
func TestResourceInUse(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 100)
	slow := &recorder{block: func() { entered <- struct{}{}; <-release }}
	s := startServer(t, t.TempDir(), map[string]*recorder{"slow": slow})
	name, arn := newStream(t)
	r := s.call(t, "POST", mappings, map[string]any{"FunctionName": "slow", "EventSourceArn": arn, "StartingPosition": "TRIM_HORIZON"})
	id := r.body["UUID"].(string)
	testkit.WaitFor(t, "Enabled", 20*time.Second, func() bool { return s.call(t, "GET", mappings+id, nil).body["State"] == "Enabled" })
	put(t, name, "held")
	<-entered
	if u := s.call(t, "PUT", mappings+id, map[string]any{"BatchSize": 7}); u.status != 202 || u.body["State"] != "Updating" {
		t.Fatalf("update: %d %v", u.status, u.body)
	}
	for _, c := range []struct{ method, path string }{{"PUT", mappings + id}, {"DELETE", mappings + id}} {
		if r := s.call(t, c.method, c.path, map[string]any{"BatchSize": 8}); r.status != 400 || r.errorType != "ResourceInUseException" || r.body["Type"] != "User" {
			t.Fatalf("%s while Updating: %d %s %v", c.method, r.status, r.errorType, r.body)
		}
	}
	close(release)
	testkit.WaitFor(t, "Enabled after the update", 20*time.Second, func() bool { return s.call(t, "GET", mappings+id, nil).body["State"] == "Enabled" })
	if g := s.call(t, "GET", mappings+id, nil); g.body["BatchSize"] != 7.0 {
		t.Fatalf("after the update: %v", g.body)
	}
	if d := s.call(t, "DELETE", mappings+id, nil); d.status != 202 {
		t.Fatalf("delete once Enabled: %d %v", d.status, d.body)
	}
	if got := slow.records(); len(got) != 1 || got[0] != "held" {
		t.Fatalf("the held batch was invoked %v", got)
	}
}

// TestConsumerSource: an enhanced fan-out consumer's ARN is an EventSourceArn, as in Lambda: the
// mapping keeps it as its EventSourceArn; an unregistered consumer is refused.
func TestConsumerSource(t *testing.T) {
	s := startServer(t, t.TempDir(), map[string]*recorder{"fn": {}})
	_, arn := newStream(t)
	ctx := context.Background()
	out, err := kin.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(arn), ConsumerName: aws.String("esmapi-consumer")})
	if err != nil {
		t.Fatal(err)
	}
	consumer := aws.ToString(out.Consumer.ConsumerARN)
	r := s.call(t, "POST", mappings, map[string]any{"FunctionName": "fn", "EventSourceArn": consumer, "StartingPosition": "LATEST", "Enabled": false})
	if r.status != 202 || r.body["EventSourceArn"] != consumer || r.body["FunctionArn"] != "arn:aws:lambda:us-east-1:000000000000:function:fn" {
		t.Fatalf("create on a consumer: %d %v", r.status, r.body)
	}
	if d := s.call(t, "POST", mappings, map[string]any{"FunctionName": "fn", "EventSourceArn": consumer, "StartingPosition": "LATEST"}); d.status != 409 {
		t.Fatalf("a second mapping of the consumer: %d %v", d.status, d.body)
	}
	l := s.call(t, "GET", mappings+"?EventSourceArn="+url.QueryEscape(consumer), nil)
	if got, _ := l.body["EventSourceMappings"].([]any); len(got) != 1 {
		t.Fatalf("list by consumer: %v", l.body)
	}
	missing := arn + "/consumer/nobody:1700000000"
	if r := s.call(t, "POST", mappings, map[string]any{"FunctionName": "fn", "EventSourceArn": missing, "StartingPosition": "LATEST"}); r.status != 400 ||
		r.errorType != "InvalidParameterValueException" || !strings.Contains(r.body["message"].(string), "Stream consumer not found: "+missing) {
		t.Fatalf("an unregistered consumer: %d %s %v", r.status, r.errorType, r.body)
	}
}
