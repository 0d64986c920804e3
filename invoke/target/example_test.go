package target_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/invoke/target"
)

func ExampleOpen() {
	// A Lambda-Invoke-compatible endpoint, as aws-lambda-rie serves one; "url1 url2" would be a
	// pool of two, exec:bin/bootstrap the binary run by this process, lambda:NAME the function
	// on Lambda (with WithAWS).
	rie := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Method, r.URL.Path)
		_, _ = io.WriteString(w, `{"batchItemFailures":[]}`)
	}))
	defer rie.Close()

	inv, closeFn, err := target.Open(rie.URL, target.WithTimeout(10*time.Second), target.WithReservedConcurrency(5))
	if err != nil {
		panic(err)
	}
	defer closeFn()
	resp, err := inv.Invoke(context.Background(), []byte(`{"Records":[]}`))
	fmt.Println(resp.StatusCode, string(resp.Payload), err)

	_, _, err = target.Open("bin/bootstrap") // exec: says that it is a binary
	fmt.Println(errors.Is(err, target.ErrInvalidTarget))
	// Output:
	// POST /2015-03-31/functions/function/invocations
	// 200 {"batchItemFailures":[]} <nil>
	// true
}

func ExampleOpen_handler() {
	// A Go handler in this process: the example target (as "esm run --invoke example" runs
	// esm's own), or no target at all.
	handler := func(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{}}, nil
	}
	inv, closeFn, err := target.Open("", target.WithHandler(handler),
		target.WithFunction("orders", "arn:aws:lambda:us-east-1:123456789012:function:orders"))
	if err != nil {
		panic(err)
	}
	defer closeFn()
	resp, err := inv.Invoke(context.Background(), []byte(`{"Records":[]}`))
	fmt.Println(resp.StatusCode, string(resp.Payload), err)
	// Output:
	// 200 {"batchItemFailures":[]} <nil>
}
