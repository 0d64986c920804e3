package runner

import (
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
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
// flight has its own. Measured again with the lean GetRecords path (internal/getrecords): no
// connection opened during the benchmark's window at 500 to 2,000 idle shards either way, and
// about the same CPU per call over TLS with HTTP/2 as over plain HTTP/1.1 (README, Benchmarks).
const IdleConnsPerHost = 10000

// httpClient is the SDK's default HTTP client with a pool of IdleConnsPerHost idle connections
// per host and no limit on their total.
func httpClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 0 // no limit in total; per host, IdleConnsPerHost
		t.MaxIdleConnsPerHost = IdleConnsPerHost
	})
}
