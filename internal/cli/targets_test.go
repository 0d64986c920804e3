package cli

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestParseTargets(t *testing.T) {
	for _, tt := range []struct {
		values []string
		want   []Target
		err    string
	}{
		{values: []string{"exec:bin/bootstrap"}, want: []Target{{Exec: []string{"bin/bootstrap"}}}},
		{values: []string{`exec:./run.sh --name "two words" 'single quoted' a\ b`},
			want: []Target{{Exec: []string{"./run.sh", "--name", "two words", "single quoted", "a b"}}}},
		{values: []string{"exec:a", "exec:b -v"}, want: []Target{{Exec: []string{"a"}}, {Exec: []string{"b", "-v"}}}},
		{values: []string{"http://127.0.0.1:1 http://127.0.0.1:2"}, want: []Target{{URL: "http://127.0.0.1:1"}, {URL: "http://127.0.0.1:2"}}},
		{values: []string{"lambda:fn"}, want: []Target{{Lambda: "fn"}}},
		{values: []string{"example"}, want: []Target{{Example: true}}},
		{values: nil, want: nil},
		{values: []string{"exec:"}, err: "needs the function's binary"},
		{values: []string{`exec:a "unterminated`}, err: "exec:"},
		{values: []string{"exec:a", "http://127.0.0.1:1"}, err: "not both"},
		{values: []string{"example", "exec:a"}, err: "alone"},
		{values: []string{"lambda:fn", "lambda:g"}, err: "alone"},
		{values: []string{"bootstrap"}, err: "want exec:PATH"},
	} {
		got, err := ParseTargets(tt.values)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) || ExitCode(err) != 2 {
				t.Errorf("%q: %v; want a usage error with %q", tt.values, err, tt.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.values, err)
		case !reflect.DeepEqual(got, tt.want):
			t.Errorf("%q: %+v, want %+v", tt.values, got, tt.want)
		}
	}
}

func FuzzParseTargets(f *testing.F) {
	for _, s := range []string{"exec:a b", `exec:"x y" 'z'`, "http://h:1 http://h:2", "lambda:fn", "example", "exec:\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		targets, err := ParseTargets([]string{v})
		if err != nil {
			if ExitCode(err) != 2 {
				t.Fatalf("%q: %v is not a usage error", v, err)
			}
			return
		}
		for _, tg := range targets {
			if n := btoi(tg.URL != "") + btoi(tg.Lambda != "") + btoi(tg.Exec != nil) + btoi(tg.Example); n != 1 {
				t.Fatalf("%q: target %+v has %d kinds", v, tg, n)
			}
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
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
