package inprocess

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/invoke"
)

// TakesRecords reports whether the handler has a Kinesis signature, so that InvokeRecords can
// hand it an event without JSON (the poller's RecordsInvoker).
func (p *Invoker) TakesRecords() bool { return p.fast != nil }

// InvokeRecords is Invoke for a handler of a Kinesis signature (see TakesRecords), given the
// event as the struct it takes rather than as JSON: the handler gets *e (the caller builds a fresh
// event for every call, as a fresh decoding would be, since the handler may change it), with the
// same lambdacontext, deadline, timeout, overrun wait and panic recovery as Invoke, and its
// response is encoded and classified as Invoke's. It returns an error wrapping
// invoke.ErrUnavailable, without calling the handler, for any other handler.
func (p *Invoker) InvokeRecords(ctx context.Context, e *events.KinesisEvent) (invoke.Response, error) {
	if p.fast == nil {
		return invoke.Response{}, fmt.Errorf("invoke in process: %w: the handler does not take an events.KinesisEvent", invoke.ErrUnavailable)
	}
	return p.run(ctx, func(ctx context.Context) ([]byte, error) { return p.fast(ctx, *e) })
}
