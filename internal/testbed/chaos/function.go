package chaos

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Invocation is one call of the function, as the function saw it: when it started and ended (wall
// time of this process, which hosts the function), which worker sent it and what it held.
type Invocation struct {
	Worker     string
	Shard      string
	Start, End time.Time
	Records    []Record
	slow       bool // started while SlowFor applied to its worker
}

// Record is one record of an invocation.
type Record struct {
	Key      string // partition key (a DynamoDB item's key)
	Data     string // "key:n", the producer's n-th record (or change) of key
	Sequence string
	// Change is a DynamoDB Streams record as the function got it (nil for Kinesis).
	Change *events.DynamoDBEventRecord
}

// FunctionServer is the function every worker invokes, a Lambda-Invoke-compatible endpoint
// (POST .../invocations, as aws-lambda-rie and Lambda answer it). Each invocation takes a seeded
// random time, shorter than the function timeout, and is recorded when it ends. Like a Lambda
// invocation, it runs to its end whether or not its caller is still there.
type FunctionServer struct {
	src  Source // the events it decodes
	mu   sync.Mutex
	rng  *rand.Rand
	max  time.Duration
	log  []Invocation
	live map[*Invocation]struct{}
	slow map[string]time.Time // per worker: until when its invocations start long
	// started is closed (and replaced) when an invocation starts (AwaitSlow).
	started chan struct{}

	ln  net.Listener
	srv *http.Server
}

// NewFunctionServer starts the function on 127.0.0.1, taking the events of src's streams
// (events.KinesisEvent or events.DynamoDBEvent); no invocation lasts longer than max.
func NewFunctionServer(seed uint64, max time.Duration, src Source) (*FunctionServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &FunctionServer{src: src, rng: rand.New(rand.NewPCG(seed, 0x66756e63)), max: max, ln: ln, live: map[*Invocation]struct{}{}, slow: map[string]time.Time{},
		started: make(chan struct{})}
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// URL is the function's base URL.
func (f *FunctionServer) URL() string { return "http://" + f.ln.Addr().String() }

// Close stops the function server. Call it once InFlight is 0.
func (f *FunctionServer) Close() error { return f.srv.Close() }

// Invocations returns the invocations that ended, in the order they ended.
func (f *FunctionServer) Invocations() []Invocation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Invocation(nil), f.log...)
}

// InFlight is how many invocations are running.
func (f *FunctionServer) InFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}

// SlowFor makes the invocations that worker starts in the next d long (more than 0.6 of the
// limit; d = 0 ends it): the run calls it for the workers it may fault before a change of the
// stream and faults the first that runs such an invocation (AwaitSlow), so that the fault lands
// while an invocation runs, and an invocation started just before a worker is cut off outlasts
// its lease.
func (f *FunctionServer) SlowFor(worker string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slow[worker] = time.Now().Add(d)
}

// AwaitSlow waits until a long invocation (one started while SlowFor applied) of one of workers
// runs, for at most limit, and returns that worker: a fault dealt to it then lands
// mid-invocation. ok is false when none ran by then.
func (f *FunctionServer) AwaitSlow(ctx context.Context, workers []string, limit time.Duration) (worker string, ok bool) {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		for inv := range f.live {
			if inv.slow && slices.Contains(workers, inv.Worker) {
				worker, ok = inv.Worker, true
				break
			}
		}
		started := f.started
		f.mu.Unlock()
		if ok {
			return worker, true
		}
		select {
		case <-started:
		case <-deadline.C:
			return "", false
		case <-ctx.Done():
			return "", false
		}
	}
}

// duration draws the length of an invocation from worker: mostly short, sometimes long, rarely
// near the limit, and always long while the worker is to be slow.
func (f *FunctionServer) duration(worker string) (d time.Duration, slow bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	x := f.rng.Float64()
	if slow = time.Now().Before(f.slow[worker]); slow {
		x = 0.95 + 0.05*x
	}
	var lo, hi float64
	switch {
	case x < 0.70:
		lo, hi = 0.05, 0.25
	case x < 0.95:
		lo, hi = 0.25, 0.6
	default:
		lo, hi = 0.6, 1
	}
	return time.Duration((lo + (hi-lo)*f.rng.Float64()) * float64(f.max)), slow
}

func (f *FunctionServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	inv := &Invocation{Worker: r.Header.Get(workerHeader), Start: start}
	if err := f.decode(r.Body, inv); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d, slow := f.duration(inv.Worker)
	f.mu.Lock()
	inv.slow = slow
	f.live[inv] = struct{}{}
	close(f.started)
	f.started = make(chan struct{})
	f.mu.Unlock()
	time.Sleep(d) // the function's work; it does not stop when its caller goes away
	inv.End = time.Now()
	f.mu.Lock()
	delete(f.live, inv)
	f.log = append(f.log, *inv)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	_, _ = w.Write([]byte(`{"batchItemFailures":[]}`))
}

// decode reads an event into inv's records: a Kinesis event names its shard in each eventID
// ("shardId-…:sequence"); a DynamoDB Streams event does not, and its invocation's shard is
// learnt from the stream once the run is over (feed.settle).
func (f *FunctionServer) decode(body io.Reader, inv *Invocation) error {
	if f.src == SourceDynamoDB {
		var e events.DynamoDBEvent
		if err := json.NewDecoder(body).Decode(&e); err != nil {
			return err
		}
		for _, rec := range e.Records {
			inv.Records = append(inv.Records, ddbRecord(rec))
		}
		return nil
	}
	var e events.KinesisEvent
	if err := json.NewDecoder(body).Decode(&e); err != nil {
		return err
	}
	for _, rec := range e.Records {
		shard, _, _ := strings.Cut(rec.EventID, ":")
		inv.Shard = shard
		inv.Records = append(inv.Records, Record{Key: rec.Kinesis.PartitionKey, Data: string(rec.Kinesis.Data), Sequence: rec.Kinesis.SequenceNumber})
	}
	return nil
}
