package runner

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/kinesis-esm/esm/invoke"
)

// IdleConnsPerHost is how many idle connections to one AWS endpoint the SDK clients keep for
// reuse. Every shard a process reads has a GetRecords call in flight or about to be (once a
// second when idle), each on its own connection; the SDK's default pool keeps 10 per host and 100
// in all, so a process reading more shards than that closed most connections after each poll and
// opened new ones for the next (a TLS handshake each on AWS): with 1,000 idle shards about 330
// new connections a second (cmd/esm's BenchmarkManyIdleShardsFakeKinesis). The pool holds as
// many as are in use at once, up to this bound, and closes each after the SDK's idle timeout
// (90 s) without use. Over HTTPS the SDK's transport offers HTTP/2, and with a server that takes
// it (the benchmark with -tls) the shards' calls share connections (200 to 700 of them at 500 to
// 2,000 shards, opened by the first burst of calls); over plain HTTP (local emulators) each call in
// flight has its own. Measured again with the lean GetRecords path (source/kinesis/internal/getrecords): no
// connection opened during the benchmark's window at 500 to 2,000 idle shards either way, and
// about the same CPU per call over TLS with HTTP/2 as over plain HTTP/1.1 (README, Benchmarks).
const IdleConnsPerHost = 10000

// Timeouts of the SDK clients' connections (none of them has one by default: a connection a
// middlebox black-holes hangs a call for minutes, or for good behind a proxy that keeps it open).
const (
	// ConnectTimeout bounds a TCP connect (the SDK's default: 30 s).
	ConnectTimeout = 3 * time.Second
	// TLSHandshakeTimeout bounds a TLS handshake (the SDK's default: 10 s).
	TLSHandshakeTimeout = 5 * time.Second
	// ReadTimeout is the rolling read timeout of the clients of Kinesis, SQS, SNS, S3 and STS: a
	// connection that receives nothing for this long fails its call. Their answers come within
	// a second or two (GetRecords included); an enhanced fan-out subscription receives an event
	// every few seconds, so this is well above what any of them waits for. It is a rolling
	// timeout rather than a response-header timeout because the lean GetRecords path
	// (source/kinesis/internal/getrecords) honours the one and not the other.
	ReadTimeout = 30 * time.Second
	// CallHeaderTimeout is how long a DynamoDB call (the lease table, the catalog) waits for its
	// answer's headers: DynamoDB answers in milliseconds.
	CallHeaderTimeout = 5 * time.Second
	// InvokeHeaderMargin is how much longer than the invocation bound a Lambda Invoke call waits
	// for its answer's headers (InvokeHTTPClient): Lambda answers once the function has ended.
	InvokeHeaderMargin = 5 * time.Second
)

// httpClient is the SDK clients' HTTP client: a pool of IdleConnsPerHost idle connections per
// host and no limit on their total, the connect and TLS handshake timeouts, and ReadTimeout.
func httpClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 0 // no limit in total; per host, IdleConnsPerHost
		t.MaxIdleConnsPerHost = IdleConnsPerHost
		t.TLSHandshakeTimeout = TLSHandshakeTimeout
	}).WithDialerOptions(func(d *net.Dialer) { d.Timeout = ConnectTimeout }).WithReadTimeout(ReadTimeout)
}

// callClient is hc, when it is the SDK's buildable client, with CallHeaderTimeout: the DynamoDB
// clients'. It has a pool of its own.
func callClient(hc any) (*awshttp.BuildableClient, bool) {
	b, ok := hc.(*awshttp.BuildableClient)
	if !ok {
		return nil, false
	}
	return b.WithTransportOptions(func(t *http.Transport) { t.ResponseHeaderTimeout = CallHeaderTimeout }), true
}

// InvokeHTTPClient is the HTTP client of a Lambda client that invokes functions of the given
// timeout, whose invocations run up to their bound (the timeout plus the 10 s Lambda allows
// before it, as invocationBound says): it waits the bound plus InvokeHeaderMargin for an
// answer's headers (Lambda sends them once the function has ended) and
// has no rolling read timeout, which would end every invocation that runs longer. Its connects
// and TLS handshakes are bounded as httpClient's, and once a new connection is ready the
// invocation's start check (invoke.WithStartCheck) is asked again before the request is
// written on it: a slow connect or handshake cannot put the send past the lease's horizon.
// It speaks HTTP/1.1, one invocation per connection at a time.
func InvokeHTTPClient(timeout time.Duration) *awshttp.BuildableClient {
	bound := outOfProcessBound(timeout)
	return awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 0
		t.MaxIdleConnsPerHost = IdleConnsPerHost
		t.ResponseHeaderTimeout = bound + InvokeHeaderMargin
		dial := (&net.Dialer{Timeout: ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		t.DialContext = invoke.CheckedDial(dial)
		t.DialTLSContext = invoke.CheckedDial(func(ctx context.Context, network, addr string) (net.Conn, error) {
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
			if t.TLSClientConfig != nil {
				cfg = t.TLSClientConfig.Clone()
				cfg.NextProtos = []string{"http/1.1"}
			}
			hctx, cancel := context.WithTimeout(ctx, ConnectTimeout+TLSHandshakeTimeout)
			defer cancel()
			return (&tls.Dialer{NetDialer: &net.Dialer{Timeout: ConnectTimeout, KeepAlive: 30 * time.Second}, Config: cfg}).DialContext(hctx, network, addr)
		})
		t.ForceAttemptHTTP2 = false
	})
}
