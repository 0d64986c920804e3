package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/dlq"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/execenv"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/invoke/target"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/metrics"
	"github.com/kinesis-esm/esm/poller"
)

// ErrNoFunction is returned by Run for a mapping with neither an Invoker nor a Handler.
var ErrNoFunction = errors.New("no invoker and no handler")

// Defaults of a Mapping.
const (
	DefaultStateDir     = ".esm"
	DefaultFunctionName = "example"
)

// withDefaults is m with its defaults and the Runner's logger.
func (r *Runner) withDefaults(m Mapping) Mapping {
	m.Hooks.Logger = cmp.Or(m.Hooks.Logger, r.log)
	m.Store.StateDir = cmp.Or(m.Store.StateDir, DefaultStateDir)
	m.Function.Name = cmp.Or(m.Function.Name, DefaultFunctionName)
	if m.Function.Role != "" {
		m.Config.InvokeIdentityARN = m.Function.Role // no constraint: not a change a check must see
	}
	return m
}

// Run runs the mapping until ctx ends: it finds the stream (and the consumer), checks the
// mapping's configuration once, opens its store and runs its poller (with a lease table, the
// lease coordinator too, whose leases are renewed until the poller stopped). Configuration
// errors wrap poller.ErrInvalidConfig, and are found before any call to AWS; nothing is written
// before the stream has been found.
func (r *Runner) Run(ctx context.Context, m Mapping) error {
	m = r.withDefaults(m)
	if m.Source.Stream == "" {
		return &poller.ValidationError{Field: "Stream", Message: "Stream is required: a Kinesis stream name or ARN (Mapping.Source.Stream)"}
	}
	if m.Function.Invoker == nil && m.Function.Handler == nil {
		return fmt.Errorf("function %s: %w", m.Function.Name, ErrNoFunction)
	}
	// Lambda's settings are checked before any network call (and the stream's ARN, when it is
	// given as one); the stream's ARNs that the calls find are checked then.
	mc := m.Config
	mc.StreamARN = ""
	if strings.HasPrefix(m.Source.Stream, "arn:") {
		mc.StreamARN = m.Source.Stream
	}
	mc, err := mc.CheckSettings()
	if err != nil {
		return err
	}
	if mc.StreamARN, mc.ConsumerARN, err = r.resolveSource(ctx, m); err != nil {
		return err
	}
	if mc.FunctionARN == "" {
		stream, err := poller.ParseStreamARN(mc.StreamARN)
		if err != nil {
			return err
		}
		mc.FunctionARN = stream.FunctionARN(m.Function.Name)
	}
	// The store is opened only once the stream is known to exist: a wrong name writes nothing.
	if _, err := poller.ListShards(ctx, r.kinStart, mc.StreamARN); err != nil {
		return err
	}
	st, err := r.openStore(ctx, m, mc)
	if err != nil {
		return err
	}
	defer st.close()
	return r.runOn(ctx, m, mc, st)
}

// resolveSource finds the mapping's stream and, when it reads through one, its consumer.
func (r *Runner) resolveSource(ctx context.Context, m Mapping) (stream, consumer string, err error) {
	s, c, err := splitSource(m.Source.Stream, m.Source.Consumer)
	if err != nil {
		return "", "", err
	}
	if stream, err = poller.ResolveStreamARN(ctx, r.kinStart, s); err != nil {
		return "", "", err
	}
	if c == "" {
		return stream, m.Config.ConsumerARN, nil
	}
	consumer, err = resolveConsumer(ctx, r.kinStart, stream, c, m.Source.RegisterConsumer, m.Hooks.Logger)
	return stream, consumer, err
}

// opened is a mapping's store, open.
type opened struct {
	store  poller.Store
	shared SharedStore // the store, when it shares the shards through leases
	// marks, for a lease table, marks the shards blocked here on their leases (for esm status).
	marks *lease.BlockedMarks
	// uuid reads (or creates) the mapping's UUID in the store.
	uuid  func(context.Context) (string, error)
	close func()
	// where says where the progress lives, for the log ("" for a store Store.Open opened).
	where []any
}

// openStore opens where the progress of the mapping of mc lives.
func (r *Runner) openStore(ctx context.Context, m Mapping, mc poller.Config) (*opened, error) {
	s := m.Store
	switch {
	case s.Open != nil:
		store, err := s.Open(ctx)
		if err != nil {
			return nil, err
		}
		sh, _ := store.(SharedStore)
		return &opened{store: store, shared: sh, close: func() {}}, nil
	case s.LeaseTable != "":
		return r.openLeases(ctx, m, mc.StreamARN)
	}
	fs, err := checkpoint.OpenFile(s.StateDir)
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(s.StateDir)
	ms := fs.Mapping(checkpoint.MappingKey(mc.StreamARN, mc.FunctionARN))
	return &opened{store: ms, uuid: ms.MappingUUID, close: func() { _ = fs.Close() }, where: []any{"state_dir", abs}}, nil
}

// openLeases opens the mapping's lease table: progress lives there, and the Dynamo coordinator
// shares the shards with the table's other workers. A table that holds another stream's leases
// is refused (lease.ClaimTable).
func (r *Runner) openLeases(ctx context.Context, m Mapping, streamARN string) (*opened, error) {
	s := m.Store
	if err := lease.EnsureTable(ctx, r.ddbStart, s.LeaseTable, s.CreateLeaseTable); err != nil {
		return nil, err
	}
	if err := lease.ClaimTable(ctx, r.ddbStart, s.LeaseTable, streamARN); err != nil {
		return nil, err
	}
	id := cmp.Or(s.WorkerID, DefaultWorkerID())
	opts := []lease.Option{lease.WithLogger(m.Hooks.Logger), lease.WithFunctionTimeout(invocationBound(m.Function))}
	if s.LeaseDuration > 0 {
		opts = append(opts, lease.WithLeaseDuration(s.LeaseDuration))
	}
	if s.StatusAddr != "" {
		opts = append(opts, lease.WithStatusAddr(s.StatusAddr))
	}
	d, err := lease.NewDynamo(r.ddb, s.LeaseTable, id, opts...)
	if err != nil {
		return nil, err
	}
	return &opened{store: d, shared: d, close: func() {},
		uuid:  func(ctx context.Context) (string, error) { return lease.MappingUUID(ctx, r.ddbStart, s.LeaseTable) },
		where: []any{"lease_table", s.LeaseTable, "worker_id", id, "lease_duration", d.LeaseDuration()}}, nil
}

// runOn runs the mapping of mc (its settings checked) on its open store.
func (r *Runner) runOn(ctx context.Context, m Mapping, mc poller.Config, st *opened) error {
	id, err := r.mappingUUID(ctx, m, st)
	if err != nil {
		return err
	}
	// The bound the lease table's takers wait for is the one the poller waits for after an
	// invocation whose outcome is unknown.
	popts := append(m.Hooks.pollerOptions(), poller.WithInvocationBound(invocationBound(m.Function)))
	if mc.OnFailureDestination != "" {
		d, err := r.destination(mc, id)
		if err != nil {
			return err
		}
		popts = append(popts, poller.WithDestination(d))
	}
	if st.shared != nil {
		popts = append(popts, poller.WithCoordinator(st.shared)) // whose pace is the default ClaimInterval
	}
	if d, ok := st.store.(*lease.Dynamo); ok {
		st.marks = d.BlockedMarks()
		popts = append(popts, poller.WithObserver(metrics.Tee(m.Hooks.Observer, st.marks))) // replaces the Hooks' alone
	}
	inv, err := m.invoker(mc.FunctionARN)
	if err != nil {
		return err
	}
	p, err := poller.New(mc, r.kin, st.store, inv, popts...) // checks the stream's ARNs
	if err != nil {
		return err
	}
	if st.where != nil {
		attrs := append([]any{"stream", mc.StreamARN, "function", mc.FunctionARN}, st.where...)
		if st.shared != nil {
			attrs = append(attrs, "claim_interval", p.ClaimInterval(), "pid", os.Getpid())
		} else {
			attrs = append(attrs, "pid", os.Getpid(), "consumer", mc.ConsumerARN)
		}
		m.Hooks.Logger.Info("esm running", attrs...)
	}
	if st.shared == nil {
		return p.Run(ctx)
	}
	return runLeased(ctx, p, st.shared, st.marks)
}

// runLeased runs the poller while its leases are renewed: until the poller has stopped (its last
// batches and checkpoints need them), then they are released.
func runLeased(ctx context.Context, p *poller.Poller, leases SharedStore, marks *lease.BlockedMarks) error {
	leaseCtx, stopLeases := context.WithCancel(context.WithoutCancel(ctx))
	renewed, marked := make(chan error, 1), make(chan error, 1)
	go func() { renewed <- leases.Run(leaseCtx) }()
	go func() {
		if marks == nil {
			marked <- nil
			return
		}
		marked <- marks.Run(leaseCtx)
	}()
	err := p.Run(ctx)
	stopLeases()
	if merr := <-marked; err == nil {
		err = merr
	}
	if rerr := <-renewed; err == nil {
		err = rerr
	}
	return err
}

// invoker is the mapping's function: its Invoker, or its Handler in this process (opened by
// target.Open, as every in-process function is).
func (m Mapping) invoker(functionARN string) (poller.Invoker, error) {
	if m.Function.Invoker != nil {
		return m.Function.Invoker, nil
	}
	inv, _, err := target.Open("", target.WithHandler(m.Function.Handler), target.WithFunction("", functionARN),
		target.WithTimeout(m.Function.Timeout))
	return inv, err
}

// invocationBound is how long an invocation this worker starts may run, from the moment the
// poller starts it: the function timeout, plus, for an invoker outside this process (exec:,
// HTTP, lambda:), the 10 s init phase Lambda allows before it (an environment's init, an
// endpoint's cold start, which httpinvoke's deadline allows too), or, in-process, the wait for a
// handler that overran its timeout. The lease table's takers of a dead worker's leases wait for it.
func invocationBound(f Function) time.Duration {
	t := cmp.Or(f.Timeout, invoke.DefaultTimeout)
	if f.Invoker != nil {
		return outOfProcessBound(t)
	}
	return t + inprocess.DefaultOverrunWait
}

// outOfProcessBound is invocationBound of a function of timeout t invoked outside this process.
func outOfProcessBound(t time.Duration) time.Duration { return t + execenv.InitTimeout }

// mappingUUID is m.UUID when the caller gave one, else the one the store returns (it reads the
// store's, or creates and stores one); OnUUID is told either way.
func (r *Runner) mappingUUID(ctx context.Context, m Mapping, st *opened) (string, error) {
	id := m.UUID
	if id == "" {
		if st.uuid == nil {
			return "", &poller.ValidationError{Field: "MappingUUID", Message: "a mapping whose store Store.Open opens needs its UUID"}
		}
		var err error
		if id, err = st.uuid(ctx); err != nil {
			return "", err
		}
	} else if _, err := uuid.Parse(id); err != nil {
		return "", &poller.ValidationError{Field: "MappingUUID", Message: fmt.Sprintf("mapping UUID %q is not a UUID: %v", id, err), Err: err}
	}
	if st.where != nil {
		m.Hooks.Logger.Info("event source mapping", "uuid", id)
	}
	if m.Hooks.OnUUID != nil {
		m.Hooks.OnUUID(id)
	}
	return id, nil
}

// destination is the client of the mapping's on-failure destination; an S3 bucket's object keys
// carry the mapping's UUID.
func (r *Runner) destination(mc poller.Config, mappingUUID string) (poller.Destination, error) {
	opts := []dlq.Option{dlq.WithSQSProtocol(r.sqsProtocol), dlq.WithMappingUUID(mappingUUID)}
	if r.aws.BaseEndpoint != nil {
		opts = append(opts, dlq.WithEndpointURL(*r.aws.BaseEndpoint)) // an emulator's: S3 path-style
	}
	d, err := dlq.New(r.aws, mc.OnFailureDestination, opts...)
	if err != nil {
		return nil, &poller.ValidationError{Field: "DestinationConfig", Message: err.Error(), Err: err}
	}
	return d, nil
}
