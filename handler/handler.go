// Package handler starts a Lambda handler written with the aws-lambda-go signature, e.g.
//
//	func handle(ctx context.Context, e events.KinesisEvent) (events.KinesisEventResponse, error)
//
// wherever it runs. Inside Lambda (AWS_LAMBDA_RUNTIME_API set) Start is lambda.Start, and the
// binary holds nothing else: this package depends only on aws-lambda-go and the standard
// library, so a function costs what it costs with lambda.Start (TestSlimHandlerSize holds it to
// 1.3x that, and checks that no AWS SDK client is linked in).
//
// Anywhere else Start runs the esm command on the program itself: "esm run --invoke exec:<this
// binary> <the program's arguments>". esm reads the Kinesis mapping from template.yaml (the same
// file that deploys the function), the flags given to the program and the ESM_* environment
// variables, polls the stream and runs this very binary in execution environments that speak the
// Lambda Runtime API, with Lambda's lifecycle. So the same main package runs on a laptop against
// local emulators (go run . --endpoint-url ...), in a container, and on Lambda, unchanged.
//
// The esm command is found as ESM_BIN names it, else as "esm" on PATH, else it is built and run
// with "go run github.com/kinesis-esm/esm/cmd/esm" in the current directory. For that last one
// the function's module has the command as a tool ("go get -tool
// github.com/kinesis-esm/esm/cmd/esm"), so that its go.mod and go.sum cover the command's
// dependencies; the Lambda binary links none of them.
//
// To embed esm with a handler in-process instead (a program or a test), use handler/inproc.
package handler

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/aws/aws-lambda-go/lambda"
)

// runtimeAPIEnv is set by Lambda (and by esm's execution environments, and aws-lambda-rie) for
// the function's process.
const runtimeAPIEnv = "AWS_LAMBDA_RUNTIME_API"

// esmBinEnv names the esm command to run outside Lambda.
const esmBinEnv = "ESM_BIN"

// esmPackage is the esm command, for go run.
const esmPackage = "github.com/kinesis-esm/esm/cmd/esm"

// Start runs fn and does not return. Inside Lambda it is lambda.Start(fn). Elsewhere it runs
// "esm run --invoke exec:<this program>" with the program's arguments (--help lists esm run's
// flags) until SIGINT or SIGTERM, which it passes on, then exits with esm's exit code: 0 after a
// clean stop, 2 for invalid configuration, 1 for a runtime failure.
func Start(fn any) {
	if os.Getenv(runtimeAPIEnv) != "" {
		lambda.Start(fn)
		return
	}
	code, err := runESM(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "esm:", err)
	}
	os.Exit(code)
}

// runESM runs esm run on this program, passing signals on, and returns its exit code.
func runESM(args []string) (int, error) {
	for _, a := range args {
		if a == "--invoke" || strings.HasPrefix(a, "--invoke=") {
			return 2, errors.New("--invoke: a handler started with handler.Start is this program itself; use the esm command to invoke other targets")
		}
	}
	self, err := os.Executable()
	if err != nil {
		return 1, fmt.Errorf("find this program: %w", err)
	}
	cmd, err := esmCommand(append([]string{"run", "--invoke", "exec:" + shellQuote(self)}, args...))
	if err != nil {
		return 1, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 1, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case err := <-done:
			var exit *exec.ExitError
			switch {
			case err == nil:
				return 0, nil
			case errors.As(err, &exit) && exit.ExitCode() >= 0:
				return exit.ExitCode(), nil // esm reported the error itself
			}
			return 1, fmt.Errorf("%s: %w", cmd.Path, err)
		}
	}
}

// esmCommand is the esm command with args: ESM_BIN, else esm on PATH, else go run.
func esmCommand(args []string) (*exec.Cmd, error) {
	if bin := os.Getenv(esmBinEnv); bin != "" {
		return exec.Command(bin, args...), nil
	}
	if bin, err := exec.LookPath("esm"); err == nil {
		return exec.Command(bin, args...), nil
	}
	if gobin, err := exec.LookPath("go"); err == nil {
		return exec.Command(gobin, append([]string{"run", esmPackage}, args...)...), nil
	}
	return nil, fmt.Errorf("outside Lambda, handler.Start runs the esm command, and there is none: install it (go install %s@latest), put it on PATH or name it in %s", esmPackage, esmBinEnv)
}

// shellQuote quotes a path for exec:'s shell-like splitting.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
