package httpinvoke_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/kinesis-esm/esm/invoke/httpinvoke"
)

func ExampleNew() {
	// An endpoint that answers like aws-lambda-rie for a handler that returned an error: status
	// 200, an error document, no X-Amz-Function-Error.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Method, r.URL.Path)
		_, _ = io.WriteString(w, `{"errorMessage":"boom","errorType":"errorString"}`)
	}))
	defer srv.Close()

	inv, err := httpinvoke.New([]string{srv.URL})
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
