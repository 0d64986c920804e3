package esmapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

func fuzzManager() *Manager {
	return &Manager{funcs: map[string]Function{"fn": {Name: "fn"}}}
}

var fuzzSeeds = []string{
	``, `{}`, `null`, `[]`, `{"FunctionName":"fn"}`,
	`{"FunctionName":"fn","EventSourceArn":"arn:aws:kinesis:us-east-1:000000000000:stream/s","StartingPosition":"TRIM_HORIZON"}`,
	`{"FunctionName":"arn:aws:lambda:us-east-1:000000000000:function:fn:live","EventSourceArn":"arn:aws:kinesis:us-east-1:000000000000:stream/s","StartingPosition":"AT_TIMESTAMP","StartingPositionTimestamp":1700000000.5}`,
	`{"FunctionName":"fn","EventSourceArn":"arn:aws:kinesis:us-east-1:000000000000:stream/s","StartingPosition":"LATEST","BatchSize":10001}`,
	`{"FunctionName":"fn","EventSourceArn":"arn:aws:kinesis:us-east-1:000000000000:stream/s","StartingPosition":"LATEST","MaximumRecordAgeInSeconds":30}`,
	`{"FunctionName":"fn","EventSourceArn":"arn:aws:kinesis:us-east-1:000000000000:stream/s","StartingPosition":"LATEST","FilterCriteria":{"Filters":[{"Pattern":"{\"data\":{\"a\":[1]}}"}]},"FunctionResponseTypes":["ReportBatchItemFailures"],"DestinationConfig":{"OnFailure":{"Destination":"arn:aws:sqs:us-east-1:000000000000:q"}},"ParallelizationFactor":10,"TumblingWindowInSeconds":900,"BisectBatchOnFunctionError":true,"MaximumRetryAttempts":10000,"MaximumBatchingWindowInSeconds":300,"Tags":{"a":"b"}}`,
	`{"FunctionName":"fn","EventSourceArn":"arn:aws:kinesis:us-east-1:000000000000:stream/s","StartingPosition":"LATEST","StartingPositionTimestamp":1e300}`,
	`{"FunctionName":"fn","EventSourceArn":"arn:aws:sqs:us-east-1:000000000000:q","StartingPosition":"LATEST","ScalingConfig":{}}`,
	`{"BatchSize":"ten"}`, `{"FunctionName":7}`,
}

// FuzzCreateRequest drives CreateEventSourceMapping's parser and checks with arbitrary bodies: no
// panic; every refusal is a 4xx with a known type and a message; every acceptance describes a
// mapping whose stored settings rebuild the same configuration (what a restart and an update
// start from).
func FuzzCreateRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	m := fuzzManager()
	known := map[string]bool{InvalidParameterValue: true, Validation: true, Serialization: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, aerr := parseCreate(body)
		if aerr == nil {
			var created runner.Mapping
			created, aerr = m.checkCreate(req)
			if checked := created.Config; aerr == nil {
				if err := checked.Validate(*req.EventSourceArn); err != nil {
					t.Fatalf("accepted a configuration that does not validate: %v", err)
				}
				checkRoundTrip(t, m, req)
				return
			}
		}
		if aerr.Status < 400 || aerr.Status > 499 || !known[aerr.Type] || aerr.Message == "" {
			t.Fatalf("refusal %+v", aerr)
		}
	})
}

// checkRoundTrip describes the accepted mapping and rebuilds its configuration from the stored
// settings, as a restart does.
func checkRoundTrip(t *testing.T, m *Manager, req *createRequest) {
	t.Helper()
	created, _ := m.checkCreate(req)
	mc, src := created.Config, created.Source
	var esm EventSourceMapping
	esm.describe(sourceARN(src), mc)
	b, err := json.Marshal(Record{Mapping: esm, FunctionName: *req.FunctionName, Enabled: !mc.Disabled})
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("the stored form does not read back: %v", err)
	}
	stored := m.config(&entry{rec: rec})
	if err := stored.Validate(rec.Mapping.EventSourceArn); err != nil { // as the runner checks it
		t.Fatalf("stored settings do not rebuild: %v", err)
	}
	again := stored.Defaults()
	if !reflect.DeepEqual(normal(again), normal(mc)) {
		t.Fatalf("round trip changed the configuration:\n%+v\n%+v", again, mc)
	}
}

// normal makes equal configurations compare equal: no filters is nil, times are UTC, nil
// retries and record age are their defaults.
func normal(c poller.Config) poller.Config {
	if len(c.FilterPatterns) == 0 {
		c.FilterPatterns = nil
	}
	c.StartingPositionTimestamp = c.StartingPositionTimestamp.UTC()
	c.MaximumRetryAttempts, c.MaximumRecordAgeInSeconds = new(c.RetryAttempts()), new(c.RecordAgeSeconds())
	return c
}

// FuzzUpdateRequest drives UpdateEventSourceMapping's parser and model checks.
func FuzzUpdateRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, aerr := parseUpdate(body)
		if aerr == nil {
			aerr = req.checkModel()
		}
		if aerr == nil {
			aerr = req.checkKinesis()
		}
		if aerr != nil && (aerr.Status != 400 || aerr.Message == "") {
			t.Fatalf("refusal %+v", aerr)
		}
	})
}

// FuzzSigV4 drives the SigV4 check with arbitrary Authorization, X-Amz-Date and
// X-Amz-Content-Sha256 headers and bodies: no panic, and nothing reaches the API unsigned; every
// refusal is a 4xx with one of AWS's authentication error types and a message.
func FuzzSigV4(f *testing.F) {
	f.Add("", "", "", []byte(nil))
	f.Add("AWS4-HMAC-SHA256 Credential=AKID/20240101/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, Signature=00", "20240101T000000Z", "", []byte("{}"))
	f.Add("AWS4-HMAC-SHA256 Credential=AKID/20240101/eu-west-1/kinesis/aws4_request, SignedHeaders=host, Signature=ab", "20240101T000000Z", "UNSIGNED-PAYLOAD", []byte("x"))
	f.Add("AWS4-HMAC-SHA256 Credential=a/b/c/d, SignedHeaders=, Signature=", "garbage", "", []byte(nil))
	f.Add("AWS4-HMAC-SHA256 ,,,=,Credential=////aws4_request", "", "", []byte(nil))
	creds := Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"}
	now := func() time.Time { return time.Date(2024, 1, 1, 0, 1, 0, 0, time.UTC) }
	reached := false
	h := RequireSigV4(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }), creds, "us-east-1", now)
	known := map[string]bool{MissingAuthenticationToken: true, UnrecognizedClient: true, InvalidSignature: true,
		"IncompleteSignatureException": true, "RequestTooLargeException": true}
	f.Fuzz(func(t *testing.T, authz, date, sha string, body []byte) {
		req := httptest.NewRequest("POST", "/2015-03-31/event-source-mappings/", bytes.NewReader(body))
		for k, v := range map[string]string{"Authorization": authz, "X-Amz-Date": date, "X-Amz-Content-Sha256": sha} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		reached = false
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if reached {
			t.Fatalf("an arbitrary signature reached the API: %q", authz)
		}
		var doc struct{ Message string }
		typ := rec.Header()["x-amzn-ErrorType"] // written in AWS's spelling, not canonical
		if len(typ) != 1 {
			t.Fatalf("answer %d %s: no x-amzn-ErrorType", rec.Code, rec.Body)
		}
		if rec.Code/100 != 4 || !known[typ[0]] || json.Unmarshal(rec.Body.Bytes(), &doc) != nil || doc.Message == "" {
			t.Fatalf("answer %d %s %s: want a 4xx with AWS's authentication error", rec.Code, typ, rec.Body)
		}
	})
}
