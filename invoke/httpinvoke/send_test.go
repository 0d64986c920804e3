package httpinvoke

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
	"github.com/kinesis-esm/esm/invoke"
)

// A connection reset after the endpoint read the request is ambiguous: not retried (on this
// endpoint: the pool retried it 50 ms later while it still ran, the audit's defect 2), the error
// wraps invoke.ErrAmbiguous, and the endpoint is held back. A refused dial wrote nothing: retried,
// and invoke.ErrUnavailable. Fails with transport errors classified without SendTrace.
func TestHTTPTransportErrorsClassifiedBySend(t *testing.T) {
	f := newFakeEndpoint(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if err := testkit.ResetConnection(w); err != nil {
			t.Error(err)
		}
	})
	h := newHTTP(t, []string{f.srv.URL}, WithFunctionTimeout(time.Minute))
	started := time.Now()
	_, err := h.Invoke(context.Background(), []byte(`{}`))
	if !errors.Is(err, invoke.ErrAmbiguous) || errors.Is(err, invoke.ErrUnavailable) {
		t.Errorf("reset after the request was read: err %v, want invoke.ErrAmbiguous alone", err)
	}
	if n := f.count(); n != 1 {
		t.Errorf("reset after the request was read: %d requests, want 1 (not retried)", n)
	}
	ep := <-h.free
	if ep.notBefore.Before(started.Add(time.Minute)) {
		t.Errorf("endpoint held back until %v, want at least the function timeout after the send", ep.notBefore.Sub(started))
	}
	h.free <- ep

	refused := newHTTP(t, []string{testkit.RefusedURL(t)})
	_, err = refused.Invoke(context.Background(), []byte(`{}`))
	if !errors.Is(err, invoke.ErrUnavailable) || errors.Is(err, invoke.ErrAmbiguous) {
		t.Errorf("refused dial: err %v, want invoke.ErrUnavailable alone", err)
	}
	ep = <-refused.free
	if !ep.notBefore.IsZero() {
		t.Errorf("refused dial: endpoint held back until %v, want not held back", ep.notBefore)
	}
	refused.free <- ep
}

// The pool's transport asks the start check again once a new connection is ready: a lease lost
// during a slow connect sends nothing (suspicion S1). Fails without invoke.CheckedDial in
// newTransport.
func TestHTTPNewConnectionAsksTheStartCheck(t *testing.T) {
	f := newFakeEndpoint(t, reply(200, `{}`))
	h := newHTTP(t, []string{f.srv.URL})
	asked := 0
	ctx := invoke.WithStartCheck(context.Background(), func() bool { asked++; return asked == 1 }) // lost after the first ask
	_, err := h.Invoke(ctx, []byte(`{}`))
	if !errors.Is(err, invoke.ErrNotStarted) || f.count() != 0 {
		t.Fatalf("err %v after %d requests (the check asked %d times): want nothing sent", err, f.count(), asked)
	}
}
