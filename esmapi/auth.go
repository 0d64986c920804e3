package esmapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Credentials are the access key the API accepts when it listens beyond loopback.
type Credentials struct {
	AccessKeyID, SecretAccessKey string
}

// ParseCredentials reads KEY:SECRET.
func ParseCredentials(s string) (Credentials, error) {
	k, secret, ok := strings.Cut(s, ":")
	if !ok || k == "" || secret == "" {
		return Credentials{}, fmt.Errorf("want KEY:SECRET") // never echo the value: it holds the secret
	}
	return Credentials{AccessKeyID: k, SecretAccessKey: secret}, nil
}

// String hides the secret, should the credentials ever be formatted.
func (c Credentials) String() string { return c.AccessKeyID + ":***" }

// NormalizeAddr makes a bare :PORT bind 127.0.0.1.
func NormalizeAddr(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// Loopback reports whether addr (HOST:PORT) binds the loopback interface only.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// maxSkew is how far a request's X-Amz-Date may be from now, as AWS allows.
const maxSkew = 5 * time.Minute

// SigningService is the service a request's credential scope must name: Lambda's.
const SigningService = "lambda"

// RequireSigV4 lets through only requests signed with creds (AWS Signature Version 4) for
// service lambda in region (the credential scope KEY/DATE/REGION/lambda/aws4_request). It
// re-signs each request's canonical form with the SDK's signer and compares the signatures;
// anything else is refused as AWS refuses it. The body (at most 1 MiB) is read only once the
// headers passed: an unsigned request costs no more than its headers.
func RequireSigV4(h http.Handler, creds Credentials, region string, now func() time.Time) http.Handler {
	signer := v4.NewSigner()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		read := func() *APIError {
			var err error
			if body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody)); err != nil {
				return tooLarge()
			}
			return nil
		}
		if e := verify(r, read, &body, creds, region, now(), signer); e != nil {
			writeError(w, "", e)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

func authError(status int, typ, msg string) *APIError {
	return &APIError{Status: status, Type: typ, Message: msg}
}

// authorization is a parsed SigV4 Authorization header.
type authorization struct {
	accessKey, date, region, service string
	signedHeaders, signature         string
}

func parseAuthorization(h string) (authorization, bool) {
	var a authorization
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return a, false
	}
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return a, false
		}
		switch k {
		case "Credential":
			scope := strings.Split(v, "/")
			if len(scope) != 5 || scope[4] != "aws4_request" {
				return a, false
			}
			a.accessKey, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
		case "SignedHeaders":
			a.signedHeaders = v
		case "Signature":
			a.signature = v
		}
	}
	return a, a.accessKey != "" && a.signedHeaders != "" && a.signature != ""
}

// verify checks r's signature; read reads its body into *body once the headers passed.
func verify(r *http.Request, read func() *APIError, body *[]byte, creds Credentials, region string, now time.Time, signer *v4.Signer) *APIError {
	h := r.Header.Get("Authorization")
	if h == "" {
		return authError(http.StatusForbidden, MissingAuthenticationToken, "Missing Authentication Token")
	}
	a, ok := parseAuthorization(h)
	if !ok {
		return authError(http.StatusBadRequest, "IncompleteSignatureException",
			"Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters of the AWS4-HMAC-SHA256 algorithm.")
	}
	if e := checkScope(a, region); e != nil {
		return e
	}
	if a.accessKey != creds.AccessKeyID {
		return authError(http.StatusForbidden, UnrecognizedClient, "The security token included in the request is invalid.")
	}
	const amzDate = "20060102T150405Z"
	t, err := time.Parse(amzDate, r.Header.Get("X-Amz-Date"))
	if err != nil || t.Format("20060102") != a.date {
		return authError(http.StatusBadRequest, "IncompleteSignatureException", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	if d := now.Sub(t); d > maxSkew || d < -maxSkew {
		return authError(http.StatusForbidden, InvalidSignature, fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - 5 min.)",
			t.Format(amzDate), now.UTC().Add(-maxSkew).Format(amzDate), now.UTC().Format(amzDate)))
	}
	if e := read(); e != nil {
		return e
	}
	sum := sha256.Sum256(*body)
	payloadHash := hex.EncodeToString(sum[:])
	if v := r.Header.Get("X-Amz-Content-Sha256"); v != "" && v != payloadHash {
		return mismatch()
	}
	// The canonical request, rebuilt from the headers the client signed and nothing else.
	u := &url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	req := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: http.Header{}}
	for _, name := range strings.Split(a.signedHeaders, ";") {
		switch name {
		case "host":
		case "content-length":
			req.ContentLength = r.ContentLength
		default:
			if vs := r.Header.Values(name); len(vs) > 0 {
				req.Header[http.CanonicalHeaderKey(name)] = vs
			}
		}
	}
	err = signer.SignHTTP(r.Context(), aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey},
		req, payloadHash, a.service, a.region, t)
	if err != nil {
		return mismatch()
	}
	want, ok := parseAuthorization(req.Header.Get("Authorization"))
	if !ok || want.signedHeaders != a.signedHeaders || !hmac.Equal([]byte(want.signature), []byte(a.signature)) {
		return mismatch()
	}
	return nil
}

// checkScope refuses a credential scope of another region or service, before the key is looked
// at, with AWS's InvalidSignatureException: one sentence per wrong part, the region's first, each
// ending ". " (as AWS's services write them).
func checkScope(a authorization, region string) *APIError {
	var msg strings.Builder
	if a.region != region {
		fmt.Fprintf(&msg, "Credential should be scoped to a valid region, not '%s'. ", a.region)
	}
	if a.service != SigningService {
		fmt.Fprintf(&msg, "Credential should be scoped to correct service: '%s'. ", SigningService)
	}
	if msg.Len() == 0 {
		return nil
	}
	return authError(http.StatusForbidden, InvalidSignature, msg.String())
}

func mismatch() *APIError {
	return authError(http.StatusForbidden, InvalidSignature,
		"The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
}
