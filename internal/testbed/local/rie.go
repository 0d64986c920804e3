package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// defaultRIETimeout is the function timeout StartRIE gives aws-lambda-rie when none is set:
// SAM's default of 3 s (the emulator's own default is 300 s).
const defaultRIETimeout = 3 * time.Second

// rieStopGrace is how long Stop waits for aws-lambda-rie to end after SIGTERM (it stops its
// runtime and exits within milliseconds) before it kills the process group.
const rieStopGrace = 3 * time.Second

// RIEOptions configures [StartRIE].
type RIEOptions struct {
	// Binary is the aws-lambda-rie executable, e.g. built by "make rie". Required.
	Binary string
	// Handler is the function's bootstrap executable (a Go binary built with lambda.Start, for
	// instance), followed by its arguments. Required.
	Handler []string
	// Env holds KEY=value settings added to the inherited environment. aws-lambda-rie hands its
	// whole environment to the handler: this is how the function gets its configuration.
	Env []string
	// Timeout is the function timeout (AWS_LAMBDA_FUNCTION_TIMEOUT), a whole number of seconds.
	// Default 3 s, SAM's (the emulator's own is 300 s).
	Timeout time.Duration
	// FunctionName is AWS_LAMBDA_FUNCTION_NAME, which names the function in the handler's
	// InvokedFunctionArn. Default: aws-lambda-rie's "test_function".
	FunctionName string
	// Port is the invoke endpoint's port on 127.0.0.1. Default: a free port.
	Port int
	// RuntimeAPIPort is the Runtime API's port on 127.0.0.1, where the handler fetches its
	// invocations. Every instance needs its own. Default: a free port.
	RuntimeAPIPort int
	// Dir is the working directory. Default: the current one.
	Dir string
	// LogWriter receives the output of the emulator and of the handler. Default: discarded (the
	// last few KiB still appear in start errors and in [RIE.Output]).
	LogWriter io.Writer
}

// RIE is an aws-lambda-rie process started by [StartRIE]: one function instance that runs one
// invocation at a time (a second concurrent invoke crashes it). Its methods are safe for
// concurrent use.
type RIE struct {
	*Process
	runtimeAPI string
}

// RuntimeAPI returns the Runtime API address, host:port.
func (r *RIE) RuntimeAPI() string { return r.runtimeAPI }

// PID returns the emulator's process ID (the handler runs as its child, in a process group of
// its own).
func (r *RIE) PID() int { return r.cmd.Process.Pid }

// Exited is closed once the emulator has exited, by Stop or by a crash.
func (r *RIE) Exited() <-chan struct{} { return r.done }

// Output returns the last few KiB the emulator and the handler wrote.
func (r *RIE) Output() string { return r.out.String() }

// Stop ends the emulator: SIGTERM, to which it answers by killing the handler and exiting, then
// SIGKILL to its process group if it is still there after 3 s. The handler is in a process group
// of its own, which only the graceful path reaches; a handler left behind ends when its next
// Runtime API call fails. Stop waits for the emulator to exit and is idempotent.
func (r *RIE) Stop() error {
	select {
	case <-r.done:
		return r.Process.Stop()
	default:
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return r.Process.Stop()
	}
	t := time.NewTimer(rieStopGrace)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
	}
	return r.Process.Stop()
}

// StartRIE starts aws-lambda-rie with the given handler, its invoke endpoint and its Runtime API
// both on 127.0.0.1, and blocks until the endpoint accepts connections (ctx and a 30 s limit bound
// the start only). Invoke it at [Process.Endpoint] + "/2015-03-31/functions/function/invocations",
// one invocation at a time. The handler starts at the first invoke, as on Lambda.
//
// With automatically chosen ports, a start that loses a race for a port is retried with new ones.
func StartRIE(ctx context.Context, opts RIEOptions) (*RIE, error) {
	if opts.Binary == "" {
		return nil, errors.New("start aws-lambda-rie: no binary given (see make rie)")
	}
	if len(opts.Handler) == 0 || opts.Handler[0] == "" {
		return nil, errors.New("start aws-lambda-rie: no handler given")
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = defaultRIETimeout
	}
	// aws-lambda-rie parses the variable as an integer and panics on anything else.
	if timeout < time.Second || timeout%time.Second != 0 {
		return nil, fmt.Errorf("start aws-lambda-rie: timeout %v: want a whole number of seconds, at least 1", timeout)
	}
	env := []string{"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.FormatInt(int64(timeout/time.Second), 10)}
	if opts.FunctionName != "" {
		env = append(env, "AWS_LAMBDA_FUNCTION_NAME="+opts.FunctionName)
	}
	env = append(env, opts.Env...)
	dir := opts.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("start aws-lambda-rie: %w", err)
		}
		dir = wd
	}
	auto := opts.Port == 0 || opts.RuntimeAPIPort == 0

	for attempt := 1; ; attempt++ {
		port, apiPort := opts.Port, opts.RuntimeAPIPort
		if auto {
			free, err := freePorts(2)
			if err != nil {
				return nil, err
			}
			if port == 0 {
				port = free[0]
			}
			if apiPort == 0 {
				apiPort = free[1]
			}
		}
		runtimeAPI := net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort))
		args := append([]string{
			"--runtime-interface-emulator-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			"--runtime-api-address", runtimeAPI,
		}, opts.Handler...)
		p, err := launch(ctx, launchSpec{
			name: "aws-lambda-rie",
			node: opts.Binary,
			dir:  dir,
			args: args,
			env:  env,
			port: port,
			also: []int{apiPort}, // bound lazily, at the first invoke: check it is free now
			log:  opts.LogWriter,
		})
		if err == nil {
			return &RIE{Process: p, runtimeAPI: runtimeAPI}, nil
		}
		if !retryable(err, attempt, auto) {
			return nil, err
		}
	}
}
