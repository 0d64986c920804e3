package lambdaapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
)

// invokeAPI is an httptest server that speaks Lambda's Invoke API: the function named in the
// path decides the answer, as Lambda would give it.
type invokeAPI struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	method, path string
	header       http.Header
	body         string
}

func newInvokeAPI(t *testing.T) *invokeAPI {
	t.Helper()
	a := &invokeAPI{}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *invokeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.requests = append(a.requests, recorded{method: r.Method, path: r.URL.EscapedPath(), header: r.Header.Clone(), body: string(body)})
	a.mu.Unlock()

	name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/2015-03-31/functions/"), "/invocations")
	h := w.Header()
	h.Set("X-Amzn-RequestId", "req-"+name)
	lambdaError := func(status int, errType, message string) {
		h.Set("X-Amzn-ErrorType", errType)
		h.Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"Type":"User","message":"`+message+`"}`)
	}
	switch name {
	case "ok":
		h.Set("X-Amz-Executed-Version", "3")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"batchItemFailures":null}`)
	case "fails":
		h.Set("X-Amz-Executed-Version", "$LATEST")
		h.Set("X-Amz-Function-Error", "Unhandled")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"errorMessage":"boom","errorType":"errorString"}`)
	case "throttled":
		lambdaError(429, "TooManyRequestsException", "Rate Exceeded.")
	case "missing":
		lambdaError(404, "ResourceNotFoundException", "Function not found: arn:aws:lambda:us-east-1:000000000000:function:missing")
	case "kms":
		lambdaError(502, "KMSAccessDeniedException", "Lambda was unable to decrypt the environment variables")
	case "broken":
		lambdaError(500, "ServiceException", "internal")
	default:
		lambdaError(400, "InvalidParameterValueException", "unknown test function")
	}
}

func (a *invokeAPI) client() *awslambda.Client {
	return awslambda.New(awslambda.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local", ""),
		BaseEndpoint:     aws.String(a.srv.URL),
		RetryMaxAttempts: 1, // the SDK's own retries are the client owner's choice; test one call
	})
}

func TestLambdaInvokeAPI(t *testing.T) {
	api := newInvokeAPI(t)
	tests := []struct {
		function string
		want     error // nil: the function was reached
		fe       string
		version  string
		payload  string
	}{
		{function: "ok", version: "3", payload: `{"batchItemFailures":null}`},
		{function: "fails", fe: invoke.FunctionErrorUnhandled, version: "$LATEST", payload: `{"errorMessage":"boom","errorType":"errorString"}`},
		{function: "throttled", want: invoke.ErrThrottled},
		{function: "missing", want: invoke.ErrUnavailable},
		{function: "kms", want: invoke.ErrUnavailable},
		{function: "broken", want: invoke.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.function, func(t *testing.T) {
			l := New(api.client(), tt.function)
			resp, err := l.Invoke(context.Background(), []byte(`{"Records":[]}`))
			if tt.want != nil {
				if !errors.Is(err, tt.want) || (tt.want == invoke.ErrThrottled) == errors.Is(err, invoke.ErrUnavailable) {
					t.Fatalf("err %v, want %v", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || resp.FunctionError != tt.fe || resp.ExecutedVersion != tt.version ||
				string(resp.Payload) != tt.payload || resp.RequestID != "req-"+tt.function {
				t.Fatalf("response %+v (payload %s)", resp, resp.Payload)
			}
		})
	}

	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.requests) != len(tests) {
		t.Fatalf("%d requests for %d invocations: the SDK must not retry here", len(api.requests), len(tests))
	}
	for _, r := range api.requests {
		if r.method != http.MethodPost || r.body != `{"Records":[]}` || r.header.Get("X-Amz-Invocation-Type") != "RequestResponse" ||
			!strings.HasPrefix(r.header.Get("Authorization"), "AWS4-HMAC-SHA256") {
			t.Fatalf("request %s %s %q, headers %v: want a signed synchronous invoke", r.method, r.path, r.body, r.header)
		}
	}
}

func TestLambdaCallerCancel(t *testing.T) {
	api := newInvokeAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New(api.client(), "ok").Invoke(ctx, []byte(`{}`))
	if !errors.Is(err, context.Canceled) || errors.Is(err, invoke.ErrUnavailable) {
		t.Fatalf("err %v: want context.Canceled, not a classification", err)
	}
}

func TestClassifyLambda(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		ctxErr error
		want   error
	}{
		{name: "typed throttle", err: &types.TooManyRequestsException{Message: aws.String("Rate Exceeded.")}, want: invoke.ErrThrottled},
		{name: "resource not found", err: &types.ResourceNotFoundException{}, want: invoke.ErrUnavailable},
		{name: "function updating", err: &types.ResourceConflictException{}, want: invoke.ErrUnavailable},
		{name: "ENI throttled is not a concurrency throttle", err: &types.EC2ThrottledException{}, want: invoke.ErrUnavailable},
		{name: "transport", err: errors.New("dial tcp: connection refused"), want: invoke.ErrUnavailable},
		{name: "deadline of the SDK's own", err: context.DeadlineExceeded, want: invoke.ErrUnavailable},
		{name: "caller cancelled", err: context.Canceled, ctxErr: context.Canceled, want: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := classifyLambda("f", nil, tt.err, tt.ctxErr)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
	resp, err := classifyLambda("f", &awslambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Handled"), Payload: []byte(`{}`)}, nil, nil)
	if err != nil || resp.FunctionError != invoke.FunctionErrorUnhandled {
		t.Fatalf("any FunctionError value is a function error: %+v, %v", resp, err)
	}
}

// The SDK's own retries ask the start check before each attempt (sendGuard): a check that says
// no stops them before the next send. Fails without sendGuard's check (3 requests).
func TestLambdaRetriesAskTheStartCheck(t *testing.T) {
	for _, tt := range []struct {
		name     string
		yes      int // how many times the check says yes
		requests int
		want     error
	}{
		{"yes", 100, 3, invoke.ErrUnavailable},
		{"no from the second attempt", 1, 1, invoke.ErrNotStarted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := newInvokeAPI(t)
			client := retryingClient(api.srv.URL)
			asked := 0
			ctx := invoke.WithStartCheck(context.Background(), func() bool { asked++; return asked <= tt.yes })
			if _, err := New(client, "broken").Invoke(ctx, []byte(`{"Records":[]}`)); !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			api.mu.Lock()
			defer api.mu.Unlock()
			if len(api.requests) != tt.requests {
				t.Fatalf("%d requests, want %d", len(api.requests), tt.requests)
			}
		})
	}
}

// retryingClient is a Lambda client of url whose SDK retries three times, at once.
func retryingClient(url string) *awslambda.Client {
	return awslambda.New(awslambda.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local", ""),
		BaseEndpoint:     aws.String(url),
		RetryMaxAttempts: 3,
		Retryer:          retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts, o.MaxBackoff = 3, time.Millisecond }),
	})
}

// A connection reset after Lambda read the request is ambiguous (the function runs on at Lambda)
// and is never sent again by the SDK's retryer; a refused dial is not (nothing was sent) and is
// retried. Fails with every transport error classified as invoke.ErrUnavailable (the audit's
// defect 2: the SDK re-sent the batch at once).
func TestLambdaTransportErrorsClassifiedBySend(t *testing.T) {
	var mu sync.Mutex
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		requests++
		mu.Unlock()
		if err := testkit.ResetConnection(w); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	_, err := New(retryingClient(srv.URL), "f").Invoke(context.Background(), []byte(`{"Records":[]}`))
	if !errors.Is(err, invoke.ErrAmbiguous) || errors.Is(err, invoke.ErrUnavailable) {
		t.Errorf("reset after the request was read: err %v, want invoke.ErrAmbiguous alone", err)
	}
	mu.Lock()
	if requests != 1 {
		t.Errorf("reset after the request was read: %d requests, want 1 (never sent again)", requests)
	}
	mu.Unlock()
	_, err = New(retryingClient(testkit.RefusedURL(t)), "f").Invoke(context.Background(), []byte(`{"Records":[]}`))
	if !errors.Is(err, invoke.ErrUnavailable) || errors.Is(err, invoke.ErrAmbiguous) {
		t.Errorf("refused dial: err %v, want invoke.ErrUnavailable alone", err)
	}
}
