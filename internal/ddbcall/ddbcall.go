// Package ddbcall is the deadline policy of esm's DynamoDB calls. The SDK sets no deadline of
// its own on a call, so one whose connection a middlebox black-holes (or a proxy keeps open)
// hangs for minutes, or for good, and whatever waits on it waits as long. Every call esm makes
// gets a context deadline of its own, and a read that ran out of its time is tried again at
// once; a write is left to its caller, which knows whether trying it again is safe.
//
// The lease protocol (package lease) derives its deadlines from the lease duration; the other
// users of DynamoDB (the mappings catalog of esm serve, table checks, status reads) use the
// fixed deadlines below.
package ddbcall

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Deadlines of DynamoDB calls outside the lease protocol.
const (
	// Item bounds one item read or write (GetItem, PutItem, UpdateItem, DeleteItem,
	// TransactWriteItems, a BatchGetItem of up to 100 keys).
	Item = 5 * time.Second
	// Page bounds one Scan or Query page (at most 1 MB).
	Page = 5 * time.Second
	// Table bounds one DescribeTable or CreateTable call.
	Table = 10 * time.Second
)

// ReadAttempts is how many times a read that ran out of its own time is tried in all.
const ReadAttempts = 2

// ErrCallTimeout is wrapped by the error of a call that ran out of its own time (not its
// caller's).
var ErrCallTimeout = errors.New("DynamoDB call got no answer in time")

// Call runs fn with a context that ends timeout from now, or with ctx. An attempt that ran out
// of its own time while ctx lives is tried again, up to attempts in all (1: a write, whose first
// attempt may have landed; ReadAttempts for a read); its error then wraps ErrCallTimeout. timeout <= 0 means no deadline of its own.
func Call[T any](ctx context.Context, timeout time.Duration, attempts int, fn func(context.Context) (T, error)) (T, error) {
	var (
		out T
		err error
	)
	for n := 1; ; n++ {
		out, err = once(ctx, timeout, fn)
		if err == nil || !errors.Is(err, ErrCallTimeout) || n >= attempts {
			return out, err
		}
	}
}

func once[T any](ctx context.Context, timeout time.Duration, fn func(context.Context) (T, error)) (T, error) {
	if timeout <= 0 {
		return fn(ctx)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := fn(cctx)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		// The call's own deadline, not the caller's end: say so (the SDK's error may only say
		// "context deadline exceeded" or "canceled").
		return out, fmt.Errorf("%w after %s: %w", ErrCallTimeout, timeout, err)
	}
	return out, err
}
