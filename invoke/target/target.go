// Package target turns a function target, as "esm run --invoke" and "esm serve --function" take
// it, into an invoke.Invoker: exec:PATH [ARGS] (the binary run by esm under the Lambda Runtime
// API, invoke/execenv), http(s) URLs (Lambda-Invoke-compatible endpoints such as aws-lambda-rie,
// invoke/httpinvoke), lambda:NAME_OR_ARN (the Lambda Invoke API, invoke/lambdaapi), or a Go
// handler in this process (invoke/inprocess). [Open] takes one value, [ParseTargets] and
// [OpenTargets] several (a pool). It imports every transport, so a program that imports it links
// them all; package invoke, which the transports import, links none.
package target

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/shlex"
)

// The prefixes and names of targets.
const (
	lambdaPrefix  = "lambda:"
	execPrefix    = "exec:"
	exampleTarget = "example"
)

// ErrInvalidTarget is wrapped by the errors of ParseTargets, Open and OpenTargets for a target
// they cannot use: a value that is no target, an empty exec: or lambda:, a mix of kinds, an
// endpoint or binary the transport refuses, a target with no handler to run, or an option out
// of range. Such an error is the caller's to fix (esm reports it as a usage error, exit code
// 2); errors.Is tells it from a failure to reach the function.
var ErrInvalidTarget = errors.New("invalid function target")

// invalidError is an error that wraps ErrInvalidTarget without saying so in its text.
type invalidError struct{ err error }

func (e *invalidError) Error() string   { return e.err.Error() }
func (e *invalidError) Unwrap() []error { return []error{ErrInvalidTarget, e.err} }

// invalid marks err as an invalid target.
func invalid(err error) error { return &invalidError{err} }

// Target is one function target: exactly one of its fields is set.
type Target struct {
	// URL is a Lambda-Invoke-compatible endpoint (aws-lambda-rie), a base URL or a full
	// .../invocations URL.
	URL string
	// Lambda is a function of the Lambda API: a name, name:qualifier or ARN.
	Lambda string
	// Exec is a function binary and its arguments, run in execution environments that speak the
	// Lambda Runtime API.
	Exec []string
	// Example is the Go handler given with WithHandler, run in this process (esm gives its
	// built-in example function).
	Example bool
}

// String is the target as ParseTargets reads it.
func (t Target) String() string {
	switch {
	case t.URL != "":
		return t.URL
	case t.Lambda != "":
		return lambdaPrefix + t.Lambda
	case t.Example:
		return exampleTarget
	}
	return execPrefix + strings.Join(t.Exec, " ")
}

// kinds is how many of t's fields are set: 1 for a valid target.
func (t Target) kinds() int {
	n := 0
	for _, set := range []bool{t.URL != "", t.Lambda != "", t.Exec != nil, t.Example} {
		if set {
			n++
		}
	}
	return n
}

// ParseTargets parses target values: http(s) URLs, lambda:NAME_OR_ARN, exec:PATH [ARGS...] and
// example. A value that is not an exec: target may hold several targets separated by spaces
// ("url1 url2", as one environment variable gives them); an exec: value is one target, the path
// then its arguments, split as a POSIX shell splits words (quotes and backslashes). Several URLs
// are a pool of endpoints, several exec: values a pool of binaries; mixing the two is an error,
// and so is a Lambda function or the example alongside anything else. Errors wrap
// ErrInvalidTarget. No values, or only blank ones, give no target.
func ParseTargets(values []string) ([]Target, error) {
	var out []Target
	for _, v := range values {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(v), execPrefix); ok {
			words, err := shlex.Split(cmd)
			if err != nil {
				return nil, invalid(fmt.Errorf("%q: %w", v, err))
			}
			if len(words) == 0 {
				return nil, invalid(errors.New("exec: needs the function's binary, e.g. exec:bin/bootstrap"))
			}
			out = append(out, Target{Exec: words})
			continue
		}
		for _, f := range strings.Fields(v) {
			t, err := parseTarget(f)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
	}
	if err := checkPool(out); err != nil {
		return nil, err
	}
	return out, nil
}

// parseTarget parses one space-free target other than exec:.
func parseTarget(f string) (Target, error) {
	switch name, isLambda := strings.CutPrefix(f, lambdaPrefix); {
	case isLambda && name == "":
		return Target{}, invalid(errors.New("lambda: needs a function name or ARN, e.g. lambda:my-function"))
	case isLambda:
		return Target{Lambda: name}, nil
	case f == exampleTarget:
		return Target{Example: true}, nil
	case strings.HasPrefix(f, "http://") || strings.HasPrefix(f, "https://"):
		return Target{URL: f}, nil
	}
	return Target{}, invalid(fmt.Errorf("%q: want exec:PATH [ARGS] (a function binary esm runs itself), an http(s) URL of a Lambda-Invoke-compatible endpoint, lambda:NAME_OR_ARN, or example", f))
}

// checkPool checks that targets can be invoked together: each of one kind, a Lambda function or
// the example alone, endpoints or binaries but not both.
func checkPool(targets []Target) error {
	for _, t := range targets {
		if n := t.kinds(); n != 1 {
			return invalid(fmt.Errorf("target %+v: want exactly one of URL, Lambda, Exec and Example, not %d", t, n))
		}
		if (t.Lambda != "" || t.Example) && len(targets) > 1 {
			return invalid(fmt.Errorf("%s: invoked alone, not in a pool with %d other targets", t, len(targets)-1))
		}
		if (t.URL != "") != (targets[0].URL != "") {
			return invalid(fmt.Errorf("%s and %s: a pool is of endpoints or of exec: binaries, not both", targets[0], t))
		}
	}
	return nil
}
