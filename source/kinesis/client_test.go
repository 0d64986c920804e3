package kinesis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go/middleware"
)

// TestSDKGetRecordsSwitch: a Stream of the SDK's client reads on the lean path by default (its
// GetRecords do not go through the SDK's middleware stack, but for the one call that makes the
// lean path's template), and with WithSDKGetRecords every GetRecords is the SDK's own call. Both
// reach the endpoint once per read.
func TestSDKGetRecordsSwitch(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".GetRecords") {
			http.Error(w, "only GetRecords", http.StatusBadRequest)
			return
		}
		served.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte(`{"Records":[],"NextShardIterator":"next","MillisBehindLatest":0}`))
	}))
	defer srv.Close()
	const reads = 3
	for _, tt := range []struct {
		name           string
		opts           []Option
		maxSDK, minSDK int64
		leanClient     bool
	}{
		{"lean path by default", nil, 1, 0, true},
		{"WithSDKGetRecords", []Option{WithSDKGetRecords()}, reads, reads, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			served.Store(0)
			var sdkCalls atomic.Int64
			count := middleware.FinalizeMiddlewareFunc("count", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				if middleware.GetOperationName(ctx) == "GetRecords" {
					sdkCalls.Add(1)
				}
				return next.HandleFinalize(ctx, in)
			})
			client := kinesis.New(kinesis.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
				Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
				APIOptions:  []func(*middleware.Stack) error{func(s *middleware.Stack) error { return s.Finalize.Add(count, middleware.After) }}})
			s, err := New(client, testStream, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if _, lean := s.Client().(interface{ Batch() (send func()) }); lean != tt.leanClient {
				t.Fatalf("client %T: lean %v, want %v", s.Client(), lean, tt.leanClient)
			}
			for range reads {
				page, err := s.Read(context.Background(), "shardId-000000000000", "it", 10)
				if err != nil || page.Next != "next" {
					t.Fatalf("read: %+v, %v", page, err)
				}
			}
			if n := sdkCalls.Load(); n < tt.minSDK || n > tt.maxSDK {
				t.Fatalf("%d GetRecords through the SDK's stack for %d reads, want %d to %d", n, reads, tt.minSDK, tt.maxSDK)
			}
			if served.Load() != reads {
				t.Fatalf("the endpoint served %d GetRecords for %d reads", served.Load(), reads)
			}
		})
	}
}
