package status

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source"
	"github.com/kinesis-esm/esm/source/dynamostreams"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// Reader reads mappings' status. It keeps nothing between calls but its last read of a lease
// table (for TableRefresh), and is safe for concurrent use.
type Reader struct {
	kin         kinesissrc.API
	streams     dynamostreams.API // a DynamoDB stream's shards are listed with it (WithDynamoDBStreams)
	stateDir    string
	ddb         lease.DynamoAPI
	table       string
	metricsAddr []string
	client      *http.Client
	now         func() time.Time

	tableMu   sync.Mutex
	tableRead time.Time   // when the lease table was last read
	table0    *leaseFleet // what it said
}

// TableRefresh is the least time between two reads of a lease table (one scan: about 40 read
// units at 1,000 shards, 400 at 10,000), so that esm status --watch redraws the workers' live
// views every second without scanning the table every second.
const TableRefresh = 10 * time.Second

// Option configures New. A nil Option is ignored.
type Option func(*Reader)

// WithStateDir reads the progress from the checkpoint store in dir (default: .esm), opened
// read-only: while an esm process holds it, Mapping fails at once with an error wrapping
// checkpoint.ErrLocked, unless WithMetricsAddr gives the live view instead.
func WithStateDir(dir string) Option { return func(r *Reader) { r.stateDir = dir } }

// WithLeaseTable reads the progress and the lease owners from a DynamoDB lease table (workers
// sharing the mapping) instead of the state directory.
func WithLeaseTable(client lease.DynamoAPI, table string) Option {
	return func(r *Reader) { r.ddb, r.table = client, table }
}

// WithMetricsAddr adds what the esm whose metrics listen at addr (HOST:PORT, or :PORT on
// 127.0.0.1) says live of each shard: its metrics, and its live page's state (owners, blocked
// shards with their errors). Given several times, every one is read and a shard is shown as the
// worker reading it says. All needs one (default: none); "" is ignored.
func WithMetricsAddr(addr string) Option {
	return func(r *Reader) {
		if addr != "" {
			r.metricsAddr = append(r.metricsAddr, addr)
		}
	}
}

// WithHTTPClient sets the client that reads the metrics (default: http.DefaultClient).
func WithHTTPClient(c *http.Client) Option { return func(r *Reader) { r.client = c } }

// WithClock sets the clock subscription ages are measured with (default: time.Now).
func WithClock(now func() time.Time) Option { return func(r *Reader) { r.now = now } }

// WithDynamoDBStreams lists the shards of DynamoDB streams with api (DescribeStream); without it
// a DynamoDB stream's mapping cannot be reported.
func WithDynamoDBStreams(api dynamostreams.API) Option { return func(r *Reader) { r.streams = api } }

// DefaultStateDir is the state directory a Reader reads without WithStateDir.
const DefaultStateDir = ".esm"

// New returns a Reader that lists shards with kin (it calls ListShards, and DescribeStreamSummary
// in All).
func New(kin kinesissrc.API, opts ...Option) *Reader {
	r := &Reader{kin: kin, stateDir: DefaultStateDir, client: http.DefaultClient, now: time.Now}
	for _, o := range opts {
		if o != nil {
			o(r)
		}
	}
	return r
}

// ErrNoMetricsAddr is returned by All without WithMetricsAddr.
var ErrNoMetricsAddr = errors.New("status: All needs the metrics address of a running esm")

// Mapping reports the mapping of a stream (by ARN) and a function (by ARN): the stream's shards
// joined with the stored progress, and with a running esm's live view under WithMetricsAddr (the
// only mapping of its metrics, or the one they name by this stream and function).
func (r *Reader) Mapping(ctx context.Context, streamARN, functionARN string) (Report, error) {
	rep := Report{Stream: streamARN, Function: functionARN, StateDir: r.stateDir}
	progress, fleet, err := r.progress(ctx, &rep)
	if err != nil {
		return rep, err
	}
	shards, err := r.shards(ctx, streamARN)
	if err != nil {
		return rep, err
	}
	rep.Shards = Shards(shards, progress)
	fleet.apply(&rep)
	mappings, err := r.readAll(ctx)
	if err != nil {
		return rep, err
	}
	for _, addr := range fleet.addrs() { // the workers the lease table names: each as far as it answers
		rctx, cancel := context.WithTimeout(ctx, peerTimeout)
		lm, err := readLive(rctx, r.client, addr.Addr, r.now())
		cancel()
		if err != nil {
			addr.Error = err.Error()
		} else {
			mergeLive(mappings, lm)
		}
		rep.Workers = append(rep.Workers, addr)
	}
	if lm := liveOf(mappings, streamARN, functionARN); lm != nil {
		rep.ApplyLive(lm.Shards)
	}
	silent := map[string]bool{}
	for _, w := range rep.Workers {
		silent[w.ID] = w.Error != ""
	}
	for i := range rep.Shards {
		rep.Shards[i].OwnerSilent = rep.Shards[i].Owner != "" && silent[rep.Shards[i].Owner]
	}
	rep.Summary = rep.summarize()
	return rep, nil
}

// readAll reads the live views of every metrics address, merged.
func (r *Reader) readAll(ctx context.Context) (map[string]*LiveMapping, error) {
	out := map[string]*LiveMapping{}
	for _, addr := range r.metricsAddr {
		lm, err := readLive(ctx, r.client, addr, r.now())
		if err != nil {
			return nil, err
		}
		mergeLive(out, lm)
	}
	return out, nil
}

// liveOf picks the mapping of streamARN and functionARN among what a running esm's metrics
// hold: the only one (esm run's), or the one whose labels name this stream and function (by
// name, as esm serve's do, or as given to esm run); nil when none does. esm serve runs several
// mappings, whose streams share shard ids: a shard's live state is its own mapping's only.
func liveOf(mappings map[string]*LiveMapping, streamARN, functionARN string) *LiveMapping {
	if len(mappings) == 1 {
		for _, lm := range mappings {
			return lm
		}
	}
	stream, function := streamARN, functionARN
	if a, err := arn.Parse(streamARN); err == nil {
		stream = strings.TrimPrefix(a.Resource, "stream/")
	}
	if a, err := arn.Parse(functionARN); err == nil {
		function, _, _ = strings.Cut(strings.TrimPrefix(a.Resource, "function:"), ":")
	}
	for _, id := range slices.Sorted(maps.Keys(mappings)) {
		lm := mappings[id]
		if (lm.Stream == stream || lm.Stream == streamARN) && (lm.Function == function || lm.Function == functionARN) {
			return lm
		}
	}
	return nil
}

// progress reads the mapping's progress: from a lease table, with what it says of the workers
// and the blocked shards; else from the state directory.
func (r *Reader) progress(ctx context.Context, rep *Report) (map[string]poller.ShardProgress, *leaseFleet, error) {
	progress := map[string]poller.ShardProgress{}
	if r.ddb != nil {
		rep.StateDir = "lease table " + r.table
		f, err := r.readTable(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, l := range f.Leases {
			progress[l.ShardID] = l.Progress
		}
		return progress, f, nil
	}
	if _, err := os.Stat(r.stateDir); errors.Is(err, fs.ErrNotExist) {
		rep.StateDir = "none (no state directory " + r.stateDir + ": no checkpoint shown)"
		return progress, nil, nil
	}
	progress, err := checkpoint.ReadFile(r.stateDir, checkpoint.MappingKey(rep.Stream, rep.Function))
	if errors.Is(err, checkpoint.ErrLocked) && len(r.metricsAddr) > 0 {
		rep.StateDir = "none (" + r.stateDir + " is held by a running esm: checkpoints not shown)"
		return map[string]poller.ShardProgress{}, nil, nil
	}
	return progress, nil, err
}

// All reports every mapping the running esm at the metrics address runs (an esm serve's, by
// UUID; an esm run's under ""), ordered by UUID: each stream's shards with their live states,
// iterator ages and subscriptions. The checkpoints are in the state that esm holds: none is shown.
func (r *Reader) All(ctx context.Context) (Mappings, error) {
	out := Mappings{MetricsAddr: strings.Join(r.metricsAddr, ", ")}
	if len(r.metricsAddr) == 0 {
		return out, ErrNoMetricsAddr
	}
	mappings, err := r.readAll(ctx)
	if err != nil {
		return out, err
	}
	for _, id := range slices.Sorted(maps.Keys(mappings)) {
		lm := mappings[id]
		arn := lm.Stream
		if !dynamostreams.IsStreamARN(arn) {
			if arn, err = kinesissrc.ResolveStreamARN(ctx, r.kin, lm.Stream); err != nil {
				return out, fmt.Errorf("mapping %s: %w", id, err)
			}
		}
		shards, err := r.shards(ctx, arn)
		if err != nil {
			return out, fmt.Errorf("mapping %s: %w", id, err)
		}
		rep := Report{Stream: arn, Function: lm.Function, StateDir: "held by the esm serve at " + out.MetricsAddr + " (checkpoints not shown)",
			Shards: Shards(shards, nil)}
		rep.ApplyLive(lm.Shards)
		rep.Summary = rep.summarize()
		out.List = append(out.List, MappingReport{UUID: id, Report: rep})
	}
	return out, nil
}

// readTable reads the lease table, or returns what it read less than TableRefresh ago.
func (r *Reader) readTable(ctx context.Context) (*leaseFleet, error) {
	r.tableMu.Lock()
	defer r.tableMu.Unlock()
	now := r.now()
	if r.table0 != nil && now.Sub(r.tableRead) < TableRefresh {
		return r.table0, nil
	}
	f, err := lease.ReadFleet(ctx, r.ddb, r.table)
	if err != nil {
		return nil, err
	}
	rw, err := lease.ReadRewind(ctx, r.ddb, r.table)
	if err != nil {
		return nil, err
	}
	r.table0, r.tableRead = &leaseFleet{Fleet: f, rewind: rw}, now
	return r.table0, nil
}

// shards lists every shard of the stream streamARN: a DynamoDB stream's (WithDynamoDBStreams) or
// a Kinesis stream's.
func (r *Reader) shards(ctx context.Context, streamARN string) ([]source.Shard, error) {
	if !dynamostreams.IsStreamARN(streamARN) {
		listed, err := kinesissrc.ListShards(ctx, r.kin, streamARN)
		return kinesissrc.ShardsOf(listed), err
	}
	if r.streams == nil {
		return nil, fmt.Errorf("status: %s is a DynamoDB stream: the reader has no DynamoDB Streams client (WithDynamoDBStreams)", streamARN)
	}
	return dynamostreams.ListShards(ctx, r.streams, streamARN)
}
