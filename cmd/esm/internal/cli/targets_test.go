package cli

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/invoke/target"
	"github.com/kinesis-esm/esm/sam"
)

// TestParseTargets: the values of --invoke parse as target.ParseTargets parses them (its tests
// hold the targets and the exact messages), and what it refuses is a usage error of --invoke,
// with invoke's message after "--invoke ".
func TestParseTargets(t *testing.T) {
	refused := 0
	for _, values := range [][]string{
		{"exec:./run.sh 'two words'"}, {"http://127.0.0.1:1 http://127.0.0.1:2"}, {"example"}, nil,
		{"exec:"}, {`exec:a "unterminated`}, {"exec:a", "http://127.0.0.1:1"}, {"example", "exec:a"},
		{"lambda:fn", "lambda:g"}, {"lambda:"}, {"bootstrap"},
	} {
		got, err := ParseTargets(values)
		want, werr := target.ParseTargets(values)
		switch {
		case werr != nil:
			refused++
			if err == nil || err.Error() != "--invoke "+werr.Error() || ExitCode(err) != 2 {
				t.Errorf("%q: %v; want a usage error: --invoke %v", values, err, werr)
			}
		case err != nil || !reflect.DeepEqual(got, want):
			t.Errorf("%q: %+v, %v; want %+v", values, got, err, want)
		}
	}
	if refused != 7 {
		t.Fatalf("invoke refused %d of the values, want the last 7", refused)
	}
}

// TestNewInvokerUsage: what target.OpenTargets refuses is a usage error of --invoke too: a
// binary that cannot be found, the same endpoint twice; a --function-env-pass that names no
// variable is one of its own flag.
func TestNewInvokerUsage(t *testing.T) {
	o := InvokerOptions{Logger: discardLogger()}
	for _, tt := range []struct {
		targets []target.Target
		env     FunctionEnvFlags
		prefix  string
	}{
		{targets: []target.Target{{Exec: []string{"./no-such-bootstrap"}}}, prefix: "--invoke exec:./no-such-bootstrap: exec: "},
		{targets: []target.Target{{URL: "http://127.0.0.1:1"}, {URL: "http://127.0.0.1:1"}},
			prefix: "--invoke http://127.0.0.1:1 http://127.0.0.1:1: invoke: endpoints"},
		{targets: []target.Target{{Exec: []string{"./no-such-bootstrap"}}}, env: FunctionEnvFlags{FunctionEnvPass: []string{"A=B"}},
			prefix: `--function-env-pass "A=B": want the name of a variable`},
		{targets: []target.Target{{Exec: []string{"./no-such-bootstrap"}}}, env: FunctionEnvFlags{FunctionCredentials: "root"},
			prefix: `--function-credentials "root": want esm, none or profile:NAME`},
	} {
		o.FunctionEnv = tt.env
		_, closeFn, err := NewInvoker(tt.targets, o)
		if err == nil || !strings.HasPrefix(err.Error(), tt.prefix) || ExitCode(err) != 2 || closeFn == nil {
			t.Errorf("%+v: %v; want a usage error starting %q", tt.targets, err, tt.prefix)
		}
	}
}

// TestServeInvokerExample: esm serve's example target runs the example in this process, limited
// to the template's ReservedConcurrentExecutions.
func TestServeInvokerExample(t *testing.T) {
	zero := 0
	o := InvokerOptions{Function: &sam.Function{FunctionName: "fn", ReservedConcurrentExecutions: &zero}}
	inv, closeFn, err := (&ServeFlags{}).invoker([]target.Target{{Example: true}}, o, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if _, err := inv.Invoke(context.Background(), []byte(`{}`)); !errors.Is(err, invoke.ErrThrottled) {
		t.Fatalf("example with reserved concurrency 0: %v, want throttled", err)
	}
}

// TestRunWithoutAFunction: esm run without --invoke (and without a handler of its own) does not
// fall back to the example: it fails as a usage error that says how to give a function.
func TestRunWithoutAFunction(t *testing.T) {
	c := &Config{Logger: discardLogger(), Example: func() {}}
	err := Run(context.Background(), c, nil, io.Discard)
	if ExitCode(err) != 2 || !errors.Is(err, errNoFunction) || !strings.Contains(err.Error(), "--invoke exec:PATH") {
		t.Fatalf("Run without a function: %v", err)
	}
}

// TestFunctionInvokerExample: --invoke example is the example handler in this process, through
// target.Open: the in-process invoker itself (a Kinesis handler takes records without JSON), or,
// with the template's ReservedConcurrentExecutions (which Template.Mapping gives the mapping's
// function), that limit (0: throttled).
func TestFunctionInvokerExample(t *testing.T) {
	handler := func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error) {
		return events.KinesisEventResponse{}, nil
	}
	c := &Config{Invoke: []string{"example"}, Example: handler, Logger: discardLogger(), Mapping: &sam.Mapping{}}
	inv, closeFn, err := c.FunctionInvoker()
	if err != nil {
		t.Fatal(err)
	}
	_ = closeFn()
	if r, ok := inv.(interface{ TakesRecords() bool }); !ok || !r.TakesRecords() {
		t.Fatalf("invoker %T does not take records", inv)
	}
	zero := 0
	c.Run.Function.ReservedConcurrency = &zero
	if inv, _, err = c.FunctionInvoker(); err != nil {
		t.Fatal(err)
	}
	if _, err := inv.Invoke(context.Background(), []byte(`{}`)); !errors.Is(err, invoke.ErrThrottled) {
		t.Fatalf("example with reserved concurrency 0: %v, want throttled", err)
	}
}
