package status

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
)

// Reader reads mappings' status. It keeps no state between calls and is safe for concurrent use.
type Reader struct {
	kin         poller.KinesisAPI
	stateDir    string
	ddb         lease.DynamoAPI
	table       string
	metricsAddr string
	client      *http.Client
	now         func() time.Time
}

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
// 127.0.0.1) says live of each shard. All needs it (default: none).
func WithMetricsAddr(addr string) Option { return func(r *Reader) { r.metricsAddr = addr } }

// WithHTTPClient sets the client that reads the metrics (default: http.DefaultClient).
func WithHTTPClient(c *http.Client) Option { return func(r *Reader) { r.client = c } }

// WithClock sets the clock subscription ages are measured with (default: time.Now).
func WithClock(now func() time.Time) Option { return func(r *Reader) { r.now = now } }

// DefaultStateDir is the state directory a Reader reads without WithStateDir.
const DefaultStateDir = ".esm"

// New returns a Reader that lists shards with kin (it calls ListShards, and DescribeStreamSummary
// in All).
func New(kin poller.KinesisAPI, opts ...Option) *Reader {
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
	progress, owners, err := r.progress(ctx, &rep)
	if err != nil {
		return rep, err
	}
	shards, err := poller.ListShards(ctx, r.kin, streamARN)
	if err != nil {
		return rep, err
	}
	rep.Shards = Shards(shards, progress)
	for i := range rep.Shards {
		rep.Shards[i].Owner = owners[rep.Shards[i].ShardID]
	}
	if r.metricsAddr != "" {
		mappings, err := scrape(ctx, r.client, r.metricsAddr, r.now())
		if err != nil {
			return rep, err
		}
		if lm := liveOf(mappings, streamARN, functionARN); lm != nil {
			rep.ApplyLive(lm.Shards)
		}
	}
	return rep, nil
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

// progress reads the mapping's progress, and the lease owners from a lease table.
func (r *Reader) progress(ctx context.Context, rep *Report) (map[string]poller.ShardProgress, map[string]string, error) {
	progress, owners := map[string]poller.ShardProgress{}, map[string]string{}
	if r.ddb != nil {
		rep.StateDir = "lease table " + r.table
		leases, err := lease.ListLeases(ctx, r.ddb, r.table)
		if err != nil {
			return nil, nil, err
		}
		for _, l := range leases {
			progress[l.ShardID], owners[l.ShardID] = l.Progress, l.Owner
		}
		return progress, owners, nil
	}
	progress, err := checkpoint.ReadFile(r.stateDir, checkpoint.MappingKey(rep.Stream, rep.Function))
	if errors.Is(err, checkpoint.ErrLocked) && r.metricsAddr != "" {
		rep.StateDir += " (held by a running esm: checkpoints not shown)"
		return map[string]poller.ShardProgress{}, owners, nil
	}
	return progress, owners, err
}

// All reports every mapping the running esm at the metrics address runs (an esm serve's, by
// UUID; an esm run's under ""), ordered by UUID: each stream's shards with their live states,
// iterator ages and subscriptions. The checkpoints are in the state that esm holds: none is shown.
func (r *Reader) All(ctx context.Context) (Mappings, error) {
	out := Mappings{MetricsAddr: r.metricsAddr}
	if r.metricsAddr == "" {
		return out, ErrNoMetricsAddr
	}
	mappings, err := scrape(ctx, r.client, r.metricsAddr, r.now())
	if err != nil {
		return out, err
	}
	for _, id := range slices.Sorted(maps.Keys(mappings)) {
		lm := mappings[id]
		arn, err := poller.ResolveStreamARN(ctx, r.kin, lm.Stream)
		if err != nil {
			return out, fmt.Errorf("mapping %s: %w", id, err)
		}
		shards, err := poller.ListShards(ctx, r.kin, arn)
		if err != nil {
			return out, fmt.Errorf("mapping %s: %w", id, err)
		}
		rep := Report{Stream: arn, Function: lm.Function, StateDir: "held by the esm serve at " + r.metricsAddr + " (checkpoints not shown)",
			Shards: Shards(shards, nil)}
		rep.ApplyLive(lm.Shards)
		out.List = append(out.List, MappingReport{UUID: id, Report: rep})
	}
	return out, nil
}

// Resolve returns the ARNs of a stream given by name or ARN (checking that it exists) and of a
// function given by name or ARN: a name is completed with the stream's partition, region and
// account, as Lambda resolves a mapping's function.
func (r *Reader) Resolve(ctx context.Context, stream, function string) (streamARN, functionARN string, err error) {
	if streamARN, err = poller.ResolveStreamARN(ctx, r.kin, stream); err != nil {
		return "", "", err
	}
	if strings.HasPrefix(function, "arn:") {
		return streamARN, function, nil
	}
	sa, err := poller.ParseStreamARN(streamARN)
	if err != nil {
		return "", "", err
	}
	return streamARN, sa.FunctionARN(function), nil
}
