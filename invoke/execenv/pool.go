// Package execenv runs an unmodified Lambda function binary (a custom runtime's bootstrap, in any
// language) in execution environments that esm hosts itself, with Lambda's lifecycle:
//
//   - every environment is one process of the binary with a Lambda Runtime API of its own on a
//     127.0.0.1 port (AWS_LAMBDA_RUNTIME_API), and Lambda's reserved environment variables;
//   - an environment runs one invocation at a time and is reused warm; the pool grows, one
//     environment per concurrent invocation, up to its maximum, and then invocations wait;
//   - init (from the start of the process to its first /next) runs once per environment; an
//     init error (/init/error, or an exit before /next) fails the invocation and the environment
//     is replaced for the next one;
//   - an invocation still running at the function timeout is reported as Lambda reports a timeout
//     and its environment is killed, so the retry runs in a fresh one, never alongside it;
//   - a process that exits during an invocation is Runtime.ExitError; the environment is replaced;
//   - the function's stdout and stderr are forwarded line by line with the request ID, framed by
//     START, END and REPORT lines as Lambda writes them.
//
// The Runtime API follows the 2018-06-01 version documented in the Lambda Developer Guide
// ("Using the Lambda runtime API for custom runtimes"); the log lines follow "Working with Lambda
// function logs" and the Go runtime's logging page.
package execenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kinesis-esm/esm/invoke"
)

// DefaultMaxEnvironments caps the environments of a pool when no maximum is given.
const DefaultMaxEnvironments = 64

// DefaultMemorySize is Lambda's default function memory, in MB.
const DefaultMemorySize = 128

// InitTimeout is how long an environment's init may take: Lambda's 10 s limit on the init phase.
const InitTimeout = 10 * time.Second

// maxReplacements bounds how often one invocation finds its environment gone between
// invocations (a runtime that exits after answering) and moves to a fresh one.
const maxReplacements = 3

// Pool runs a function binary in execution environments and invokes it there. Its Invoke is safe
// for concurrent use; Close ends every environment.
type Pool struct {
	cfg   config
	slots chan struct{}     // one per live environment: the pool's maximum is its capacity
	idle  chan *environment // warm environments waiting for an invocation
	out   *lineWriter

	mu     sync.Mutex
	live   map[*environment]struct{}
	closed bool
	seq    int
}

type config struct {
	command      []string
	env          map[string]string
	pass         []string        // names of esm's variables the function gets
	credentials  CredentialsFunc // the function's own AWS credentials; nil: none
	containment  *containment
	functionName string
	functionARN  string
	version      string
	memoryMB     int
	region       string
	handler      string
	timeout      time.Duration
	initTimeout  time.Duration
	max          int
	output       io.Writer
	log          *slog.Logger
	now          func() time.Time
}

// Option configures New. A nil Option is ignored.
type Option func(*config)

// WithEnvironment adds the function's own environment variables (the template's Environment).
// Lambda's reserved variables always win; esm's own environment is not passed (see WithPassEnv).
func WithEnvironment(env map[string]string) Option {
	return func(c *config) {
		for k, v := range env {
			c.env[k] = v
		}
	}
}

// WithFunction names the function: its name (AWS_LAMBDA_FUNCTION_NAME, default "function") and
// ARN (Lambda-Runtime-Invoked-Function-Arn, default invoke.DefaultFunctionARN). Empty values
// keep the defaults.
func WithFunction(name, arn string) Option {
	return func(c *config) {
		if name != "" {
			c.functionName = name
		}
		if arn != "" {
			c.functionARN = arn
		}
	}
}

// WithMemorySize sets the function's memory in MB (AWS_LAMBDA_FUNCTION_MEMORY_SIZE and the
// REPORT line; default DefaultMemorySize). Where cgroup v2 has the memory controller it is the
// environment's memory limit; elsewhere it is not enforced (New logs so once).
func WithMemorySize(mb int) Option {
	return func(c *config) {
		if mb > 0 {
			c.memoryMB = mb
		}
	}
}

// WithRegion sets AWS_REGION and AWS_DEFAULT_REGION (default us-east-1).
func WithRegion(region string) Option {
	return func(c *config) {
		if region != "" {
			c.region = region
		}
	}
}

// WithHandler sets _HANDLER, the template's Handler (default: the binary's name).
func WithHandler(h string) Option {
	return func(c *config) {
		if h != "" {
			c.handler = h
		}
	}
}

// WithTimeout sets the function timeout (default invoke.DefaultTimeout; zero or negative keeps
// it).
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithMaxEnvironments caps how many environments run at once (default DefaultMaxEnvironments;
// zero or negative keeps it). Invocations beyond it wait for a free environment.
func WithMaxEnvironments(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.max = n
		}
	}
}

// WithOutput sets where the function's log goes: its stdout and stderr lines and the START, END
// and REPORT lines (default os.Stderr).
func WithOutput(w io.Writer) Option {
	return func(c *config) {
		if w != nil {
			c.output = w
		}
	}
}

// WithLogger sets esm's own logger, for environments started and replaced (debug level; default,
// or nil: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

// New returns a pool that runs command (the binary's path, then its arguments). No process starts
// before the first invocation. It fails when the binary cannot be found.
func New(command []string, opts ...Option) (*Pool, error) {
	if len(command) == 0 || command[0] == "" {
		return nil, errors.New("exec: no binary given")
	}
	path, err := exec.LookPath(command[0])
	if err != nil {
		if _, serr := os.Stat(command[0]); serr == nil && !strings.ContainsRune(command[0], filepath.Separator) {
			return nil, fmt.Errorf("exec: %w (for the file in this directory, write ./%s)", err, command[0])
		}
		return nil, fmt.Errorf("exec: %w", err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	cfg := config{
		command:      append([]string{path}, command[1:]...),
		env:          map[string]string{},
		functionName: invoke.DefaultFunctionName,
		functionARN:  invoke.DefaultFunctionARN,
		version:      invoke.ExecutedVersionLatest,
		memoryMB:     DefaultMemorySize,
		region:       "us-east-1",
		handler:      filepath.Base(path),
		timeout:      invoke.DefaultTimeout,
		initTimeout:  InitTimeout,
		max:          DefaultMaxEnvironments,
		output:       os.Stderr,
		log:          slog.New(slog.DiscardHandler),
		now:          time.Now,
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.containment == nil {
		cfg.containment = detected()
	}
	if cfg.containment.notice != "" {
		noticeOnce.Do(func() { cfg.log.Info("execution environments: " + cfg.containment.notice) })
	}
	return &Pool{
		cfg:   cfg,
		slots: make(chan struct{}, cfg.max),
		idle:  make(chan *environment, cfg.max),
		out:   &lineWriter{w: cfg.output},
		live:  map[*environment]struct{}{},
	}, nil
}

var _ invoke.Invoker = (*Pool)(nil)

// noticeOnce: what the machine does not offer the environments is logged once per process.
var noticeOnce sync.Once

// errGone: the environment's process ended between invocations; the invocation was not handed
// to it and moves to a fresh environment.
var errGone = errors.New("environment gone")

// errClosed: the pool was closed.
var errClosed = errors.New("exec: pool closed")

// Invoke runs the function once in a warm environment, or in a new one while the pool is below
// its maximum, waiting for a free one otherwise (as long as ctx allows). A nil error means the
// function was reached: Response.FunctionError tells a success from a function error (the error
// the runtime posted, an init error, Runtime.ExitError, Sandbox.Timedout). A non-nil error wraps
// invoke.ErrUnavailable (the binary could not be started) or ctx's error.
func (p *Pool) Invoke(ctx context.Context, payload []byte) (invoke.Response, error) {
	if len(payload) > invoke.MaxPayloadBytes {
		return invoke.Response{}, fmt.Errorf("%w: request of %d bytes exceeds the %d-byte limit of a synchronous invocation", invoke.ErrUnavailable, len(payload), invoke.MaxPayloadBytes)
	}
	for attempt := 0; ; attempt++ {
		e, err := p.acquire(ctx)
		if err != nil {
			return invoke.Response{}, err
		}
		if err := invoke.CheckStart(ctx); err != nil { // the wait for an environment may have been long
			p.release(e)
			return invoke.Response{}, err
		}
		resp, reusable, err := e.invoke(ctx, payload)
		if reusable {
			p.release(e)
		} else {
			p.discard(e)
		}
		if errors.Is(err, errGone) && attempt < maxReplacements {
			p.cfg.log.Debug("execution environment ended between invocations; using a fresh one", "environment", e.name)
			continue
		}
		if errors.Is(err, errGone) {
			return invoke.Response{}, fmt.Errorf("%w: %s: the runtime exits between invocations", invoke.ErrUnavailable, p.cfg.command[0])
		}
		return resp, err
	}
}

// acquire takes a warm environment, or starts one while the pool has room, or waits.
func (p *Pool) acquire(ctx context.Context) (*environment, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	select {
	case e := <-p.idle:
		return e, nil
	default:
	}
	select {
	case e := <-p.idle:
		return e, nil
	case p.slots <- struct{}{}:
		e, err := p.start(ctx)
		if err != nil {
			<-p.slots
			return nil, err
		}
		return e, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("invoke: waiting for one of %d execution environments: %w", p.cfg.max, ctx.Err())
	}
}

// start starts a new environment and registers it.
func (p *Pool) start(ctx context.Context) (*environment, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errClosed
	}
	p.seq++
	name := fmt.Sprintf("%d", p.seq)
	p.mu.Unlock()
	e, err := startEnvironment(ctx, &p.cfg, p.out, name)
	if err != nil {
		return nil, fmt.Errorf("%w: start %s: %w", invoke.ErrUnavailable, p.cfg.command[0], err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		e.stop()
		return nil, errClosed
	}
	p.live[e] = struct{}{}
	p.cfg.log.Debug("execution environment started", "environment", e.name, "pid", e.pid(), "runtime_api", e.addr)
	return e, nil
}

// release gives a warm environment back.
func (p *Pool) release(e *environment) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		p.discard(e)
		return
	}
	p.idle <- e // never blocks: one place per slot
}

// discard ends an environment and frees its slot.
func (p *Pool) discard(e *environment) {
	e.stop()
	p.mu.Lock()
	delete(p.live, e)
	p.mu.Unlock()
	<-p.slots
}

// Environments is how many environments are alive (idle or busy).
func (p *Pool) Environments() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live)
}

// Close kills every environment (every process it started, as Lambda ends a sandbox) and waits
// for their processes and log forwarding to end. Invocations in flight end with an error;
// later ones fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	all := make([]*environment, 0, len(p.live))
	for e := range p.live {
		all = append(all, e)
	}
	p.mu.Unlock()
	for _, e := range all {
		e.stop()
	}
	return nil
}
