package invoke

import (
	"context"
	"fmt"
	"net"
	"net/http/httptrace"
	"sync/atomic"
)

// SendTrace follows one invocation's HTTP attempts through net/http's client trace: whether the
// current attempt's request was written. It is the one classification of a failed attempt that got
// no answer (Failed), shared by every invoker that speaks HTTP: the Lambda SDK's client (through
// the request context, which the SDK's transport keeps) and the HTTP endpoints' pool.
type SendTrace struct {
	wrote atomic.Bool
}

// TraceSend returns ctx carrying a client trace that records in the returned SendTrace when a
// request made with ctx has been written in full (httptrace's WroteRequest without an error). It
// composes with a trace ctx already carries.
func TraceSend(ctx context.Context) (context.Context, *SendTrace) {
	t := &SendTrace{}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				t.wrote.Store(true)
			}
		},
	})
	return ctx, t
}

// Attempt starts a new attempt: its request is not written yet. An invoker that retries calls it
// before each attempt.
func (t *SendTrace) Attempt() { t.wrote.Store(false) }

// Wrote reports whether the current attempt's request was written in full.
func (t *SendTrace) Wrote() bool { return t.wrote.Load() }

// Failed classifies err, the failure of the current attempt before any answer came (a transport
// error, a timeout waiting for the response's headers, or a response body cut off):
//
//   - before the request was written in full (a failed dial, DNS, a refused connection, a TLS
//     handshake, a write that failed): the function was not reached, the error wraps
//     ErrUnavailable and the attempt may be retried at once;
//   - after it was written (a reset, an EOF, a timeout waiting for the answer): the function may
//     have run and may still run; the error wraps ErrAmbiguous, and nothing may send the batch
//     again before the invocation bound has passed. A request written only in part never runs:
//     Lambda and aws-lambda-rie read the whole body (Content-Length) before they invoke.
func (t *SendTrace) Failed(err error) error {
	if t.Wrote() {
		return fmt.Errorf("%w: %w", ErrAmbiguous, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// CheckedDial wraps a transport's dial (http.Transport's DialContext or DialTLSContext): once a
// new connection is ready, the start check of the request that asked for it (the dial's context
// carries the request's values) is asked again, and when it says no the connection is closed and
// nothing is written (an error wrapping ErrNotStarted). A slow connect or TLS handshake then
// cannot put a send past the point the check guards (the lease's horizon).
func CheckedDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := CheckStart(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return conn, nil
	}
}
