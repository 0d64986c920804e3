package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kinesis-esm/esm/cmd/esm/internal/cli"
	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/runner"
)

type invokeCmd struct {
	cli.TemplateFlags    `embed:""`
	Event                string         `help:"Event JSON to invoke with (- for stdin), e.g. from esm generate-event." required:"" short:"e" env:"ESM_EVENT" placeholder:"FILE"`
	Invoke               []string       `help:"The function, as esm run takes it: exec:PATH [ARGS], a Lambda-Invoke-compatible endpoint (aws-lambda-rie), lambda:NAME_OR_ARN, or example (the default): the example function in-process." default:"example" env:"ESM_INVOKE" sep:"none" placeholder:"exec:PATH|URL|lambda:NAME|example"`
	Timeout              *time.Duration `help:"Function timeout (default: the template's, else 3s)." env:"ESM_TIMEOUT"`
	cli.FunctionEnvFlags `embed:""`
	cli.LogFlags         `embed:""`
}

// run invokes the function once and prints its response on stdout. A function error is printed
// the same way (Lambda's error document) and ends with exit code 1.
func (c *invokeCmd) run(ctx context.Context, e env) error {
	logger, err := c.Logger(e.stderr)
	if err != nil {
		return err
	}
	event, err := readEvent(c.Event, e.stdin)
	if err != nil {
		return err
	}
	res, err := c.Resolve(ctx, false)
	if err != nil {
		return err
	}
	cfg := &cli.Config{
		Invoke: c.Invoke, AWS: res.AWS, Logger: logger, FunctionEnv: c.FunctionEnvFlags,
		EndpointURL: c.EndpointURL, Run: runner.Mapping{Function: runner.Function{Timeout: invoke.DefaultTimeout}},
		// The function's own output is its log: on stderr, as sam local invoke shows it, so that
		// stdout holds only the response.
		Example: example.HandleTo(e.stderr),
	}
	if res.Template != nil {
		m, err := res.Template.SelectFunction(c.Function)
		if err != nil {
			return err
		}
		cfg.Mapping = m
		cfg.Run.Function.Timeout = time.Duration(m.Function.Timeout) * time.Second
		cfg.Run.Function.ARN = m.Function.FunctionArn
	}
	if c.Timeout != nil {
		cfg.Run.Function.Timeout = *c.Timeout
	}
	inv, closeInvoker, err := cfg.FunctionInvoker()
	if err != nil {
		return err
	}
	defer closeInvoker()
	resp, err := inv.Invoke(ctx, event)
	if err != nil {
		return fmt.Errorf("invoke: %w", err)
	}
	if _, err := fmt.Fprintf(e.stdout, "%s\n", resp.Payload); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	if resp.Failed() {
		return fmt.Errorf("function error (%s): the response above is Lambda's error document", resp.FunctionError)
	}
	return nil
}

func readEvent(path string, stdin io.Reader) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, cli.Usage(fmt.Errorf("--event: %w", err))
	}
	return b, nil
}
