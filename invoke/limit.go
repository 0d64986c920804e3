package invoke

import (
	"context"
	"fmt"
)

// Limit returns an invoker that lets at most n invocations of inv run at once, across every
// shard that shares it: the counterpart of a function's reserved concurrency.
//
// A caller that finds all n slots taken waits for one, in arrival order, for as long as its ctx
// allows; when ctx ends first, Invoke returns ctx's error (wrapped) without invoking. Lambda
// throttles instead (429), and its poller retries after a backoff; here a throttle would only add
// that backoff (the poller waits a second or more before trying again) and let shards starve one
// another, while a queue gives the same cap, the same per-shard order and the same "not counted
// as a retry", with every shard served in turn and no idle slot. The wait is bounded by the
// caller's context: the poller's own shutdown grace.
//
// n == 0 is reserved concurrency 0: the function is throttled, and every Invoke returns an error
// wrapping ErrThrottled at once. n < 0 means no limit: inv is returned as it is.
func Limit(inv Invoker, n int) Invoker {
	switch {
	case n < 0:
		return inv
	case n == 0:
		return InvokerFunc(func(context.Context, []byte) (Response, error) {
			return Response{}, fmt.Errorf("%w: reserved concurrency is 0", ErrThrottled)
		})
	}
	// A counting semaphore: the buffer is the number of slots, so its size is the limit itself.
	return &limited{inv: inv, slots: make(chan struct{}, n)}
}

// limited is the invoker Limit returns for n > 0.
type limited struct {
	inv   Invoker
	slots chan struct{} // one element per invocation in flight
}

// Invoke waits for a slot, as long as ctx allows, then invokes.
func (l *limited) Invoke(ctx context.Context, payload []byte) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, fmt.Errorf("invoke: %w", err)
	}
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return Response{}, fmt.Errorf("invoke: waiting for one of %d concurrency slots: %w", cap(l.slots), ctx.Err())
	}
	defer func() { <-l.slots }()
	if err := CheckStart(ctx); err != nil { // the wait for a slot may have been long
		return Response{}, err
	}
	return l.inv.Invoke(ctx, payload)
}
