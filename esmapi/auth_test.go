package esmapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/smithy-go"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/internal/testbed/local"
	"github.com/kinesis-esm/esm/internal/testbed/testkit"
)

func TestSigV4(t *testing.T) {
	s := startServer(t, t.TempDir(), map[string]*recorder{"fn": {}})
	creds := esmapi.Credentials{AccessKeyID: "AKIDSERVE", SecretAccessKey: "serve-secret"}
	now := time.Now()
	clock := func() time.Time { return now }
	srv := httptest.NewServer(esmapi.RequireSigV4(s.m.Handler(), creds, local.DefaultRegion, func() time.Time { return clock() }))
	defer srv.Close()
	client := func(key, secret string) *lambda.Client {
		return lambda.New(lambda.Options{Region: local.DefaultRegion, BaseEndpoint: aws.String(srv.URL),
			Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""), RetryMaxAttempts: 1})
	}
	ctx := context.Background()
	code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		return ""
	}

	// Signed with the key: answered. A body goes through the check intact.
	if _, err := client("AKIDSERVE", "serve-secret").ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{MaxItems: aws.Int32(5)}); err != nil {
		t.Fatalf("signed list: %v", err)
	}
	_, err := client("AKIDSERVE", "serve-secret").CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{FunctionName: aws.String("fn")})
	if code(err) != "InvalidParameterValueException" || !strings.Contains(err.Error(), "Unrecognized event source.") {
		t.Fatalf("signed create reached the API with its body? %v", err)
	}

	for _, c := range []struct {
		name, key, secret, want string
		skew                    time.Duration
	}{
		{"wrong secret", "AKIDSERVE", "guess", "InvalidSignatureException", 0},
		{"unknown key", "AKIDOTHER", "serve-secret", "UnrecognizedClientException", 0},
		{"clock skew", "AKIDSERVE", "serve-secret", "InvalidSignatureException", 6 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock = func() time.Time { return time.Now().Add(c.skew) }
			defer func() { clock = func() time.Time { return now } }()
			_, err := client(c.key, c.secret).ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{})
			if code(err) != c.want {
				t.Fatalf("got %v, want %s", err, c.want)
			}
		})
	}
	clock = time.Now

	send := func(t *testing.T, req *http.Request) (int, string) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("x-amzn-ErrorType")
	}
	t.Run("unsigned", func(t *testing.T) {
		req, _ := http.NewRequest("GET", srv.URL+mappings, nil)
		if st, typ := send(t, req); st != 403 || typ != "MissingAuthenticationTokenException" {
			t.Fatalf("unsigned: %d %s", st, typ)
		}
	})
	t.Run("body too large", func(t *testing.T) {
		big := bytes.Repeat([]byte("x"), 2<<20)
		req, _ := http.NewRequest("POST", srv.URL+mappings, bytes.NewReader(big))
		if st, typ := send(t, req); st != 403 || typ != "MissingAuthenticationTokenException" {
			t.Fatalf("unsigned 2 MiB: %d %s; want refused on its headers, before its body is read", st, typ)
		}
		req, _ = http.NewRequest("POST", srv.URL+mappings, bytes.NewReader(big))
		if err := v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: "AKIDSERVE", SecretAccessKey: "serve-secret"},
			req, "UNSIGNED-PAYLOAD", "lambda", local.DefaultRegion, time.Now()); err != nil {
			t.Fatal(err)
		}
		if st, typ := send(t, req); st != 413 || typ != "RequestTooLargeException" {
			t.Fatalf("signed 2 MiB: %d %s", st, typ)
		}
	})
	t.Run("body changed after signing", func(t *testing.T) {
		signed := []byte(`{"FunctionName":"fn"}`)
		req, _ := http.NewRequest("POST", srv.URL+mappings, bytes.NewReader(signed))
		sum := sha256.Sum256(signed)
		if err := v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: "AKIDSERVE", SecretAccessKey: "serve-secret"},
			req, hex.EncodeToString(sum[:]), "lambda", local.DefaultRegion, time.Now()); err != nil {
			t.Fatal(err)
		}
		if st, typ := send(t, req.Clone(ctx)); st == 403 {
			t.Fatalf("the untouched request was refused: %s", typ)
		}
		tampered := []byte(`{"FunctionName":"fx"}`)
		req2 := req.Clone(ctx)
		req2.Body, req2.ContentLength = http.NoBody, int64(len(tampered))
		req2.Body = readCloser{bytes.NewReader(tampered)}
		if st, typ := send(t, req2); st != 403 || typ != "InvalidSignatureException" {
			t.Fatalf("tampered body: %d %s", st, typ)
		}
	})
}

// TestSigV4ScopePinned: a request signed with the right key but for another service or region is
// refused as AWS refuses it, before the key is looked at: InvalidSignatureException, 403, one
// sentence per wrong part of the credential scope (testdata/sigv4_scope.golden).
func TestSigV4ScopePinned(t *testing.T) {
	s := startServer(t, t.TempDir(), map[string]*recorder{"fn": {}})
	creds := esmapi.Credentials{AccessKeyID: "AKIDSERVE", SecretAccessKey: "serve-secret"}
	srv := httptest.NewServer(esmapi.RequireSigV4(s.m.Handler(), creds, local.DefaultRegion, time.Now))
	defer srv.Close()
	var golden bytes.Buffer
	for _, c := range []struct{ name, key, service, region string }{
		{"lambda in esm's region", "AKIDSERVE", "lambda", local.DefaultRegion},
		{"another service", "AKIDSERVE", "kinesis", local.DefaultRegion},
		{"another region", "AKIDSERVE", "lambda", "eu-west-1"},
		{"both", "AKIDSERVE", "execute-api", "ap-south-2"},
		{"another region and an unknown key", "AKIDOTHER", "lambda", "eu-west-1"},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/2015-03-31/event-source-mappings/", nil)
		if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: c.key, SecretAccessKey: "serve-secret"},
			req, hex.EncodeToString(sha256.New().Sum(nil)), c.service, c.region, time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(&golden, "# %s: %s/%s\n%d %s\n%s", c.name, c.region, c.service, resp.StatusCode, resp.Header.Get("x-amzn-ErrorType"), body)
		if c.name == "lambda in esm's region" {
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("a request signed for lambda in %s: %d %s", local.DefaultRegion, resp.StatusCode, body)
			}
			golden.Reset()
		}
	}
	testkit.Golden(t, "sigv4_scope.golden", golden.Bytes())
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:9070": true, "[::1]:9070": true, "localhost:9070": true, "127.3.4.5:1": true,
		"0.0.0.0:9070": false, ":9070": false, "10.0.0.1:9070": false, "[::]:9070": false, "example.com:80": false,
	} {
		if got := esmapi.Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
	if got := esmapi.NormalizeAddr(":9070"); got != "127.0.0.1:9070" || !esmapi.Loopback(got) {
		t.Errorf("a bare :PORT becomes %q", got)
	}
}

func TestParseCredentialsHidesTheSecret(t *testing.T) {
	c, err := esmapi.ParseCredentials("KEY:s3cr3t:with:colons")
	if err != nil || c.AccessKeyID != "KEY" || c.SecretAccessKey != "s3cr3t:with:colons" {
		t.Fatalf("%+v %v", c, err)
	}
	if strings.Contains(c.String(), "s3cr3t") {
		t.Fatalf("String() shows the secret: %s", c)
	}
	if _, err := esmapi.ParseCredentials("nosecret"); err == nil || strings.Contains(err.Error(), "nosecret") {
		t.Fatalf("bad credentials: %v", err)
	}
}
