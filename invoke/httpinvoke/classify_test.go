package httpinvoke

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/kinesis-esm/esm/invoke"
)

func TestClassifyHTTP(t *testing.T) {
	const reqID = "req-1"
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	goPanic := `{"errorMessage":"kaboom","errorType":"string","stackTrace":[{"path":"github.com/x/f.go","line":3,"label":"handle"}]}`
	big := strings.Repeat("x", invoke.MaxPayloadBytes+1)
	tests := []struct {
		name    string
		in      attempt
		kind    outcomeKind
		retry   bool
		busy    bool
		payload string // expected Payload for success and function errors ("" = the body unchanged)
		version string // expected ExecutedVersion (default $LATEST)
		id      string // expected RequestID (default reqID)
	}{
		// aws-lambda-rie, as recorded in emulators.md
		{name: "rie success", in: attempt{status: 200, body: []byte(`{"batchItemFailures":null}`)}, kind: kindSuccess},
		{name: "rie partial batch response", in: attempt{status: 200, body: []byte(`{"batchItemFailures":[{"itemIdentifier":"1"}]}`)}, kind: kindSuccess},
		{name: "rie handler error", in: attempt{status: 200, body: []byte(`{"errorMessage":"boom: handler error","errorType":"errorString"}`)}, kind: kindFunctionError},
		{name: "rie panic", in: attempt{status: 502, body: []byte(goPanic)}, kind: kindFunctionError},
		{name: "rie runtime exit", in: attempt{status: 502, body: []byte(`{"errorType":"Runtime.ExitError","errorMessage":"RequestId: x Error: Runtime exited with error: exit status 3"}`)}, kind: kindFunctionError},
		{name: "rie timeout", in: attempt{status: 200, body: []byte("Task timed out after 1.00 seconds")}, kind: kindFunctionError,
			payload: `{"errorMessage":"RequestId: req-1 Error: Task timed out after 1.00 seconds","errorType":"Sandbox.Timedout"}`},
		{name: "rie unmarshal error", in: attempt{status: 200, body: []byte(`{"errorMessage":"json: cannot unmarshal string into Go value of type events.KinesisEvent","errorType":"UnmarshalTypeError"}`)}, kind: kindFunctionError},
		{name: "rie concurrent invoke rejected", in: attempt{status: 400}, kind: kindUnavailable},
		{name: "rie internal error", in: attempt{status: 500}, kind: kindUnavailable, retry: true},
		{name: "rie reservation done", in: attempt{status: 504}, kind: kindUnavailable, retry: true},

		// Lambda's Invoke API
		{name: "lambda success", in: attempt{status: 200, header: hdr("X-Amz-Executed-Version", "7", "X-Amzn-RequestId", "lambda-id"), body: []byte(`null`)},
			kind: kindSuccess, version: "7", id: "lambda-id"},
		{name: "lambda function error", in: attempt{status: 200, header: hdr("X-Amz-Function-Error", "Unhandled"), body: []byte(goPanic)}, kind: kindFunctionError},
		{name: "lambda handled error header", in: attempt{status: 200, header: hdr("X-Amz-Function-Error", "Handled"), body: []byte(`{"message":"x"}`)}, kind: kindFunctionError},
		{name: "lambda timeout document", in: attempt{status: 200, header: hdr("X-Amz-Function-Error", "Unhandled"), body: []byte(`{"errorType":"Sandbox.Timedout","errorMessage":"RequestId: a Error: Task timed out after 3.00 seconds"}`)}, kind: kindFunctionError},
		{name: "function error header wins over 5xx", in: attempt{status: 500, header: hdr("X-Amz-Function-Error", "Unhandled"), body: []byte(`{}`)}, kind: kindFunctionError},
		{name: "throttled", in: attempt{status: 429, body: []byte(`{"Type":"User","message":"Rate Exceeded."}`)}, kind: kindThrottled},
		{name: "function missing", in: attempt{status: 404, body: []byte(`{"Type":"User","message":"Function not found"}`)}, kind: kindUnavailable},
		{name: "request too large", in: attempt{status: 413}, kind: kindUnavailable},
		{name: "service error", in: attempt{status: 500, body: []byte(`{"Type":"Service","message":"internal"}`)}, kind: kindUnavailable, retry: true},
		{name: "unavailable", in: attempt{status: 503, body: []byte("Service Unavailable")}, kind: kindUnavailable, retry: true},
		{name: "proxy 502 without a document", in: attempt{status: 502, body: []byte("<html>Bad Gateway</html>")}, kind: kindUnavailable, retry: true},
		{name: "error-like document on 500 is the endpoint's", in: attempt{status: 500, body: []byte(`{"errorType":"x","errorMessage":"y"}`)}, kind: kindUnavailable, retry: true},
		{name: "redirect", in: attempt{status: 307}, kind: kindUnavailable},
		// Transport errors come classified (invoke.SendTrace.Failed): before the request was
		// written, unavailable and retried; after it, ambiguous, never retried, the endpoint busy.
		{name: "connection refused", in: attempt{err: fmt.Errorf("%w: %w", invoke.ErrUnavailable, syscall.ECONNREFUSED)}, kind: kindUnavailable, retry: true},
		{name: "dial timeout", in: attempt{err: fmt.Errorf("%w: %w", invoke.ErrUnavailable, &url.Error{Op: "Post", URL: "u", Err: timeoutErr{}})}, kind: kindUnavailable, retry: true},
		{name: "client timeout", in: attempt{err: fmt.Errorf("%w: %w", invoke.ErrAmbiguous, &url.Error{Op: "Post", URL: "u", Err: timeoutErr{}})}, kind: kindAmbiguous, busy: true},
		{name: "attempt deadline", in: attempt{err: fmt.Errorf("%w: post: %w", invoke.ErrAmbiguous, context.DeadlineExceeded)}, kind: kindAmbiguous, busy: true},
		{name: "reset", in: attempt{err: fmt.Errorf("%w: %w", invoke.ErrAmbiguous, syscall.ECONNRESET)}, kind: kindAmbiguous, busy: true},

		// other runtimes' error documents
		{name: "python error", in: attempt{status: 200, body: []byte(`{"errorMessage":"x","errorType":"ValueError","requestId":"r","stackTrace":["  File \"/var/task/app.py\", line 3\n"]}`)}, kind: kindFunctionError},
		{name: "node error", in: attempt{status: 200, body: []byte(`{"errorType":"Error","errorMessage":"x","trace":["Error: x","    at Runtime.handler (/var/task/index.js:3:9)"]}`)}, kind: kindFunctionError},
		{name: "java error", in: attempt{status: 200, body: []byte(`{"errorMessage":"x","errorType":"java.lang.RuntimeException","stackTrace":[],"cause":{"errorMessage":"y"}}`)}, kind: kindFunctionError},

		// responses that only resemble errors
		{name: "response with an errorMessage field among others", in: attempt{status: 200, body: []byte(`{"errorMessage":"x","batchItemFailures":[]}`)}, kind: kindSuccess},
		{name: "errorType not a string", in: attempt{status: 200, body: []byte(`{"errorType":5}`)}, kind: kindSuccess},
		{name: "only a stack trace", in: attempt{status: 200, body: []byte(`{"stackTrace":[]}`)}, kind: kindSuccess},
		{name: "timed-out text inside a JSON string", in: attempt{status: 200, body: []byte(`"Task timed out after 1.00 seconds"`)}, kind: kindSuccess},
		{name: "empty body", in: attempt{status: 200}, kind: kindSuccess},
		{name: "response over 6 MB", in: attempt{status: 200, body: []byte(big)}, kind: kindFunctionError,
			payload: `{"errorMessage":"Response payload size exceeded maximum allowed payload size (6291456 bytes).","errorType":"Function.ResponseSizeTooLarge"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classifyHTTP(reqID, tt.in)
			if got.kind != tt.kind || got.retry != tt.retry || got.busy != tt.busy {
				t.Fatalf("got %v (retry %v, busy %v), want %v (retry %v, busy %v); reason %q", got.kind, got.retry, got.busy, tt.kind, tt.retry, tt.busy, got.reason)
			}
			switch tt.kind {
			case kindThrottled, kindUnavailable, kindAmbiguous:
				if got.reason == "" {
					t.Fatal("no reason given")
				}
				return
			}
			wantFE := ""
			if tt.kind == kindFunctionError {
				wantFE = invoke.FunctionErrorUnhandled
			}
			wantPayload := string(tt.in.body)
			if tt.payload != "" {
				wantPayload = tt.payload
			}
			wantVersion, wantID := invoke.ExecutedVersionLatest, reqID
			if tt.version != "" {
				wantVersion = tt.version
			}
			if tt.id != "" {
				wantID = tt.id
			}
			r := got.resp
			if r.StatusCode != 200 || r.FunctionError != wantFE || r.ExecutedVersion != wantVersion || r.RequestID != wantID {
				t.Fatalf("response %d %q %q %q, want 200 %q %q %q", r.StatusCode, r.FunctionError, r.ExecutedVersion, r.RequestID, wantFE, wantVersion, wantID)
			}
			if string(r.Payload) != wantPayload {
				t.Fatalf("payload %.200s, want %.200s", r.Payload, wantPayload)
			}
		})
	}
}

// timeoutErr is a net.Error that timed out, as http.Client.Timeout produces.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "timeout awaiting response headers" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestOutcomeResult(t *testing.T) {
	ep := &endpoint{base: "http://127.0.0.1:1"}
	tests := []struct {
		name string
		o    outcome
		want error
	}{
		{name: "throttled", o: outcome{kind: kindThrottled, reason: "status 429"}, want: invoke.ErrThrottled},
		{name: "unavailable", o: outcome{kind: kindUnavailable, reason: "status 404"}, want: invoke.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.o.result(ep)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), ep.base) || !strings.Contains(err.Error(), tt.o.reason) {
				t.Fatalf("error %v: want %v naming the endpoint and the reason", err, tt.want)
			}
		})
	}
	resp := invoke.Response{StatusCode: 200, Payload: []byte("null")}
	got, err := outcome{kind: kindSuccess, resp: resp}.result(ep)
	if err != nil || string(got.Payload) != "null" {
		t.Fatalf("success: %+v, %v", got, err)
	}
}

func TestStatusReasonCutsLongBodies(t *testing.T) {
	r := statusReason(attempt{status: 503, body: []byte(strings.Repeat("é", 300))})
	if !strings.HasPrefix(r, "status 503: é") || !strings.HasSuffix(r, "…") || len(r) > 230 {
		t.Fatalf("reason %q", r)
	}
	if !utf8.ValidString(r) { // the cut never splits a character
		t.Fatalf("reason %q is not valid UTF-8", r)
	}
}
