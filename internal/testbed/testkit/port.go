package testkit

import (
	"net"
	"testing"
)

// FreePort returns a port of 127.0.0.1 that was free a moment ago, for a process that needs its
// port given before it starts (another process may take it meanwhile: retry on a failed bind).
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
