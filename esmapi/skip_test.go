package esmapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/poller"
)

// postSkip posts body to url and returns the status, the error type and the body.
func postSkip(t *testing.T, url, contentType, body string) (int, string, string) {
	t.Helper()
	resp, err := http.Post(url, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("x-amzn-ErrorType"), string(b)
}

// TestSkipRoute: esm serve's skip route skips the batch a mapping retries for ever (the next
// record is then handled) and answers what it did; bad input, an unknown mapping, a shard the
// stream lacks and a shard no longer blocked are refused with Lambda's error shapes.
func TestSkipRoute(t *testing.T) {
	ctx := context.Background()
	name, arn := newStream(t)
	f := &recorder{fail: "poison"}
	s := startServer(t, t.TempDir(), map[string]*recorder{"f": f})
	out, err := s.client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String("f"), EventSourceArn: aws.String(arn), StartingPosition: types.EventSourcePositionTrimHorizon,
		BatchSize: aws.Int32(1), MaximumRetryAttempts: aws.Int32(-1),
	})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.UUID)
	put(t, name, "poison", "next")
	testkit.WaitFor(t, "the poison record retried", 20*time.Second, func() bool { return strings.Count(strings.Join(f.records(), ","), "poison") >= 2 })
	url := s.http.URL + esmapi.SkipPath(id)
	for _, c := range []struct {
		url, body string
		status    int
		errType   string
	}{
		{url, `{"ShardId":""}`, 400, esmapi.InvalidParameterValue},
		{url, `{"ShardId":"shardId-000000000000","FirstSequenceNumber":"x1"}`, 400, esmapi.InvalidParameterValue},
		{url, `{"ShardId":`, 400, esmapi.Serialization},
		{url, `{"ShardId":"shardId-000000000007"}`, 400, esmapi.InvalidParameterValue},
		{url, `{"ShardId":"shardId-000000000000","FirstSequenceNumber":"1"}`, 409, esmapi.ResourceConflict},
		{s.http.URL + esmapi.SkipPath("5b6e7e32-3c39-4cd7-9a1e-0d4c7f3c2b11"), `{"ShardId":"shardId-000000000000"}`, 404, esmapi.ResourceNotFound},
	} {
		status, errType, body := postSkip(t, c.url, "application/json", c.body)
		if status != c.status || errType != c.errType {
			t.Fatalf("%s: %d (%s) %s, want %d %s", c.body, status, errType, body, c.status, c.errType)
		}
	}
	status, _, body := postSkip(t, url, "application/json", `{"ShardId":"shardId-000000000000"}`)
	var res esmapi.SkipOutput
	if status != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil || res.Records != 1 || res.Destination != "" || res.FailedAttempts < 2 {
		t.Fatalf("skip: %d %s", status, body)
	}
	testkit.WaitFor(t, "the next record handled", 20*time.Second, f.has("next"))
	if status, errType, body := postSkip(t, url, "application/json", `{"ShardId":"shardId-000000000000"}`); status != http.StatusConflict || !strings.Contains(body, "not retrying a batch") {
		t.Fatalf("second skip: %d %s %s", status, errType, body)
	}
}

// TestWorkerSkipRoute: a worker's skip route answers loopback clients posting JSON only.
func TestWorkerSkipRoute(t *testing.T) {
	h := esmapi.WorkerSkipHandler(poller.NewSkips())
	req := httptest.NewRequest(http.MethodPost, esmapi.WorkerSkipPath, strings.NewReader(`{"ShardId":"shardId-000000000000"}`))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = "192.0.2.7:4000"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("a non-loopback client: %d %s", rec.Code, rec.Body)
	}
	req = httptest.NewRequest(http.MethodPost, esmapi.WorkerSkipPath, strings.NewReader(`ShardId=shardId-000000000000`))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.RemoteAddr = "127.0.0.1:4000"
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("a form post: %d %s", rec.Code, rec.Body)
	}
	req = httptest.NewRequest(http.MethodPost, esmapi.WorkerSkipPath, strings.NewReader(`{"ShardId":"shardId-000000000000"}`))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = "127.0.0.1:4000"
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "no shard") {
		t.Fatalf("a shard no poller of it lists: %d %s", rec.Code, rec.Body)
	}
}
