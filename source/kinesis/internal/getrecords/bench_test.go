package getrecords

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// BenchmarkEmptyGetRecords is one GetRecords call answered with no records by a local server
// (in this process, so its work is in the figures too), through the SDK client and through the
// lean path: allocs/op and B/op do not depend on the machine's load, ns/op does.
func BenchmarkEmptyGetRecords(b *testing.B) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = io.WriteString(w, `{"Records":[],"NextShardIterator":"AAAAAAAAAAGpYWPp1ukKv1ETxqEDHLiv8R0OXMy8lh23OsRYbOw4NRqXyPBJ3bDUx6mGN+RqNIAk0JCT5V9TqSORNs6cpB4xfs4N4D2nISNOtAQPQ6qIxyGdyFjMjNWzkwz6jdTPK","MillisBehindLatest":0}`)
	}))
	srv.Start()
	b.Cleanup(srv.Close)
	h2 := httptest.NewUnstartedServer(srv.Config.Handler)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	b.Cleanup(h2.Close)
	leanH2 := New(sdkClient(h2.URL, new(atomic.Int64), trusting(h2)))
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAGpYWPp1ukKv1ETxqEDHLiv8R0OXMy8lh23OsRYbOw4NRqXyPBJ3bDUx6mGN+RqNIAk0JCT5V9TqSORNs6cpB4xfs4N4D2nISNOtAQPQ6qIxyGdyFjMjNWzkwz6jdTPK"), Limit: aws.Int32(10000)}
	var ops atomic.Int64
	for _, c := range []struct {
		name string
		call func(context.Context, *kinesis.GetRecordsInput, ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
	}{
		{"sdk", sdkClient(srv.URL, &ops).GetRecords},
		{"lean", New(sdkClient(srv.URL, &ops)).GetRecords},
		{"lean h2", leanH2.GetRecords},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.call(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
