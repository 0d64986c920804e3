package health_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"sync/atomic"

	"github.com/kinesis-esm/esm/metrics/health"
)

// /readyz answers 503 with the readiness function's error until it returns nil.
func Example() {
	var leasesHeld atomic.Bool // kept up to date by the program
	srv := health.New("127.0.0.1:0", health.WithReadiness(func() error {
		if !leasesHeld.Load() {
			return errors.New("no lease held yet")
		}
		return nil
	}))
	ts := httptest.NewServer(srv.Handler()) // a program calls srv.Listen and srv.Run instead
	defer ts.Close()

	get := func(path string) {
		resp, err := ts.Client().Get(ts.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%s %d %s", path, resp.StatusCode, body)
	}
	get("/healthz")
	get("/readyz")
	leasesHeld.Store(true)
	get("/readyz")
	// Output:
	// /healthz 200 ok
	// /readyz 503 not ready: no lease held yet
	// /readyz 200 ready
}
