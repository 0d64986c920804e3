package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
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
	return m
}

// Run runs the mapping until ctx ends: it checks the settings alone, finds the stream (and the
// consumer), opens the function and its store, and runs its poller, which checks the whole
// mapping (poller.New); with a lease table, the lease coordinator runs too, its leases renewed
// until the poller stopped. Configuration errors wrap poller.ErrInvalidConfig and are found
// before any call to AWS; nothing is written before the stream has been found. A mapping whose
// store is rewound (esm rewind) is started again on the rewound progress.
func (r *Runner) Run(ctx context.Context, m Mapping) error {
	m = r.withDefaults(m)
	if err := r.check(m); err != nil {
		return err
	}
	found, err := r.resolve(ctx, r.kinStart, m, m.Source.RegisterConsumer)
	if err != nil {
		return err
	}
	e := engine{functionARN: found.FunctionARN} // the one place the function's identity reaches the poller
	if e.src, err = r.Source(m, found); err != nil {
		return err
	}
	// The store is opened only once the stream is known to exist: a wrong name writes nothing.
	if err := r.exists(ctx, found); err != nil {
		return err
	}
	if e.inv, err = openFunction(m, e.src); err != nil {
		return err
	}
	if m.Store.Open == nil && m.Store.LeaseTable != "" {
		return r.runLeaseTable(ctx, m, e) // rewind.go: started again after each rewind
	}
	return r.runRewinding(ctx, m, e, func(ctx context.Context, _ bool) (*opened, error) { return r.openStore(ctx, m, found) })
}

// engine is what Run makes of a mapping once, for all its starts (a rewind starts the poller
// again): its source as found, the function's ARN (Resolved.FunctionARN) and its invoker.
type engine struct {
	src         poller.Source
	functionARN string
	inv         poller.Invoker
}

// check is what Run checks of m (its defaults applied) before any call to AWS: a source and a
// function, and Lambda's settings alone (with the stream's ARN when it is given as one).
func (r *Runner) check(m Mapping) error {
	if m.Source.Stream == "" {
		return &poller.ValidationError{Field: "Stream", Message: "Stream is required: a Kinesis stream name or ARN (Mapping.Source.Stream)"}
	}
	if m.Function.Invoker == nil && m.Function.Handler == nil {
		return fmt.Errorf("function %s: %w", m.Function.Name, ErrNoFunction)
	}
	// poller.New checks the whole mapping once the source is found.
	if err := m.Config.Validate(m.Source.Stream); err != nil {
		return err
	}
	if strings.HasPrefix(m.Source.Stream, "arn:") && !isDynamoDB(m) {
		if _, _, err := kinesissrc.ParseSource(m.Source.Stream, ""); err != nil { // checked as the source is made, once found
			return err
		}
	}
	return nil
}

// stream is the Kinesis source of the mapping found: its stream, read through its consumer when
// it has one, its events' invokeIdentityArn the function's role.
func (r *Runner) stream(m Mapping, found Resolved) (*kinesissrc.Stream, error) {
	opts := []kinesissrc.Option{kinesissrc.WithConsumer(found.ConsumerARN), kinesissrc.WithInvokeIdentity(m.Function.Role)}
	var kin kinesissrc.API = r.kin
	switch {
	case r.sdkReads:
		opts = append(opts, kinesissrc.WithSDKGetRecords())
	case r.lean != nil:
		kin = r.lean
	}
	return kinesissrc.New(kin, found.StreamARN, opts...)
}

// Resolved is a mapping as its stream knows it: the ARNs that name it, key its progress and go
// with every invocation.
type Resolved struct {
	// StreamARN is the stream's ARN (a consumer's stream when the mapping reads through one).
	StreamARN string
	// ConsumerARN is the enhanced fan-out consumer the mapping reads through, or "".
	ConsumerARN string
	// FunctionARN is the function's ARN (Function.FunctionARN): what the poller invokes the
	// function as (its InvokedFunctionArn), what keys the mapping's checkpoints, and what its
	// on-failure records name.
	FunctionARN string
}

// Key is the mapping's key in a state directory (checkpoint.MappingKey).
func (f Resolved) Key() string { return checkpoint.MappingKey(f.StreamARN, f.FunctionARN) }

// Source is the mapping's source as found: Run, given a Mapping with it, does not look the stream
// and the consumer up again.
func (f Resolved) Source() Source {
	return Source{Stream: f.StreamARN, Consumer: f.ConsumerARN, found: true}
}

// Resolve finds the mapping's stream (it must exist) and, when it reads through one, its consumer
// (which must be ACTIVE, or becoming so: it is not registered here), and names its function, as
// Run does. It writes nothing. Its error wraps poller.ErrStreamNotFound when the stream does not
// exist, ErrConsumerNotFound when the consumer does not.
func (r *Runner) Resolve(ctx context.Context, m Mapping) (Resolved, error) {
	return r.resolve(ctx, r.kin, r.withDefaults(m), false) // a request may wait for it: attempted as any call
}

// resolve is Resolve of m (its defaults applied), with kin's calls; with
// register, a consumer name not registered yet is registered.
func (r *Runner) resolve(ctx context.Context, kin KinesisAPI, m Mapping, register bool) (Resolved, error) {
	var f Resolved
	if m.Source.found {
		f.StreamARN, f.ConsumerARN = m.Source.Stream, m.Source.Consumer
	} else {
		var err error
		if isDynamoDB(m) {
			f.StreamARN, err = r.resolveDynamoDB(ctx, m)
		} else {
			f, err = resolveKinesis(ctx, kin, m, register)
		}
		if err != nil {
			return f, err
		}
	}
	var err error
	f.FunctionARN, err = m.Function.FunctionARN(f.StreamARN)
	return f, err
}

// FunctionARN is the function's ARN, its identity: ARN when set, else Name when it is an ARN,
// else the ARN of Name in the partition, region and account of the stream streamARN. The
// function is invoked as it (its InvokedFunctionArn), and esm serve's API reports it.
func (f Function) FunctionARN(streamARN string) (string, error) {
	switch {
	case f.ARN != "":
		return f.ARN, nil
	case strings.HasPrefix(f.Name, "arn:"):
		return f.Name, nil
	}
	return functionARN(streamARN, cmp.Or(f.Name, DefaultFunctionName))
}

// resolveKinesis finds the mapping's Kinesis stream and, when it reads through one, its
// consumer (with register, a consumer name not registered yet is registered).
func resolveKinesis(ctx context.Context, kin KinesisAPI, m Mapping, register bool) (Resolved, error) {
	var f Resolved
	s, c, err := splitSource(m.Source.Stream, m.Source.Consumer)
	if err != nil {
		return f, err
	}
	if f.StreamARN, err = kinesissrc.ResolveStreamARN(ctx, kin, s); err != nil {
		return f, err
	}
	if c != "" {
		f.ConsumerARN, err = resolveConsumer(ctx, kin, f.StreamARN, c, register, m.Hooks.Logger)
	}
	return f, err
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

// openStore opens where the progress of the mapping found lives when it is not a lease table
// (runLeaseTable's): the store Store.Open opens, or the state directory.
func (r *Runner) openStore(ctx context.Context, m Mapping, found Resolved) (*opened, error) {
	s := m.Store
	if s.Open != nil {
		store, err := s.Open(ctx)
		if err != nil {
			return nil, err
		}
		sh, _ := store.(SharedStore)
		return &opened{store: store, shared: sh, close: func() {}}, nil
	}
	fs, err := checkpoint.OpenFile(s.StateDir)
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(s.StateDir)
	ms := fs.Mapping(found.Key())
	return &opened{store: ms, uuid: ms.MappingUUID, close: func() { _ = fs.Close() }, where: []any{"state_dir", abs}}, nil
}

// openLeases opens the mapping's lease table, which exists (runLeaseTable made sure of it):
// progress lives there, and the Dynamo coordinator shares the shards with the table's other
// workers. A table that holds another stream's leases is refused (lease.ClaimTable).
func (r *Runner) openLeases(ctx context.Context, m Mapping, streamARN string, extra ...lease.Option) (*opened, error) {
	s := m.Store
	if err := lease.ClaimTable(ctx, r.ddbStart, s.LeaseTable, streamARN); err != nil {
		return nil, err
	}
	id := cmp.Or(s.WorkerID, DefaultWorkerID())
	opts := append([]lease.Option{lease.WithLogger(m.Hooks.Logger), lease.WithFunctionTimeout(invocationBound(m.Function))}, extra...)
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

// runOn runs the mapping's engine e on its open store (poller.New checks the whole mapping).
func (r *Runner) runOn(ctx context.Context, m Mapping, e engine, st *opened) error {
	src, mc := e.src, m.Config
	id, err := r.mappingUUID(ctx, m, st)
	if err != nil {
		return err
	}
	// The bound the lease table's takers wait for is the one the poller waits for after an
	// invocation whose outcome is unknown.
	popts := append(m.Hooks.pollerOptions(), poller.WithInvocationBound(invocationBound(m.Function)), poller.WithFunctionARN(e.functionARN))
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
	p, err := poller.New(src, mc, st.store, e.inv, popts...)
	if err != nil {
		return err
	}
	if st.where != nil {
		attrs := append([]any{"stream", src.Identity().ARN, "function", e.functionARN}, st.where...)
		if st.shared != nil {
			attrs = append(attrs, "claim_interval", p.ClaimInterval(), "pid", os.Getpid())
		} else {
			attrs = append(attrs, "pid", os.Getpid(), "consumer", consumerOf(src))
		}
		if r.sdkReads {
			attrs = append(attrs, "getrecords", "sdk") // --sdk-getrecords: not the lean path
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

// Open returns the function's invoker: its Invoker, or its Handler run in this process
// (target.Open) with its Timeout and at most its ReservedConcurrency invocations at once. Run
// opens it so; a tool that invokes the function outside a run (esm redrive) too. The ARN the
// function is invoked as is its mapping's (invoke.WithFunctionARN: the poller gives it).
func (f Function) Open(logger *slog.Logger) (poller.Invoker, error) {
	if f.Invoker != nil {
		return f.Invoker, nil
	}
	if f.Handler == nil {
		return nil, fmt.Errorf("function %s: %w", f.Name, ErrNoFunction)
	}
	opts := []target.Option{target.WithHandler(f.Handler), target.WithFunction(f.Name, ""), target.WithTimeout(f.Timeout), target.WithLogger(logger)}
	if f.ReservedConcurrency != nil {
		opts = append(opts, target.WithReservedConcurrency(*f.ReservedConcurrency))
	}
	inv, _, err := target.Open("", opts...) // in process: nothing to close
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
