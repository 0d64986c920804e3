package invoke_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/invoke"
)

func ExampleNewInProcess() {
	inv := invoke.NewInProcess(func(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error) {
		if len(e.Records) == 0 {
			return events.KinesisEventResponse{}, errors.New("empty batch")
		}
		return events.KinesisEventResponse{}, nil
	})
	resp, err := inv.Invoke(context.Background(), []byte(`{"Records":[]}`))
	fmt.Println(err, resp.StatusCode, resp.FunctionError, string(resp.Payload))
	// Output: <nil> 200 Unhandled {"errorMessage":"empty batch","errorType":"errorString"}
}

func ExampleNewHTTP() {
	// An endpoint that answers like aws-lambda-rie for a handler that returned an error: status
	// 200, an error document, no X-Amz-Function-Error.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Method, r.URL.Path)
		_, _ = io.WriteString(w, `{"errorMessage":"boom","errorType":"errorString"}`)
	}))
	defer srv.Close()

	inv, err := invoke.NewHTTP([]string{srv.URL})
	if err != nil {
		panic(err)
	}
	defer inv.CloseIdleConnections()
	resp, err := inv.Invoke(context.Background(), []byte(`{"Records":[]}`))
	fmt.Println(err, resp.FunctionError)
	// Output:
	// POST /2015-03-31/functions/function/invocations
	// <nil> Unhandled
}

func ExampleLimit() {
	// At most two invocations at once, across every shard that shares inv; a third waits.
	inner := invoke.InvokerFunc(func(context.Context, []byte) (invoke.Response, error) {
		return invoke.Response{StatusCode: 200, Payload: []byte("null")}, nil
	})
	inv := invoke.Limit(inner, 2)
	resp, err := inv.Invoke(context.Background(), []byte(`{}`))
	fmt.Println(resp.StatusCode, err)

	_, err = invoke.Limit(inner, 0).Invoke(context.Background(), []byte(`{}`))
	fmt.Println(errors.Is(err, invoke.ErrThrottled))
	// Output:
	// 200 <nil>
	// true
}
