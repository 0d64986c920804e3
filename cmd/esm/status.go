package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/internal/cli"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/metrics/prom"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

type statusCmd struct {
	cli.TemplateFlags `embed:""`
	Stream            *string       `help:"Kinesis stream name or ARN (overrides the template's)." env:"ESM_STREAM"`
	FunctionName      *string       `help:"Function name (default: the template's, else example)." env:"ESM_FUNCTION_NAME"`
	StateDir          string        `help:"Directory of the checkpoint store." default:".esm" env:"ESM_STATE_DIR"`
	LeaseTable        string        `help:"Read progress and owners from this DynamoDB lease table (workers sharing the mapping) instead of the state directory." env:"ESM_LEASE_TABLE"`
	MetricsAddr       string        `help:"A running esm's --metrics-addr: adds each shard's live state and iterator age, and lets status run while that esm holds the state directory." env:"ESM_METRICS_ADDR" placeholder:"HOST:PORT"`
	All               bool          `help:"With --metrics-addr of a running esm serve: every mapping it runs, each as a lineage tree with its uuid (live states and iterator ages; the checkpoints are in the state it holds)." env:"ESM_ALL"`
	JSON              bool          `help:"Print the shards as JSON." env:"ESM_JSON"`
	Watch             bool          `help:"Redraw the view every --interval until interrupted." env:"ESM_WATCH"`
	Interval          time.Duration `help:"Refresh interval of --watch." default:"1s" env:"ESM_INTERVAL"`
}

// Shard states, as the poller's design names them.
const (
	statePending  = "pending"  // a parent is not finished yet
	stateReading  = "reading"  // every parent finished: the shard is (or will be) read
	stateFinished = "finished" // read to its end and checkpointed
)

// shardStatus is one shard of the mapping.
type shardStatus struct {
	ShardID    string     `json:"shardId"`
	Parents    []string   `json:"parents,omitempty"`
	State      string     `json:"state"`
	Checkpoint string     `json:"checkpoint,omitempty"`
	Start      string     `json:"start,omitempty"`
	UpdatedAt  *time.Time `json:"updatedAt,omitempty"`
	// Owner is the worker holding the shard's lease (with --lease-table).
	Owner string `json:"owner,omitempty"`
	// IteratorAgeMillis is the live iterator age a running esm reports (with --metrics-addr).
	IteratorAgeMillis *float64 `json:"iteratorAgeMillis,omitempty"`
	// ReadBy is how a running esm reads the shard: polling or subscription (with --metrics-addr),
	// and Subscription its subscription's figures.
	ReadBy       string              `json:"readBy,omitempty"`
	Subscription *subscriptionStatus `json:"subscription,omitempty"`
	// Trimmed is set for a shard the store knows that the stream no longer lists (retention).
	Trimmed bool `json:"trimmed,omitempty"`
}

// subscriptionStatus is a shard's enhanced fan-out subscription, as a running esm's metrics say.
type subscriptionStatus struct {
	AgeSeconds          *float64 `json:"ageSeconds,omitempty"`
	Renewals            float64  `json:"renewals"`
	InUseRefusals       float64  `json:"inUseRefusals"`
	LastEventAgeSeconds *float64 `json:"lastEventAgeSeconds,omitempty"`
}

type statusReport struct {
	Stream   string        `json:"stream"`
	Function string        `json:"function"`
	StateDir string        `json:"stateDir"`
	Shards   []shardStatus `json:"shards"`
}

// run lists the stream's shards (ListShards) and joins them with the progress: from the state
// directory (opened read-only; while an esm process holds it, bbolt's lock keeps status out unless
// --metrics-addr gives the live view), or from a lease table; with --metrics-addr, the running
// esm's live shard states and iterator ages are added. --watch redraws until interrupted.
func (s *statusCmd) run(ctx context.Context, e env) error {
	if s.All {
		return s.runAll(ctx, e)
	}
	c, err := s.Target(ctx, s.Stream, s.FunctionName, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	o := c.Run
	kin := kinesis.NewFromConfig(c.AWS) // the endpoint is c.AWS's BaseEndpoint
	arn, err := runner.ResolveStreamARN(ctx, kin, o.Source.Stream)
	if err != nil {
		return err
	}
	sa, err := poller.ParseStreamARN(arn)
	if err != nil {
		return err
	}
	fn := o.Config.FunctionARN
	if fn == "" {
		fn = runner.FunctionARN(sa, o.Function.Name)
	}
	var ddb *dynamodb.Client
	if s.LeaseTable != "" {
		ddb = dynamodb.NewFromConfig(c.AWS)
	}
	for {
		rep, err := s.report(ctx, kin, ddb, arn, fn)
		if err != nil {
			if s.Watch && ctx.Err() != nil { // interrupted while reading
				return nil
			}
			return err
		}
		if done, err := s.show(ctx, e, rep, renderTree(rep)); done || err != nil {
			return err
		}
	}
}

// show prints one view: v as JSON, or text; with --watch it waits for the next and reports
// whether to stop (done).
func (s *statusCmd) show(ctx context.Context, e env, v any, text string) (done bool, err error) {
	switch {
	case s.JSON:
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(v)
	case s.Watch: // home the cursor and clear the screen, then draw
		_, err = io.WriteString(e.stdout, "\x1b[H\x1b[2J"+text+"\n"+time.Now().Format(time.TimeOnly)+"  (Ctrl-C to stop)\n")
	default:
		_, err = io.WriteString(e.stdout, text)
	}
	if err != nil || !s.Watch {
		return true, err
	}
	select {
	case <-ctx.Done():
		return true, nil
	case <-time.After(s.Interval):
		return false, nil
	}
}

// mappingReport is one mapping of an esm serve, as status --all shows it.
type mappingReport struct {
	UUID string `json:"uuid"`
	statusReport
}

// runAll shows every mapping of the esm serve at --metrics-addr: the mappings its metrics name
// (by uuid), each stream's shards from ListShards, and the live states and iterator ages.
func (s *statusCmd) runAll(ctx context.Context, e env) error {
	if s.MetricsAddr == "" {
		return cli.Usage(errors.New("--all needs --metrics-addr: the address of a running esm serve's metrics"))
	}
	cfg, err := runner.AWSConfig(ctx, s.Region, s.EndpointURL)
	if err != nil {
		return err
	}
	kin := kinesis.NewFromConfig(cfg)
	for {
		mappings, err := scrapeMappings(ctx, s.MetricsAddr)
		if err != nil {
			if s.Watch && ctx.Err() != nil {
				return nil
			}
			return err
		}
		var reps []mappingReport
		var text strings.Builder
		for _, id := range slices.Sorted(maps.Keys(mappings)) {
			lm := mappings[id]
			arn, err := runner.ResolveStreamARN(ctx, kin, lm.stream)
			if err != nil {
				return fmt.Errorf("mapping %s: %w", id, err)
			}
			shards, err := poller.ListShards(ctx, kin, arn)
			if err != nil {
				return fmt.Errorf("mapping %s: %w", id, err)
			}
			rep := statusReport{Stream: arn, Function: lm.function, StateDir: "held by the esm serve at " + s.MetricsAddr + " (checkpoints not shown)",
				Shards: shardStates(shards, nil)}
			applyLive(&rep, lm.shards)
			reps = append(reps, mappingReport{UUID: id, statusReport: rep})
			fmt.Fprintf(&text, "mapping   %s\n%s\n", cmp.Or(id, "(esm run's)"), renderTree(rep))
		}
		if len(reps) == 0 {
			text.WriteString("no mapping in the metrics at " + s.MetricsAddr + " (is it an esm serve, and has a mapping started?)\n")
		}
		if done, err := s.show(ctx, e, reps, text.String()); done || err != nil {
			return err
		}
	}
}

// report builds one view of the mapping.
func (s *statusCmd) report(ctx context.Context, kin *kinesis.Client, ddb *dynamodb.Client, arn, fn string) (statusReport, error) {
	rep := statusReport{Stream: arn, Function: fn, StateDir: s.StateDir}
	owners := map[string]string{}
	var progress map[string]poller.ShardProgress
	var err error
	if ddb != nil {
		rep.StateDir = "lease table " + s.LeaseTable
		leases, lerr := lease.ListLeases(ctx, ddb, s.LeaseTable)
		if lerr != nil {
			return rep, lerr
		}
		progress = map[string]poller.ShardProgress{}
		for _, l := range leases {
			progress[l.ShardID], owners[l.ShardID] = l.Progress, l.Owner
		}
	} else if progress, err = readProgress(s.StateDir, checkpoint.MappingKey(arn, fn)); err != nil {
		if !errors.Is(err, checkpoint.ErrLocked) || s.MetricsAddr == "" {
			return rep, err
		}
		rep.StateDir += " (held by a running esm: checkpoints not shown)"
		progress = map[string]poller.ShardProgress{}
	}
	shards, err := poller.ListShards(ctx, kin, arn)
	if err != nil {
		return rep, err
	}
	rep.Shards = shardStates(shards, progress)
	for i := range rep.Shards {
		rep.Shards[i].Owner = owners[rep.Shards[i].ShardID]
	}
	if s.MetricsAddr != "" {
		mappings, err := scrapeMappings(ctx, s.MetricsAddr)
		if err != nil {
			return rep, err
		}
		for _, lm := range mappings {
			applyLive(&rep, lm.shards)
		}
	}
	return rep, nil
}

// applyLive adds a running esm's live states and iterator ages to the report.
func applyLive(rep *statusReport, live map[string]liveShard) {
	for i := range rep.Shards {
		sh := &rep.Shards[i]
		if l, ok := live[sh.ShardID]; ok {
			if l.state != "" && sh.State != stateFinished {
				sh.State = l.state
			}
			sh.IteratorAgeMillis, sh.ReadBy, sh.Subscription = l.age, l.readBy, l.sub
		}
	}
}

type liveShard struct {
	state  string
	age    *float64
	readBy string
	sub    *subscriptionStatus
}

// liveSeries are the per-shard series status reads from a running esm.
var liveSeries = []string{metrics.NameIteratorAge, prom.NameShardState, prom.NameShardReadBy, prom.NameSubscriptionStarted,
	prom.NameSubscriptionLastEvent, prom.NameSubscriptionRenewals, prom.NameSubscriptionInUse}

// liveMapping is what a running esm's metrics say of one mapping.
type liveMapping struct {
	function, stream string
	shards           map[string]liveShard
}

// scrapeMappings reads a running esm's per-shard gauges from its /metrics, by mapping (the uuid
// label of esm serve's series; "" for esm run's): the current state (esm_shard_state == 1) and
// IteratorAge.
func scrapeMappings(ctx context.Context, addr string) (map[string]*liveMapping, error) {
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read live state from --metrics-addr %s: %w", addr, err)
	}
	defer resp.Body.Close()
	out := map[string]*liveMapping{}
	now := time.Now()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || !slices.Contains(liveSeries, name) {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		shard, state := label(labels, prom.LabelShard), label(labels, prom.LabelState)
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || shard == "" {
			continue
		}
		id := label(labels, prom.LabelUUID)
		lm := out[id]
		if lm == nil {
			lm = &liveMapping{function: label(labels, prom.LabelFunction), stream: label(labels, prom.LabelStream), shards: map[string]liveShard{}}
			out[id] = lm
		}
		l := lm.shards[shard]
		sub := func() *subscriptionStatus {
			if l.sub == nil {
				l.sub = &subscriptionStatus{}
			}
			return l.sub
		}
		since := func(unix float64) *float64 {
			d := max(float64(now.UnixMilli())/1e3-unix, 0)
			return &d
		}
		switch name {
		case metrics.NameIteratorAge:
			l.age = &v
		case prom.NameShardState:
			if v == 1 {
				l.state = state
			}
		case prom.NameShardReadBy:
			if v == 1 {
				l.readBy = label(labels, prom.LabelMode)
			}
		case prom.NameSubscriptionStarted:
			sub().AgeSeconds = since(v)
		case prom.NameSubscriptionLastEvent:
			sub().LastEventAgeSeconds = since(v)
		case prom.NameSubscriptionRenewals:
			sub().Renewals = v
		case prom.NameSubscriptionInUse:
			sub().InUseRefusals = v
		}
		lm.shards[shard] = l
	}
	for _, lm := range out { // a shard read by polling now has no subscription to show
		for id, l := range lm.shards {
			if l.readBy != poller.ReadBySubscription {
				l.sub = nil
				lm.shards[id] = l
			}
		}
	}
	return out, sc.Err()
}

// label returns a label's value from a Prometheus series' label text.
func label(labels, name string) string {
	_, v, ok := strings.Cut(labels, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, `"`)
	return v
}

// readProgress reads one mapping's progress from the state directory without writing anything.
func readProgress(dir, key string) (map[string]poller.ShardProgress, error) {
	p, err := checkpoint.ReadFile(dir, key)
	if errors.Is(err, checkpoint.ErrLocked) {
		return nil, fmt.Errorf("%w (esm status reads checkpoints when no esm process runs on that directory; --metrics-addr gives a running one's live view)", cli.StateDirInUse(err))
	}
	return p, err
}

// shardStates joins the listing with the progress, as the poller sees it: a shard is finished
// when the store says so; a parent the listing no longer shows was trimmed and counts as
// finished; a shard is reading when all its parents are finished, pending otherwise.
func shardStates(shards []types.Shard, progress map[string]poller.ShardProgress) []shardStatus {
	listed := map[string]bool{}
	for _, s := range shards {
		listed[aws.ToString(s.ShardId)] = true
	}
	finished := func(id string) bool { return progress[id].Finished || !listed[id] }
	var out []shardStatus
	for _, s := range shards {
		id := aws.ToString(s.ShardId)
		st := shardStatus{ShardID: id, State: stateReading}
		for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
			if p != nil && *p != "" {
				st.Parents = append(st.Parents, *p)
				if !finished(*p) {
					st.State = statePending
				}
			}
		}
		fill(&st, progress[id])
		out = append(out, st)
	}
	for id, p := range progress { // shards the stream no longer lists
		if !listed[id] {
			st := shardStatus{ShardID: id, State: stateFinished, Trimmed: true}
			fill(&st, p)
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b shardStatus) int { return strings.Compare(a.ShardID, b.ShardID) })
	return out
}

func fill(st *shardStatus, p poller.ShardProgress) {
	st.Checkpoint, st.Start = p.Checkpoint, p.Start
	if p.Finished {
		st.State = stateFinished
	}
	if !p.UpdatedAt.IsZero() {
		t := p.UpdatedAt.UTC()
		st.UpdatedAt = &t
	}
}

// renderTree draws the shards as a lineage tree: each child under its first parent (a merge's
// second parent is named on the child's line).
func renderTree(rep statusReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "stream    %s\nfunction  %s\nstate     %s\n\n", rep.Stream, rep.Function, rep.StateDir)
	byID := map[string]shardStatus{}
	children := map[string][]string{}
	for _, s := range rep.Shards {
		byID[s.ShardID] = s
	}
	var roots []string
	for _, s := range rep.Shards {
		if len(s.Parents) > 0 {
			if _, ok := byID[s.Parents[0]]; ok {
				children[s.Parents[0]] = append(children[s.Parents[0]], s.ShardID)
				continue
			}
		}
		roots = append(roots, s.ShardID)
	}
	var walk func(id, prefix string, last, root bool)
	walk = func(id, prefix string, last, root bool) {
		s := byID[id]
		branch, next := "", prefix
		if !root {
			branch, next = "├─ ", prefix+"│  "
			if last {
				branch, next = "└─ ", prefix+"   "
			}
		}
		line := fmt.Sprintf("%-44s %-9s", prefix+branch+s.ShardID, s.State)
		if s.Checkpoint != "" {
			line += " checkpoint " + s.Checkpoint
		} else if s.Start != "" && s.State != stateFinished {
			line += " starts at " + s.Start
		}
		if s.Owner != "" {
			line += " owner " + s.Owner
		}
		if s.IteratorAgeMillis != nil {
			line += fmt.Sprintf(" iterator age %s", time.Duration(*s.IteratorAgeMillis*float64(time.Millisecond)).Round(time.Millisecond))
		}
		if s.ReadBy != "" {
			line += " read by " + s.ReadBy
		}
		if sub := s.Subscription; sub != nil {
			var parts []string
			if sub.AgeSeconds != nil {
				parts = append(parts, "age "+seconds(*sub.AgeSeconds))
			}
			parts = append(parts, fmt.Sprintf("%g renewals", sub.Renewals), fmt.Sprintf("%g refused in use", sub.InUseRefusals))
			if sub.LastEventAgeSeconds != nil {
				parts = append(parts, "last event "+seconds(*sub.LastEventAgeSeconds)+" ago")
			}
			line += " (" + strings.Join(parts, ", ") + ")"
		}
		if len(s.Parents) > 1 {
			line += " (merged with " + s.Parents[1] + ")"
		}
		if s.Trimmed {
			line += " (trimmed from the stream)"
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
		kids := children[id]
		for i, k := range kids {
			walk(k, next, i == len(kids)-1, false)
		}
	}
	for _, r := range roots {
		walk(r, "", true, true)
	}
	return b.String()
}

// seconds renders a number of seconds as a duration, to the tenth of a second.
func seconds(v float64) string {
	return time.Duration(v * float64(time.Second)).Round(100 * time.Millisecond).String()
}
