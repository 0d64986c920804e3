package runner

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// TestStartupOutlivesABriefOutage: a worker started while Kinesis answers 5xx (or drops its
// connections) for a few calls waits for it. With the SDK's 3 attempts, "esm run" exited 1 with
// "describe stream …: exceeded maximum number of attempts, 3" (make chaos: a worker restarted
// into a partition).
func TestStartupOutlivesABriefOutage(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if calls.Add(1) <= 3 { // one more than the SDK's default attempts
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"__type":"InternalFailure","message":"outage"}`)
			return
		}
		_, _ = io.WriteString(w, `{"StreamDescriptionSummary":{"StreamARN":"arn:aws:kinesis:us-east-1:000000000000:stream/s","StreamName":"s","StreamStatus":"ACTIVE"}}`)
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")}
	cfg.BaseEndpoint = aws.String(srv.URL)
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	arn, err := kinesissrc.ResolveStreamARN(context.Background(), r.kinStart, "s")
	if err != nil {
		t.Fatalf("start-up through 3 failed calls: %v", err)
	}
	if arn != "arn:aws:kinesis:us-east-1:000000000000:stream/s" || calls.Load() != 4 {
		t.Errorf("ARN %q after %d calls, want the stream's after 4", arn, calls.Load())
	}
}
