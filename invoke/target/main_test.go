package target

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that what the tests opened and closed left no goroutine behind (an HTTP
// client's idle connections excepted).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}
