package cli

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/sam"
)

// TestParseTargets: the values of --invoke parse as invoke.ParseTargets parses them (its tests
// hold the cases), and what it refuses is a usage error of --invoke, with invoke's message.
func TestParseTargets(t *testing.T) {
	for _, tt := range []struct {
		values []string
		want   []invoke.Target
		err    string
	}{
		{values: []string{"exec:./run.sh 'two words'"}, want: []invoke.Target{{Exec: []string{"./run.sh", "two words"}}}},
		{values: []string{"http://127.0.0.1:1 http://127.0.0.1:2"}, want: []invoke.Target{{URL: "http://127.0.0.1:1"}, {URL: "http://127.0.0.1:2"}}},
		{values: []string{"example"}, want: []invoke.Target{{Example: true}}},
		{values: nil, want: nil},
		{values: []string{"exec:"}, err: "--invoke exec: needs the function's binary, e.g. exec:bin/bootstrap"},
		{values: []string{`exec:a "unterminated`}, err: `--invoke "exec:a \"unterminated": EOF found when expecting closing quote`},
		{values: []string{"exec:a", "http://127.0.0.1:1"}, err: "--invoke exec:a and http://127.0.0.1:1: a pool is of endpoints or of exec: binaries, not both"},
		{values: []string{"example", "exec:a"}, err: "--invoke example: invoked alone, not in a pool with 1 other targets"},
		{values: []string{"lambda:fn", "lambda:g"}, err: "--invoke lambda:fn: invoked alone, not in a pool with 1 other targets"},
		{values: []string{"lambda:"}, err: "--invoke lambda: needs a function name or ARN, e.g. lambda:my-function"},
		{values: []string{"bootstrap"}, err: `--invoke "bootstrap": want exec:PATH [ARGS] (a function binary esm runs itself), an http(s) URL of a Lambda-Invoke-compatible endpoint, lambda:NAME_OR_ARN, or example`},
	} {
		got, err := ParseTargets(tt.values)
		switch {
		case tt.err != "":
			if err == nil || err.Error() != tt.err || ExitCode(err) != 2 {
				t.Errorf("%q: %v; want a usage error: %s", tt.values, err, tt.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.values, err)
		case !reflect.DeepEqual(got, tt.want):
			t.Errorf("%q: %+v, want %+v", tt.values, got, tt.want)
		}
	}
}

// TestNewInvokerUsage: what invoke.OpenTargets refuses is a usage error of --invoke too: a
// binary that cannot be found, the same endpoint twice; a --function-env-pass that names no
// variable is one of its own flag.
func TestNewInvokerUsage(t *testing.T) {
	o := InvokerOptions{Logger: discardLogger()}
	for _, tt := range []struct {
		targets []invoke.Target
		env     FunctionEnvFlags
		prefix  string
	}{
		{targets: []invoke.Target{{Exec: []string{"./no-such-bootstrap"}}}, prefix: "--invoke exec:./no-such-bootstrap: exec: "},
		{targets: []invoke.Target{{URL: "http://127.0.0.1:1"}, {URL: "http://127.0.0.1:1"}},
			prefix: "--invoke http://127.0.0.1:1 http://127.0.0.1:1: invoke: endpoints"},
		{targets: []invoke.Target{{Exec: []string{"./no-such-bootstrap"}}}, env: FunctionEnvFlags{FunctionEnvPass: []string{"A=B"}},
			prefix: `--function-env-pass "A=B": want the name of a variable`},
		{targets: []invoke.Target{{Exec: []string{"./no-such-bootstrap"}}}, env: FunctionEnvFlags{FunctionCredentials: "root"},
			prefix: `--function-credentials "root": want esm, none or profile:NAME`},
	} {
		o.FunctionEnv = tt.env
		_, closeFn, err := NewInvoker(tt.targets, o)
		if err == nil || !strings.HasPrefix(err.Error(), tt.prefix) || ExitCode(err) != 2 || closeFn == nil {
			t.Errorf("%+v: %v; want a usage error starting %q", tt.targets, err, tt.prefix)
		}
	}
}

// TestNewInvokerExample: the example target runs the handler the options give, in this process,
// limited to the template's ReservedConcurrentExecutions.
func TestNewInvokerExample(t *testing.T) {
	zero := 0
	o := InvokerOptions{Handler: func() {}, Function: &sam.Function{FunctionName: "fn", ReservedConcurrentExecutions: &zero}}
	inv, closeFn, err := NewInvoker([]invoke.Target{{Example: true}}, o)
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
	err := Run(context.Background(), c, nil)
	if ExitCode(err) != 2 || !errors.Is(err, errNoFunction) || !strings.Contains(err.Error(), "--invoke exec:PATH") {
		t.Fatalf("Run without a function: %v", err)
	}
}
