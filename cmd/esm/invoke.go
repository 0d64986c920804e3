package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kinesis-esm/esm/example"
	"github.com/kinesis-esm/esm/internal/cli"
	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/inprocess"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
	"github.com/kinesis-esm/esm/sam"
)

type invokeCmd struct {
	cli.TemplateFlags    `embed:""`
	Event                string         `help:"Event JSON to invoke with (- for stdin), e.g. from esm generate-event." required:"" short:"e" env:"ESM_EVENT" placeholder:"FILE"`
	Invoke               []string       `help:"The function, as esm run takes it: exec:PATH [ARGS], a Lambda-Invoke-compatible endpoint (aws-lambda-rie), lambda:NAME_OR_ARN, or example. Default: the example function in-process." env:"ESM_INVOKE" sep:"none" placeholder:"exec:PATH|URL|lambda:NAME|example"`
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
	}
	if res.Template != nil {
		m, err := functionOf(res.Template, c.Function)
		if err != nil {
			return err
		}
		cfg.Mapping = m
		cfg.Run.Function.Timeout = time.Duration(m.Function.Timeout) * time.Second
		cfg.Run.Config = poller.Config{FunctionARN: m.Function.FunctionArn}
	}
	if c.Timeout != nil {
		cfg.Run.Function.Timeout = *c.Timeout
	}
	inv, closeInvoker, err := cfg.Invoker()
	if err != nil {
		return err
	}
	defer closeInvoker()
	if inv == nil {
		if err := cfg.ApplyEnvironment(); err != nil {
			return err
		}
		// The function's own output is its log: on stderr, as sam local invoke shows it, so that
		// stdout holds only the response.
		os.Stdout = os.Stderr
		inv = inprocess.New(example.Handle,
			inprocess.WithFunctionARN(cfg.Run.Config.FunctionARN), inprocess.WithTimeout(cfg.Run.Function.Timeout))
	}
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

// functionOf picks the function to invoke: the one --function selects, or the only function the
// template's Kinesis mappings name.
func functionOf(t *sam.Template, selector string) (*sam.Mapping, error) {
	m, err := t.Select(selector)
	if err == nil {
		return m, nil
	}
	var se *sam.SelectionError
	if selector == "" && errors.As(err, &se) && len(t.Mappings) > 1 {
		first := t.Mappings[0].Function.FunctionArn
		for _, o := range t.Mappings[1:] {
			if o.Function.FunctionArn != first {
				return nil, err
			}
		}
		return &t.Mappings[0], nil
	}
	return nil, err
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
