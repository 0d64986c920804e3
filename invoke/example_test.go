package invoke_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/kinesis-esm/esm/invoke"
)

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
