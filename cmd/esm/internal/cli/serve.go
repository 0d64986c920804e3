package cli

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"golang.org/x/net/netutil"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/internal/ddbcall"
	"github.com/kinesis-esm/esm/internal/procenv"
	"github.com/kinesis-esm/esm/invoke/execenv"
	"github.com/kinesis-esm/esm/invoke/target"
	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
	"github.com/kinesis-esm/esm/sam"
)

// DefaultAPIAddr is where "esm serve" listens by default.
const DefaultAPIAddr = "127.0.0.1:9070"

// ServeFlags are the flags of "esm serve".
type ServeFlags struct {
	APIAddr              string   `name:"api-addr" help:"Address of Lambda's event source mapping API (default 127.0.0.1:9070). A bare :PORT binds 127.0.0.1; any non-loopback address needs --api-credentials and --api-tls-cert/--api-tls-key (or --api-insecure-plaintext)." default:"127.0.0.1:9070" env:"ESM_API_ADDR" placeholder:"HOST:PORT"`
	APICredentials       string   `name:"api-credentials" help:"KEY:SECRET that API requests must be signed with (SigV4, for service lambda in esm's region). Required to listen beyond loopback." env:"ESM_API_CREDENTIALS" placeholder:"KEY:SECRET"`
	APITLSCert           string   `name:"api-tls-cert" help:"PEM certificate (chain) the API serves HTTPS with; with --api-tls-key." env:"ESM_API_TLS_CERT" placeholder:"FILE"`
	APITLSKey            string   `name:"api-tls-key" help:"PEM private key of --api-tls-cert." env:"ESM_API_TLS_KEY" placeholder:"FILE"`
	APIInsecurePlaintext bool     `name:"api-insecure-plaintext" help:"Serve plain HTTP on a non-loopback --api-addr: anyone who can watch the network reads the mappings and can replay a signed request for 5 minutes." env:"ESM_API_INSECURE_PLAINTEXT"`
	Function             []string `name:"function" help:"A function mappings may invoke: NAME=TARGET, TARGET being anything --invoke takes (exec:PATH, an http(s) URL, lambda:NAME_OR_ARN, example). Repeatable; the same NAME twice makes a pool." env:"ESM_FUNCTION" sep:"none" placeholder:"NAME=TARGET"`

	Template           string   `help:"SAM or CloudFormation template: its functions (each needs a --function target) get its Timeout, Role and settings, and its mappings are created when they do not exist yet." env:"ESM_TEMPLATE" placeholder:"FILE"`
	ParameterOverrides []string `help:"Template parameters in SAM's syntax: \"Key=Value Key2=Value2\" (repeatable)." env:"ESM_PARAMETER_OVERRIDES" sep:"none" placeholder:"\"K=V ...\""`
	AWSFlags           `embed:""`

	StateDir         string        `help:"Directory of the mappings and their checkpoints (locked while esm runs)." default:".esm" env:"ESM_STATE_DIR"`
	LeaseTable       string        `help:"DynamoDB table of the mappings, shared by every worker that serves them; each mapping's leases and checkpoints live in the table <NAME>-<UUID>. Instead of --state-dir." env:"ESM_LEASE_TABLE" placeholder:"NAME"`
	CreateLeaseTable bool          `help:"Create the tables when they do not exist (--no-create-lease-table: fail instead)." default:"true" negatable:"" env:"ESM_CREATE_LEASE_TABLE"`
	WorkerID         string        `help:"This worker's id in the lease tables, unique among the workers (default: hostname-pid)." env:"ESM_WORKER_ID" placeholder:"ID"`
	LeaseDuration    time.Duration `help:"How long a worker's lease lasts without renewal. The same for every worker." default:"10s" env:"ESM_LEASE_DURATION"`
	SyncInterval     time.Duration `help:"With --lease-table: how often to read the shared mappings again to apply what other workers changed." default:"2s" env:"ESM_SYNC_INTERVAL"`
	SQSProtocol      string        `name:"sqs-protocol" help:"Protocol of SQS on-failure destinations: json, or query for emulators that speak only that (goaws)." default:"json" enum:"json,query" env:"ESM_SQS_PROTOCOL"`
	Timeout          time.Duration `help:"Timeout of the functions the template does not time (default 3s). Invocations are bounded by it plus 10s (what a dead worker's successor waits for): keep an HTTP endpoint's own timeout (AWS_LAMBDA_FUNCTION_TIMEOUT for aws-lambda-rie, 300s by default) no longer; a lambda: function's own timeout on Lambda is used when longer." env:"ESM_TIMEOUT"`

	PollFlags        `embed:""`
	DestinationFlags `embed:""`
	ObserveFlags     `embed:""`

	FunctionEnvFlags `embed:""`

	LogFlags `embed:""`
}

// base is the poller configuration every mapping gets from the flags.
func (f *ServeFlags) base() poller.Config {
	c := f.PollFlags.base()
	c.OnDestinationFailure = f.OnDestinationFailure
	return c
}

// defaultFunctionTimeout is a function's timeout when nothing sets one, as in SAM.
const defaultFunctionTimeout = 3 * time.Second

// Serve runs "esm serve" until ctx ends: the API on --api-addr and every mapping created through
// it (or by the template). example is the function of the example target, run in-process.
func (f *ServeFlags) Serve(ctx context.Context, stdout, stderr io.Writer, example any) (err error) {
	logger, err := f.Logger(stderr)
	if err != nil {
		return err
	}
	addr, creds, tlsConfig, err := f.checkAPI()
	if err != nil {
		return err
	}
	blockedAfter, err := f.blockedAfter()
	if err != nil {
		return err
	}
	timeout := cmp.Or(f.Timeout, defaultFunctionTimeout)
	tf := TemplateFlags{Template: f.Template, ParameterOverrides: f.ParameterOverrides, AWSFlags: f.AWSFlags}
	var res *Resolved
	if f.Template != "" {
		if res, err = tf.Resolve(ctx, true); err != nil {
			return err
		}
	}
	shared, err := f.runner(ctx, logger)
	if err != nil {
		return err
	}
	fns, closeFns, err := f.functions(ctx, res, shared, timeout, logger, example)
	defer closeFns()
	if err != nil {
		return err
	}

	// Listen before anything is written: a port in use fails first.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--api-addr %s: %w", addr, err)
	}
	defer ln.Close()
	obs, serveMetrics, err := f.observers(ctx, stdout, shared.DynamoDB(), logger)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := obs.close(); err == nil {
			err = cerr
		}
	}()
	defer func() {
		if merr := serveMetrics(); err == nil && merr != nil {
			err = fmt.Errorf("--metrics-addr: %w", merr)
		}
	}()
	catalog, progress, storeOpts, closeStores, err := f.stores(ctx, shared, longestTimeout(res, timeout, fns)+execenv.InitTimeout, obs.statusAddr, logger)
	if err != nil {
		return err
	}
	defer closeStores()
	opts := append([]esmapi.Option{esmapi.WithFunctions(fns...), esmapi.WithBase(f.base()), esmapi.WithLogger(logger), esmapi.WithBlockedAfter(blockedAfter)},
		append(obs.options(), storeOpts...)...)
	m, err := esmapi.Open(ctx, shared, catalog, progress, opts...)
	if err != nil {
		return err
	}
	defer m.Close()
	if res != nil && res.Template != nil {
		if err := ensureTemplateMappings(ctx, m, res.Template, shared, logger); err != nil {
			return err
		}
	}

	return serveUntilDone(ctx, apiListener(ln, tlsConfig), f.handler(m, creds, tlsConfig, ln.Addr(), shared.AWS().Region, logger))
}

// runner is the runner of every mapping, on the clients of the flags' endpoint and region.
func (f *ServeFlags) runner(ctx context.Context, logger *slog.Logger) (*runner.Runner, error) {
	cfg, err := runner.AWSConfig(ctx, f.Region, f.EndpointURL)
	if err != nil {
		return nil, err
	}
	return runner.New(cfg, runner.WithLogger(logger), runner.WithSQSProtocol(f.SQSProtocol), runner.WithSDKGetRecords(f.SDKGetRecords))
}

// handler is the API's handler, requiring SigV4 signatures with creds (when set), and logs where
// it is served.
func (f *ServeFlags) handler(m *esmapi.Manager, creds *esmapi.Credentials, tlsConfig *tls.Config, addr net.Addr, region string, logger *slog.Logger) http.Handler {
	var h http.Handler = m.Handler()
	auth := "none (loopback only)"
	if creds != nil {
		h, auth = esmapi.RequireSigV4(h, *creds, region, time.Now), "SigV4 with the --api-credentials key "+creds.AccessKeyID+" for lambda in "+region
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	where := "state_dir"
	if f.LeaseTable != "" {
		where = "lease_table"
	}
	logger.Info("esm serve: Lambda's event source mapping API", "addr", addr.String(), "scheme", scheme, "auth", auth,
		"functions", strings.Join(m.Functions(), ","), where, cmp.Or(f.LeaseTable, f.StateDir))
	return h
}

// checkAPI checks the API's flags, before anything listens: the address to listen on, the
// credentials requests must be signed with (nil: none, which only a loopback address may have),
// and the TLS configuration (nil: plain HTTP, which beyond loopback needs
// --api-insecure-plaintext).
func (f *ServeFlags) checkAPI() (string, *esmapi.Credentials, *tls.Config, error) {
	addr := esmapi.NormalizeAddr(f.APIAddr)
	var creds *esmapi.Credentials
	if f.APICredentials != "" {
		c, err := esmapi.ParseCredentials(f.APICredentials)
		if err != nil {
			return "", nil, nil, Usage(fmt.Errorf("--api-credentials: %w", err))
		}
		creds = &c
	}
	if creds == nil && !esmapi.Loopback(addr) {
		return "", nil, nil, Usage(fmt.Errorf("--api-addr %s is not a loopback address: pass --api-credentials KEY:SECRET, and every request must then be signed with them", addr))
	}
	var tlsConfig *tls.Config
	switch {
	case (f.APITLSCert == "") != (f.APITLSKey == ""):
		return "", nil, nil, Usage(errors.New("--api-tls-cert and --api-tls-key go together: the certificate and its private key"))
	case f.APITLSCert != "":
		cert, err := tls.LoadX509KeyPair(f.APITLSCert, f.APITLSKey)
		if err != nil {
			return "", nil, nil, Usage(fmt.Errorf("--api-tls-cert %s, --api-tls-key %s: %w", f.APITLSCert, f.APITLSKey, err))
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	case !esmapi.Loopback(addr) && !f.APIInsecurePlaintext:
		return "", nil, nil, Usage(fmt.Errorf("--api-addr %s is not a loopback address: serve HTTPS with --api-tls-cert FILE --api-tls-key FILE (signed requests over plain HTTP can be read and replayed by anyone on the network), or accept that with --api-insecure-plaintext", addr))
	}
	if f.LeaseDuration <= 0 || f.SyncInterval <= 0 {
		return "", nil, nil, Usage(fmt.Errorf("--lease-duration %s and --sync-interval %s must be positive", f.LeaseDuration, f.SyncInterval))
	}
	return addr, creds, tlsConfig, nil
}

// The API server's limits: what one client can hold of it.
const (
	// apiMaxConnections bounds the connections served at once; more wait to be accepted.
	apiMaxConnections = 256
	// apiMaxHeaderBytes caps a request's headers (Go's server answers 431 beyond it).
	apiMaxHeaderBytes = 64 << 10
	// apiReadTimeout bounds reading a request, body included (the body is capped at 1 MiB).
	apiReadTimeout = 30 * time.Second
	// apiWriteTimeout bounds handling a request and writing its answer.
	apiWriteTimeout = 60 * time.Second
	// apiIdleTimeout closes a kept-alive connection that sends nothing.
	apiIdleTimeout = 2 * time.Minute
)

// apiListener bounds the connections of ln and, with tlsConfig, serves TLS on them.
func apiListener(ln net.Listener, tlsConfig *tls.Config) net.Listener {
	ln = netutil.LimitListener(ln, apiMaxConnections)
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	return ln
}

// stores opens where the mappings and their progress live (bound: the invocation bound of the
// lease tables): the --lease-table tables (see
// sharedStores), or the bbolt file of --state-dir with the mappings beside it. closeStores
// releases what was opened.
func (f *ServeFlags) stores(ctx context.Context, shared *runner.Runner, bound time.Duration, statusAddr string, logger *slog.Logger) (esmapi.Catalog, esmapi.Progress, []esmapi.Option, func(), error) {
	if f.LeaseTable != "" {
		catalog, progress, opts, err := f.sharedStores(ctx, shared, bound, statusAddr, logger)
		return catalog, progress, opts, func() {}, err
	}
	store, err := checkpoint.OpenFile(f.StateDir)
	if err != nil {
		return nil, nil, nil, nil, StateDirInUse(err)
	}
	progress := esmapi.ProgressFuncs{
		StoreFunc:  func(_ context.Context, id string) (poller.Store, error) { return store.Mapping(id), nil },
		DeleteFunc: func(_ context.Context, id string) error { return store.DeleteMapping(id) },
	}
	return esmapi.FileCatalog{Dir: filepath.Join(f.StateDir, "mappings")}, progress,
		[]esmapi.Option{esmapi.WithResults(esmapi.FileResults{Dir: filepath.Join(f.StateDir, "results")})}, func() { _ = store.Close() }, nil
}

// ensureTemplateMappings creates the template's mappings that do not exist yet.
func ensureTemplateMappings(ctx context.Context, m *esmapi.Manager, tpl *sam.Template, shared *runner.Runner, logger *slog.Logger) error {
	for _, w := range tpl.Warnings {
		logger.Warn("template", "warning", w)
	}
	for i := range tpl.Mappings {
		tm := &tpl.Mappings[i]
		// The template's stream (as esm run finds it); its consumer is not read through.
		v, created, err := m.EnsureMapping(ctx, runner.Mapping{
			Source:   runner.Source{Stream: runner.TemplateSource(tm).Stream},
			Function: runner.Function{Name: tm.Function.FunctionName, ARN: tm.Function.FunctionArn},
			Config:   tm.PollerConfig(),
		})
		if err != nil {
			return fmt.Errorf("template mapping %s: %w", tm.ID, err)
		}
		logger.Info("template mapping", "mapping", tm.ID, "uuid", v.UUID, "created", created)
	}
	return nil
}

// serveUntilDone serves h on ln until ctx ends, then shuts the server down (in-flight requests
// get 5 s).
func serveUntilDone(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: apiReadTimeout,
		WriteTimeout: apiWriteTimeout, IdleTimeout: apiIdleTimeout, MaxHeaderBytes: apiMaxHeaderBytes}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("serve the API: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-served
	return nil
}

// longestTimeout is the longest function timeout of the template's functions, the functions'
// (a lambda: target's is its own on Lambda, when longer) and timeout (the others'). A mapping's
// lease table does not know which function it invokes when it is opened, so each bounds its
// invocations by the longest, plus the 10 s init phase Lambda allows.
func longestTimeout(res *Resolved, timeout time.Duration, fns []esmapi.Function) time.Duration {
	for _, fn := range fns {
		timeout = max(timeout, fn.Timeout)
	}
	if res == nil || res.Template == nil {
		return timeout
	}
	for i := range res.Template.Mappings {
		timeout = max(timeout, time.Duration(res.Template.Mappings[i].Function.Timeout)*time.Second)
	}
	return timeout
}

// sharedStores keeps the mappings in the --lease-table table and each mapping's progress in a
// lease table of its own, <table>-<UUID>, through which the workers share its shards.
func (f *ServeFlags) sharedStores(ctx context.Context, shared *runner.Runner, bound time.Duration, statusAddr string, logger *slog.Logger) (esmapi.Catalog, esmapi.Progress, []esmapi.Option, error) {
	ddb := shared.DynamoDB() // the catalog's and the lease tables'

	catalog := esmapi.DynamoCatalog{API: ddb, Table: f.LeaseTable}
	if err := catalog.Ensure(ctx, f.CreateLeaseTable); err != nil {
		return nil, nil, nil, err
	}
	worker := cmp.Or(f.WorkerID, runner.DefaultWorkerID())
	table := func(id string) string { return f.LeaseTable + "-" + id }
	progress := esmapi.ProgressFuncs{
		StoreFunc: func(ctx context.Context, id string) (poller.Store, error) {
			if err := ensureLeaseTable(ctx, ddb, catalog, id, table(id)); err != nil {
				return nil, err
			}
			// Asked at each start of the mapping's poller, and again after each rewind (the
			// runner stops the poller when one is requested): it waits while one is in progress.
			last, err := lease.AwaitRewinds(ctx, ddb, table(id), logger.With("mapping", id))
			if err != nil {
				return nil, err
			}
			return lease.NewDynamo(ddb, table(id), worker, lease.WithLogger(logger), lease.WithLeaseDuration(f.LeaseDuration),
				lease.WithFunctionTimeout(bound), lease.WithStatusAddr(statusAddr), lease.WithRewindRevision(last.Revision))
		},
		DeleteFunc: func(ctx context.Context, id string) error { return deleteLeaseTable(ctx, ddb, table(id)) },
	}
	logger.Info("mappings shared", "lease_table", f.LeaseTable, "worker_id", worker)
	return catalog, progress, []esmapi.Option{
		esmapi.WithSyncInterval(f.SyncInterval),
		esmapi.WithDeleteDelay(2*f.SyncInterval + f.ShutdownGrace),
		esmapi.WithResults(esmapi.DynamoResults{API: ddb, Table: f.LeaseTable}),
		esmapi.WithRewinds(func(ctx context.Context, id, streamARN string, q poller.RewindRequest, by string) (runner.RewindOutcome, error) {
			return runner.Rewind(ctx, shared.Kinesis(), ddb, streamARN, table(id), q, time.Now(),
				lease.RewindOptions{By: by, LeaseDuration: f.LeaseDuration, Log: logger.With("mapping", id)})
		}),
		esmapi.WithTableSkips(func(ctx context.Context, id string, q poller.SkipRequest, by string, deadline time.Time) (poller.Skipped, error) {
			return lease.AskSkip(ctx, ddb, table(id), q, by, deadline)
		}),
	}, nil
}

// leaseTables creates and deletes a mapping's lease table.
type leaseTables interface {
	lease.TableAPI
	DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
}

// liveness tells whether the catalog holds a mapping that is not being deleted.
type liveness interface {
	Live(ctx context.Context, uuid string) (bool, error)
}

// ensureLeaseTable makes sure that the lease table of mapping id exists, creating it only while
// the catalog holds the mapping live, and checking that again once it is created. A poller that
// restarts on a worker that has not yet seen the mapping's deletion (its sync is late, or failing)
// therefore never brings back the table another worker deleted with the mapping, and never reads
// the deleted mapping's stream again from its starting position.
func ensureLeaseTable(ctx context.Context, ddb leaseTables, catalog liveness, id, table string) error {
	err := lease.EnsureTable(ctx, ddb, table, false)
	if !errors.Is(err, lease.ErrTableNotFound) {
		return err
	}
	deleted := fmt.Errorf("mapping %s is deleted: its lease table %s is not created again", id, table)
	if live, err := catalog.Live(ctx, id); err != nil || !live {
		return cmp.Or(err, deleted)
	}
	if err := lease.EnsureTable(ctx, ddb, table, true); err != nil {
		return err
	}
	live, err := catalog.Live(ctx, id)
	if err != nil || live {
		return err
	}
	// Deleted while the table was created: the worker that deleted it may have dropped the
	// table already.
	return cmp.Or(deleteLeaseTable(ctx, ddb, table), deleted)
}

// deleteLeaseTable deletes a mapping's lease table; one already gone is fine.
func deleteLeaseTable(ctx context.Context, ddb leaseTables, table string) error {
	_, err := ddbcall.Call(ctx, ddbcall.Table, 1, func(ctx context.Context) (*dynamodb.DeleteTableOutput, error) {
		return ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	var nf *ddbtypes.ResourceNotFoundException
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("delete lease table %s: %w", table, err)
	}
	return nil
}

// functions are the --function targets, each with its invoker; a template's function must be
// given one too. The example target runs example in-process. closeAll, never nil, stops what the
// invokers started (execution environments).
func (f *ServeFlags) functions(ctx context.Context, res *Resolved, shared *runner.Runner, timeout time.Duration, logger *slog.Logger, example any) (fns []esmapi.Function, closeAll func(), err error) {
	var closers []func() error
	closeAll = func() {
		for _, c := range closers {
			_ = c()
		}
	}
	values := map[string][]string{}
	var order []string
	for _, spec := range f.Function {
		name, target, ok := strings.Cut(strings.TrimSpace(spec), "=")
		if !ok || name == "" || strings.TrimSpace(target) == "" {
			return nil, closeAll, Usage(fmt.Errorf("--function %q: want NAME=TARGET, TARGET being what --invoke takes (exec:PATH, an http(s) URL, lambda:NAME_OR_ARN or example)", spec))
		}
		if _, seen := values[name]; !seen {
			order = append(order, name)
		}
		values[name] = append(values[name], target)
	}
	templateFn := map[string]*sam.Function{}
	if res != nil && res.Template != nil {
		for i := range res.Template.Mappings {
			fn := &res.Template.Mappings[i].Function
			if _, seen := templateFn[fn.FunctionName]; seen {
				continue
			}
			templateFn[fn.FunctionName] = fn
			if _, given := values[fn.FunctionName]; !given {
				return nil, closeAll, Usage(fmt.Errorf("the template's function %s has no target: pass --function %s=TARGET (exec:PATH, an http(s) URL, lambda:NAME_OR_ARN or example)", fn.FunctionName, fn.FunctionName))
			}
		}
	}
	if len(order) == 0 {
		return nil, closeAll, Usage(errors.New("no function to invoke: pass --function NAME=TARGET (repeatable), or --template with a --function for each of its functions"))
	}
	for _, name := range order {
		targets, err := ParseTargets(values[name])
		if err != nil {
			return nil, closeAll, fmt.Errorf("--function %s: %w", name, err)
		}
		o := InvokerOptions{AWS: shared.AWS(), EndpointURL: f.EndpointURL, Timeout: timeout, Region: shared.AWS().Region,
			FunctionName: name, Function: templateFn[name], Logger: logger, FunctionEnv: f.FunctionEnvFlags}
		fn := esmapi.Function{Name: name}
		if tf := templateFn[name]; tf != nil {
			fn.Role = tf.Role
			if tf.Timeout > 0 {
				o.Timeout = time.Duration(tf.Timeout) * time.Second
			}
		}
		if lf := targets[0].Lambda; lf != "" {
			cfg := functionConfiguration(ctx, awslambda.NewFromConfig(shared.AWS()), lf, logger)
			if fn.Role == "" && cfg != nil {
				fn.Role = aws.ToString(cfg.Role) // the events' invokeIdentityArn, as Lambda sets it
			}
			o.Timeout = lambdaTimeout(cfg, o.Timeout, f.Timeout > 0 || templateFn[name] != nil && templateFn[name].Timeout > 0, lf, logger)
		}
		fn.Timeout = o.Timeout
		inv, closeInv, err := f.invoker(targets, o, example)
		if err != nil {
			return nil, closeAll, fmt.Errorf("--function %s: %w", name, err)
		}
		closers = append(closers, closeInv)
		fn.Invoker = inv
		fns = append(fns, fn)
	}
	slices.SortFunc(fns, func(a, b esmapi.Function) int { return strings.Compare(a.Name, b.Name) })
	return fns, closeAll, nil
}

// invoker is the invoker of a --function's targets, or for the example target, example run in
// this process as esm run runs it: with the template's Environment where esm's own environment
// does not set a variable (the process has one environment for all), and held to the template's
// ReservedConcurrentExecutions.
func (f *ServeFlags) invoker(targets []target.Target, o InvokerOptions, example any) (poller.Invoker, func() error, error) {
	if !targets[0].Example {
		return NewInvoker(targets, o)
	}
	fn := runner.Function{Handler: example, Name: o.FunctionName, Timeout: o.Timeout}
	if o.Function != nil {
		if err := procenv.Set(o.Function.Environment); err != nil {
			return nil, nil, err
		}
		fn.ReservedConcurrency = o.Function.ReservedConcurrentExecutions
	}
	inv, err := fn.Open(o.Logger)
	return inv, func() error { return nil }, err
}
