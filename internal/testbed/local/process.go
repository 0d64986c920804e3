package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// startLimit bounds how long a start waits for the emulator's port,
	// whatever the caller's context allows.
	startLimit = 30 * time.Second
	// probeInterval is the pause between two connection attempts.
	probeInterval = 25 * time.Millisecond
	// freePortAttempts is how often a start with automatically chosen ports
	// is tried: a port picked free can be taken by someone else before the
	// emulator binds it, and the start then fails at once.
	freePortAttempts = 3
	// outputTail is how much of the emulator's recent output is kept for
	// error messages.
	outputTail = 4 << 10
)

// Process is an emulator started by [StartKinesis] or [StartDynalite]. It runs
// in its own process group until [Process.Stop] is called; on Linux it is also
// killed if the process that started it dies. Its methods are safe for
// concurrent use.
type Process struct {
	name        string
	endpoint    string
	tlsEndpoint string // kinesis-local's HTTPS (and HTTP/2) endpoint; empty for the others
	cmd         *exec.Cmd
	out         *tailWriter

	done    chan struct{} // closed when the process has exited
	waitErr error         // the exit status; read only after done is closed

	stopOnce sync.Once
	stopErr  error
}

// String describes the process for logs and test failures.
func (p *Process) String() string {
	return fmt.Sprintf("%s at %s", p.name, p.endpoint)
}

// Endpoint returns the emulator's base URL, e.g. "http://127.0.0.1:41234",
// ready to be used as an AWS SDK BaseEndpoint.
func (p *Process) Endpoint() string { return p.endpoint }

// TLSEndpoint is kinesis-local's HTTPS base URL, where it speaks HTTP/2 as well as HTTP/1.1 (ALPN)
// with a self-signed certificate; empty for the other emulators.
func (p *Process) TLSEndpoint() string { return p.tlsEndpoint }

// Stop kills the emulator's process group with SIGKILL and waits for the
// emulator to exit. The emulators keep all state in memory, so nothing is lost
// that a graceful stop would have saved (and kinesis-local can take seconds to
// act on SIGTERM while clients hold connections). Stop is idempotent: later
// calls wait for the first one and return its result. It returns nil when the
// process had already exited.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		if err := killGroup(p.cmd.Process); err != nil {
			p.stopErr = fmt.Errorf("stop %s: %w", p.name, err)
			return
		}
		<-p.done
	})
	return p.stopErr
}

// launchSpec is one attempt at starting an emulator.
type launchSpec struct {
	name string   // for messages: "kinesis-local", "dynalite"
	node string   // path of the node binary
	dir  string   // working directory: the repository root
	args []string // node's arguments
	env  []string // added to the inherited environment; later entries win
	port int      // the port whose accepting means "ready"
	also []int    // other ports the emulator binds
	log  io.Writer
}

// exitedError reports an emulator that exited before it was ready.
type exitedError struct {
	name   string
	err    error
	output string
}

func (e *exitedError) Error() string {
	return fmt.Sprintf("%s exited during start (%v); last output:\n%s", e.name, e.err, e.output)
}

func (e *exitedError) Unwrap() error { return e.err }

// portInUseError reports that a port for the emulator already accepts
// connections before the emulator was started.
type portInUseError struct {
	name string
	port int
}

func (e *portInUseError) Error() string {
	return fmt.Sprintf("start %s: port %d on 127.0.0.1 is already in use", e.name, e.port)
}

// launch starts the emulator and waits until its port accepts connections,
// for at most startLimit and as long as ctx allows. On any failure the process
// is killed before launch returns.
func launch(ctx context.Context, s launchSpec) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.name, err)
	}
	// A port that already accepts would pass for the emulator being ready.
	for _, port := range append([]int{s.port}, s.also...) {
		if accepts(ctx, port) {
			return nil, &portInUseError{name: s.name, port: port}
		}
	}

	out := &tailWriter{w: s.log}
	cmd := exec.Command(s.node, s.args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = time.Second
	if err := setProcAttr(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.name, err)
	}

	p := &Process{
		name:     s.name,
		endpoint: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		cmd:      cmd,
		out:      out,
		done:     make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()

	if err := p.waitReady(ctx, s.port); err != nil {
		_ = p.Stop() // the start error is the one worth reporting
		return nil, err
	}
	return p, nil
}

// waitReady polls the port until it accepts a connection, the process exits,
// ctx ends or startLimit passes.
func (p *Process) waitReady(ctx context.Context, port int) error {
	limit := time.NewTimer(startLimit)
	defer limit.Stop()
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for {
		if accepts(ctx, port) {
			return nil
		}
		select {
		case <-p.done:
			return &exitedError{name: p.name, err: p.waitErr, output: p.out.String()}
		case <-ctx.Done():
			return fmt.Errorf("start %s: waiting for %s: %w", p.name, addr, ctx.Err())
		case <-limit.C:
			return fmt.Errorf("start %s: %s did not accept connections within %v; last output:\n%s", p.name, addr, startLimit, p.out.String())
		case <-tick.C:
		}
	}
}

// accepts reports whether something accepts TCP connections on
// 127.0.0.1:port.
func accepts(ctx context.Context, port int) bool {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// handedOut holds every port freePorts has returned in this process. The
// kernel may hand a port that was just released out again; skipping these
// keeps emulators started in parallel (by parallel tests, say) from racing
// for one port.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: make(map[int]bool)}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1 a moment
// ago and that it has not returned before in this process. Another process
// can still take one before the emulator binds it: callers retry then.
func freePorts(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	ports := make([]int, 0, n)
	// Every listener stays open until the end, so the kernel offers a new
	// port each time.
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, errors.New("pick a free port: no unused port found")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			ports = append(ports, port)
		}
	}
	return ports, nil
}

// nodeBinary returns the node executable to run: name if set, else "node"
// from PATH.
func nodeBinary(name string) (string, error) {
	if name == "" {
		name = "node"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("node.js is needed to run the emulators: %w", err)
	}
	return path, nil
}

// nodeOptions returns the NODE_OPTIONS value that loads the loopback preload.
func nodeOptions(preload string) (string, error) {
	if strings.ContainsAny(preload, "\"\\") {
		return "", fmt.Errorf("loopback preload path %q: quotes and backslashes are not supported in NODE_OPTIONS", preload)
	}
	return `--require "` + preload + `"`, nil
}

// tailWriter forwards to w (if not nil, ignoring its errors) and remembers the last outputTail
// bytes written, for error messages.
type tailWriter struct {
	w io.Writer

	mu   sync.Mutex
	tail []byte
}

func (t *tailWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	t.tail = append(t.tail, b...)
	if over := len(t.tail) - outputTail; over > 0 {
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	t.mu.Unlock()
	if t.w != nil {
		// A failing log writer must not stop the copying: the emulator
		// would block once the pipe is full.
		_, _ = t.w.Write(b)
	}
	return len(b), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.tail))
}
