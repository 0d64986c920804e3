package esmapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// rawResponse is one HTTP answer of the API.
type rawResponse struct {
	status    int
	errorType string // x-amzn-ErrorType
	body      map[string]any
}

func (s *server) call(t *testing.T, method, path string, body any) rawResponse {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.http.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := rawResponse{status: resp.StatusCode, errorType: resp.Header.Get("x-amzn-ErrorType")}
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &r.body); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, path, b, err)
		}
	}
	if r.errorType != "" && resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s %s: error with Content-Type %q", method, path, resp.Header.Get("Content-Type"))
	}
	if resp.Header.Get("x-amzn-RequestId") == "" {
		t.Errorf("%s %s: no x-amzn-RequestId", method, path)
	}
	return r
}

// modeled are the error types of Lambda's API model whose members the Python SDK copies from the
// body into the parsed error (ValidationException is not one of them).
var modeled = map[string]bool{
	"InvalidParameterValueException": true, "ResourceNotFoundException": true,
	"ResourceConflictException": true, "ResourceInUseException": true,
}

// snapshot puts a raw response into the form of the recorded snapshots: the Python SDK's parse,
// then the snapshot tool's placeholders (replace, applied in order, maps real text to them).
func snapshot(t *testing.T, r rawResponse, replace ...string) any {
	t.Helper()
	out := map[string]any{}
	if r.errorType != "" {
		msg, _ := r.body["message"].(string)
		if m, ok := r.body["Message"].(string); ok {
			msg = m
		}
		out["Error"] = map[string]any{"Code": r.errorType, "Message": msg}
		if modeled[r.errorType] {
			for k, v := range r.body {
				out[k] = v
			}
		}
	} else {
		for k, v := range r.body {
			out[k] = v
		}
		if _, ok := out["LastModified"].(float64); ok {
			out["LastModified"] = "<datetime>"
		}
		if fc, ok := out["FilterCriteria"].(map[string]any); ok {
			for _, f := range fc["Filters"].([]any) {
				f := f.(map[string]any)
				var decoded any
				if err := json.Unmarshal([]byte(f["Pattern"].(string)), &decoded); err != nil {
					t.Fatal(err)
				}
				f["Pattern"] = decoded
			}
		}
	}
	out["ResponseMetadata"] = map[string]any{"HTTPHeaders": map[string]any{}, "HTTPStatusCode": float64(r.status)}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	replace = append(replace, "arn:aws:", "arn:<partition>:", ":us-east-1:", ":<region>:", "000000000000", "111111111111")
	for i := 0; i+1 < len(replace); i += 2 {
		text = strings.ReplaceAll(text, replace[i], replace[i+1])
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func recorded(t *testing.T, file string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "recorded", file))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func compareGolden(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s differs from AWS's recorded response:\n got: %s\nwant: %s", what, mustJSON(got), mustJSON(want))
	}
}

const mappings = "/2015-03-31/event-source-mappings/"

// TestGoldenResponses compares esm's create and get responses with AWS's recorded ones, field
// for field and default for default.
func TestGoldenResponses(t *testing.T) {
	fn := &recorder{}
	s := startServer(t, t.TempDir(), map[string]*recorder{"golden-function": fn})
	uuidOf := func(r rawResponse) string { id, _ := r.body["UUID"].(string); return id }

	t.Run("create with defaults", func(t *testing.T) {
		name, arn := newStream(t)
		r := s.call(t, "POST", mappings, map[string]any{"FunctionName": "golden-function", "EventSourceArn": arn, "StartingPosition": "LATEST"})
		compareGolden(t, "create", snapshot(t, r, name, "<resource:1>", "golden-function", "<resource:2>", uuidOf(r), "<uuid:1>"),
			recorded(t, "create_kinesis.json"))
	})

	t.Run("get after a successful invocation", func(t *testing.T) {
		name, arn := newStream(t)
		r := s.call(t, "POST", mappings, map[string]any{"FunctionName": "golden-function", "EventSourceArn": arn, "StartingPosition": "TRIM_HORIZON",
			"BatchSize": 1, "MaximumBatchingWindowInSeconds": 1, "MaximumRetryAttempts": 2})
		id := uuidOf(r)
		put(t, name, "golden-get")
		testkit.WaitFor(t, "the record", 20*time.Second, fn.has("golden-get"))
		var g rawResponse
		testkit.WaitFor(t, "LastProcessingResult OK", 5*time.Second, func() bool {
			g = s.call(t, "GET", mappings+id, nil)
			return g.body["LastProcessingResult"] == "OK"
		})
		compareGolden(t, "get", snapshot(t, g, name, "<resource:1>", "golden-function", "<resource:2>", id, "<uuid:1>"),
			recorded(t, "get_after_invocation.json"))
	})

	t.Run("create with a filter", func(t *testing.T) {
		name, arn := newStream(t)
		r := s.call(t, "POST", mappings, map[string]any{"FunctionName": "golden-function", "EventSourceArn": arn, "StartingPosition": "TRIM_HORIZON",
			"BatchSize": 1, "MaximumBatchingWindowInSeconds": 1, "MaximumRetryAttempts": 1,
			"FilterCriteria": map[string]any{"Filters": []any{map[string]any{"Pattern": `{"data": {"event_type": ["function_1"]}}`}}}})
		compareGolden(t, "create with FilterCriteria", snapshot(t, r, name, "<resource:1>", "golden-function", "<resource:2>", uuidOf(r), "<uuid:1>"),
			recorded(t, "create_filter.json"))
	})

	t.Run("create with partial batch responses and an SQS destination", func(t *testing.T) {
		name, arn := newStream(t)
		queue := "arn:aws:sqs:us-east-1:000000000000:golden-queue"
		r := s.call(t, "POST", mappings, map[string]any{"FunctionName": "golden-function", "EventSourceArn": arn, "StartingPosition": "TRIM_HORIZON",
			"BatchSize": 1, "MaximumBatchingWindowInSeconds": 1, "MaximumRetryAttempts": 2, "FunctionResponseTypes": []string{"ReportBatchItemFailures"},
			"DestinationConfig": map[string]any{"OnFailure": map[string]any{"Destination": queue}}})
		compareGolden(t, "create with ReportBatchItemFailures", snapshot(t, r, "golden-queue", "<resource:1>", name, "<resource:2>",
			"golden-function", "<resource:3>", uuidOf(r), "<uuid:1>"), recorded(t, "create_failure_scenarios.json"))
	})
}

// TestRecordedErrors sends each request AWS recorded an error for and compares status, error
// type, headers and body with the recording.
func TestRecordedErrors(t *testing.T) {
	s := startServer(t, t.TempDir(), map[string]*recorder{"golden-function": {}})
	want := recorded(t, "errors.json").(map[string]any)
	name, arn := newStream(t)
	first := s.call(t, "POST", mappings, map[string]any{"FunctionName": "golden-function", "EventSourceArn": arn, "StartingPosition": "TRIM_HORIZON"})
	if first.status != 202 {
		t.Fatalf("first create: %d %v", first.status, first.body)
	}
	firstID := first.body["UUID"].(string)
	const unknown = "00000000-1111-4222-8333-444444444444"
	missing := strings.Replace(arn, "stream/"+name, "stream/test-foobar-81ded7e8", 1)
	cases := []struct {
		key          string
		method, path string
		body         map[string]any
		replace      []string
	}{
		{"stream_not_found", "POST", mappings, map[string]any{"FunctionName": "golden-function", "EventSourceArn": missing, "StartingPosition": "TRIM_HORIZON"}, nil},
		{"duplicate", "POST", mappings, map[string]any{"FunctionName": "golden-function", "EventSourceArn": arn, "StartingPosition": "TRIM_HORIZON"},
			[]string{name, "<resource:1>", "golden-function", "<resource:2>", firstID, "<uuid:1>"}},
		{"no_starting_position", "POST", mappings, map[string]any{"FunctionName": "golden-function", "EventSourceArn": arn}, nil},
		{"invalid_starting_position", "POST", mappings, map[string]any{"FunctionName": "golden-function", "EventSourceArn": arn, "StartingPosition": "invalid"}, nil},
		{"get_unknown_uuid", "GET", mappings + unknown, nil, nil},
		{"delete_unknown_uuid", "DELETE", mappings + unknown, nil, nil},
		{"update_unknown_uuid", "PUT", mappings + unknown, map[string]any{"BatchSize": 10}, nil},
		{"create_no_event_source_arn", "POST", mappings, map[string]any{"FunctionName": "golden-function", "StartingPosition": "TRIM_HORIZON"}, nil},
		{"create_unknown_params", "POST", mappings, map[string]any{"FunctionName": "no-such-function", "EventSourceArn": arn, "StartingPosition": "TRIM_HORIZON"}, nil},
		{"destination_config_failure", "POST", mappings, map[string]any{"FunctionName": "golden-function", "EventSourceArn": arn, "StartingPosition": "TRIM_HORIZON",
			"DestinationConfig": map[string]any{"OnSuccess": map[string]any{"Destination": "arn:aws:sqs:us-east-1:000000000000:q"}}}, nil},
	}
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			r := s.call(t, c.method, c.path, c.body)
			if r.errorType != "" && r.body["Type"] != nil && r.body["Type"] != "User" {
				t.Errorf("Type %v, want User", r.body["Type"])
			}
			compareGolden(t, c.key, snapshot(t, r, c.replace...), want[c.key])
		})
	}
	if len(cases) != len(want) {
		t.Fatalf("%d cases for %d recorded errors", len(cases), len(want))
	}
}
