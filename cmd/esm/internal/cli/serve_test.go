package cli

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

// TestCheckAPI: beyond loopback the API needs credentials and TLS, unless plaintext is accepted
// explicitly; the checks run before anything listens (nothing here binds an address).
func TestCheckAPI(t *testing.T) {
	cert, key := testkit.SelfSignedCert(t, t.TempDir())
	for _, c := range []struct {
		name  string
		f     ServeFlags
		err   string // "" for accepted
		https bool
	}{
		{name: "loopback, no credentials, plain HTTP", f: ServeFlags{APIAddr: "127.0.0.1:9070"}},
		{name: "bare port binds loopback", f: ServeFlags{APIAddr: ":9070"}},
		{name: "loopback over TLS", f: ServeFlags{APIAddr: "127.0.0.1:9070", APITLSCert: cert, APITLSKey: key}, https: true},
		{name: "open, no credentials", f: ServeFlags{APIAddr: "0.0.0.0:9070", APITLSCert: cert, APITLSKey: key}, err: "--api-credentials KEY:SECRET"},
		{name: "open, credentials, plain HTTP", f: ServeFlags{APIAddr: "0.0.0.0:9070", APICredentials: "K:S"}, err: "--api-tls-cert FILE --api-tls-key FILE"},
		{name: "open, credentials, plaintext accepted", f: ServeFlags{APIAddr: "10.1.2.3:9070", APICredentials: "K:S", APIInsecurePlaintext: true}},
		{name: "open, credentials, TLS", f: ServeFlags{APIAddr: "[::]:9070", APICredentials: "K:S", APITLSCert: cert, APITLSKey: key}, https: true},
		{name: "certificate without key", f: ServeFlags{APIAddr: "127.0.0.1:9070", APITLSCert: cert}, err: "go together"},
		{name: "key is not the certificate's", f: ServeFlags{APIAddr: "127.0.0.1:9070", APITLSCert: cert, APITLSKey: cert}, err: "--api-tls-key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.f.LeaseDuration, c.f.SyncInterval = 1, 1
			_, _, tlsConfig, err := c.f.checkAPI()
			if c.err == "" {
				if err != nil || (tlsConfig != nil) != c.https {
					t.Fatalf("err %v, TLS %v: want accepted, TLS %v", err, tlsConfig != nil, c.https)
				}
				return
			}
			if err == nil || ExitCode(err) != 2 || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("err %v: want a usage error with %q", err, c.err)
			}
		})
	}
}

// TestAPIServerLimits: the API's server refuses oversized headers and serves the rest.
func TestAPIServerLimits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveUntilDone(ctx, apiListener(ln, nil), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	get := func(header string) int {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/", nil)
		req.Header.Set("X-Big", header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("small"); code != 204 {
		t.Fatalf("a small request: %d", code)
	}
	if code := get(strings.Repeat("x", apiMaxHeaderBytes+8192)); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("headers past %d bytes: %d, want 431", apiMaxHeaderBytes, code)
	}
}
