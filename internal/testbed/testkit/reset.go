package testkit

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// ResetConnection resets the connection of the request w answers, with a TCP RST (SO_LINGER 0):
// what a NAT, a load balancer or a proxy does to a long call. The server's handler must have
// read the request already; the client then sees a transport error after its request was
// written.
func ResetConnection(w http.ResponseWriter) error {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetLinger(0); err != nil {
			return err
		}
	}
	return c.Close()
}

// RefusedURL is the URL of a port on 127.0.0.1 where nothing listens: a dial to it is refused,
// before any request is written.
func RefusedURL(t testing.TB) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u
}
