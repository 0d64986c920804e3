package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Service is what a request through a worker's proxy is for.
type Service int

// The services a worker reaches through its proxy: the stream it reads (Kinesis, or a DynamoDB
// table's stream through DynamoDB Streams), DynamoDB (its lease table) and its function.
const (
	Kinesis Service = iota
	DynamoDB
	Function
	DynamoDBStreams
	numServices
)

func (s Service) String() string {
	switch s {
	case Kinesis:
		return "kinesis"
	case DynamoDB:
		return "dynamodb"
	case Function:
		return "function"
	case DynamoDBStreams:
		return "dynamodbstreams"
	}
	return fmt.Sprintf("Service(%d)", int(s))
}

// serviceOf routes a request: the AWS JSON protocols name their service in X-Amz-Target, and the
// Lambda Invoke API is a POST to .../invocations.
func serviceOf(r *http.Request) (Service, bool) {
	target := r.Header.Get("X-Amz-Target")
	switch {
	case strings.HasPrefix(target, "Kinesis_20131202."):
		return Kinesis, true
	case strings.HasPrefix(target, "DynamoDB_20120810."):
		return DynamoDB, true
	case strings.HasPrefix(target, "DynamoDBStreams_20120810."):
		return DynamoDBStreams, true
	case strings.HasSuffix(r.URL.Path, "/invocations"):
		return Function, true
	}
	return 0, false
}

// The faults a proxy injects into single requests.
const (
	FaultServerError = "5xx"         // an AWS-shaped 500 or 503, not forwarded
	FaultThrottle    = "throttle"    // an AWS-shaped throttling error, not forwarded
	FaultDropBefore  = "drop-before" // the connection closed before forwarding
	FaultDropAfter   = "drop-after"  // forwarded, then the connection closed: the response is lost
	FaultPartition   = "partitioned" // a request that arrived while its service was cut off
)

// Rates are the probabilities that one request gets each fault.
type Rates struct {
	ServerError, Throttle, DropBefore, DropAfter float64
}

// Proxy stands between one worker and everything it reaches: its stream, DynamoDB and the function.
// It forwards each request to its service, or injects a fault drawn from its seeded source, or,
// while the worker is partitioned from that service, holds the request and drops its connection.
type Proxy struct {
	worker  string
	targets [numServices]string // base URLs
	rates   [numServices]Rates
	tr      *http.Transport
	counts  *Counts

	mu  sync.Mutex
	rng *rand.Rand
	cut [numServices]chan struct{} // non-nil while partitioned: closed when the partition ends

	ln  net.Listener
	srv *http.Server
}

// NewProxy starts a proxy for worker on 127.0.0.1 that forwards to targets (base URLs of
// Kinesis or DynamoDB Streams, DynamoDB and the function server) and counts its faults in counts.
func NewProxy(worker string, seed uint64, targets [numServices]string, rates [numServices]Rates, counts *Counts) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{worker: worker, targets: targets, rates: rates, counts: counts, ln: ln,
		rng: rand.New(rand.NewPCG(seed, 0x70726f7879)),
		tr:  &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's base URL.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy, ending every partition first so that held requests end.
func (p *Proxy) Close() error {
	for s := range numServices {
		p.Heal(s)
	}
	err := p.srv.Close()
	p.tr.CloseIdleConnections()
	return err
}

// Partition cuts the worker off from s until Heal(s). It reports false if it already was.
func (p *Proxy) Partition(s Service) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut[s] != nil {
		return false
	}
	p.cut[s] = make(chan struct{})
	return true
}

// Heal ends a partition from s.
func (p *Proxy) Heal(s Service) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut[s] != nil {
		close(p.cut[s])
		p.cut[s] = nil
	}
}

// partitioned returns the channel closed at the end of the partition from s, or nil.
func (p *Proxy) partitioned(s Service) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut[s]
}

// draw picks the fault of one request to s, or "".
func (p *Proxy) draw(s Service) (fault string, hold time.Duration, variant int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.rates[s]
	x := p.rng.Float64()
	hold = time.Duration(p.rng.Int64N(int64(3 * time.Second)))
	variant = p.rng.IntN(2)
	for _, f := range []struct {
		name string
		rate float64
	}{{FaultServerError, r.ServerError}, {FaultThrottle, r.Throttle}, {FaultDropBefore, r.DropBefore}, {FaultDropAfter, r.DropAfter}} {
		if x < f.rate {
			return f.name, hold, variant
		}
		x -= f.rate
	}
	return "", hold, variant
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s, ok := serviceOf(r)
	if !ok {
		http.Error(w, "chaos proxy: unknown service", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	fault, hold, variant := p.draw(s)
	if cut := p.partitioned(s); cut != nil {
		// A partition: nothing reaches the service. The request hangs for a while (up to the
		// end of the partition), then its connection breaks, as a cut network does.
		p.counts.Add(s, FaultPartition)
		select {
		case <-cut:
		case <-time.After(hold):
		case <-r.Context().Done():
		}
		drop(w)
		return
	}
	switch fault {
	case FaultServerError, FaultThrottle:
		p.counts.Add(s, fault)
		writeFault(w, s, fault, variant)
		return
	case FaultDropBefore:
		p.counts.Add(s, fault)
		drop(w)
		return
	}
	// The function keeps running when its caller goes away, as a Lambda invocation does.
	ctx := r.Context()
	if s == Function {
		ctx = context.WithoutCancel(ctx)
	}
	out, err := http.NewRequestWithContext(ctx, r.Method, p.targets[s]+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		drop(w)
		return
	}
	out.Header = r.Header.Clone()
	out.Header.Set(workerHeader, p.worker)
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		drop(w)
		return
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		drop(w)
		return
	}
	switch {
	case fault == FaultDropAfter:
		p.counts.Add(s, fault)
		drop(w)
		return
	case p.partitioned(s) != nil: // cut while the request was at the service: the answer is lost
		p.counts.Add(s, FaultPartition)
		drop(w)
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(rb)
}

// workerHeader tells the function server which worker's proxy an invocation came through.
const workerHeader = "X-Chaos-Worker"

// drop closes the client's connection without an answer.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // net/http closes the connection without a response
}

// writeFault answers as the service answers when it fails or throttles (variant picks one of two
// shapes of each).
func writeFault(w http.ResponseWriter, s Service, fault string, variant int) {
	type shape struct {
		status  int
		errType string
	}
	shapes := map[Service]map[string][2]shape{
		Kinesis: {
			FaultServerError: {{500, "InternalFailure"}, {503, "ServiceUnavailable"}},
			FaultThrottle:    {{400, "ProvisionedThroughputExceededException"}, {400, "LimitExceededException"}},
		},
		DynamoDB: {
			FaultServerError: {{500, "com.amazonaws.dynamodb.v20120810#InternalServerError"}, {503, "com.amazonaws.dynamodb.v20120810#ServiceUnavailable"}},
			FaultThrottle:    {{400, "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"}, {400, "com.amazon.coral.availability#ThrottlingException"}},
		},
		DynamoDBStreams: {
			FaultServerError: {{500, "com.amazonaws.dynamodb.v20120810#InternalServerError"}, {503, "com.amazonaws.dynamodb.v20120810#ServiceUnavailable"}},
			FaultThrottle:    {{400, "com.amazonaws.dynamodb.v20120810#LimitExceededException"}, {400, "com.amazon.coral.availability#ThrottlingException"}},
		},
		Function: {
			FaultServerError: {{500, "ServiceException"}, {502, "EC2UnexpectedException"}},
			FaultThrottle:    {{429, "TooManyRequestsException"}, {429, "TooManyRequestsException"}},
		},
	}
	sh := shapes[s][fault][variant]
	name := sh.errType[strings.LastIndexByte(sh.errType, '#')+1:]
	if s == Function {
		w.Header().Set("X-Amzn-ErrorType", name)
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if s == DynamoDB || s == DynamoDBStreams {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		}
	}
	w.WriteHeader(sh.status)
	if s == Function {
		fmt.Fprintf(w, `{"Type":"Service","message":"chaos: %s"}`, name)
		return
	}
	fmt.Fprintf(w, `{"__type":%q,"message":"chaos: injected %s"}`, sh.errType, name)
}

// Counts counts the faults injected, per service and kind, and the process faults, per kind.
type Counts struct {
	mu sync.Mutex
	n  map[string]int
}

// Add counts one fault of kind to s.
func (c *Counts) Add(s Service, kind string) { c.AddKind(s.String() + " " + kind) }

// AddKind counts one fault of a kind named in full.
func (c *Counts) AddKind(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[kind]++
}

// Snapshot returns a copy of the counts.
func (c *Counts) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}
