package target

import (
	"errors"
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
		{values: []string{"", "  "}, want: nil},
		{values: []string{"exec:"}, err: "exec: needs the function's binary, e.g. exec:bin/bootstrap"},
		{values: []string{`exec:a "unterminated`}, err: `"exec:a \"unterminated": EOF found when expecting closing quote`},
		{values: []string{"exec:a", "http://127.0.0.1:1"}, err: "exec:a and http://127.0.0.1:1: a pool is of endpoints or of exec: binaries, not both"},
		{values: []string{"example", "exec:a"}, err: "example: invoked alone, not in a pool with 1 other targets"},
		{values: []string{"lambda:fn", "lambda:g"}, err: "lambda:fn: invoked alone, not in a pool with 1 other targets"},
		{values: []string{"lambda:"}, err: "lambda: needs a function name or ARN, e.g. lambda:my-function"},
		{values: []string{"bootstrap"}, err: `"bootstrap": want exec:PATH [ARGS] (a function binary esm runs itself), an http(s) URL of a Lambda-Invoke-compatible endpoint, lambda:NAME_OR_ARN, or example`},
	} {
		got, err := ParseTargets(tt.values)
		switch {
		case tt.err != "":
			if err == nil || err.Error() != tt.err || !errors.Is(err, ErrInvalidTarget) {
				t.Errorf("%q: %v; want an invalid target: %s", tt.values, err, tt.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.values, err)
		case !reflect.DeepEqual(got, tt.want):
			t.Errorf("%q: %+v, want %+v", tt.values, got, tt.want)
		}
	}
}

// TestOpenTargetsChecksThePool: targets built by hand meet the rules ParseTargets applies.
func TestOpenTargetsChecksThePool(t *testing.T) {
	for _, tt := range []struct {
		targets []Target
		err     string
	}{
		{[]Target{{}}, "want exactly one of URL, Lambda, Exec and Example, not 0"},
		{[]Target{{URL: "http://127.0.0.1:1", Lambda: "fn"}}, "not 2"},
		{[]Target{{Lambda: "fn"}, {Lambda: "g"}}, "invoked alone"},
		{[]Target{{URL: "http://127.0.0.1:1"}, {Exec: []string{"a"}}}, "not both"},
	} {
		inv, closeFn, err := OpenTargets(tt.targets, WithHandler(func() {}))
		if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrInvalidTarget) || inv != nil || closeFn == nil {
			t.Errorf("%+v: %v, %v; want an invalid target with %q and a close", tt.targets, inv, err, tt.err)
		}
	}
}

func FuzzParseTargets(f *testing.F) {
	for _, s := range []string{"exec:a b", `exec:"x y" 'z'`, "http://h:1 http://h:2", "lambda:fn", "example", "exec:\\", "lambda:", " exec: "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		targets, err := ParseTargets([]string{v})
		if err != nil {
			if !errors.Is(err, ErrInvalidTarget) {
				t.Fatalf("%q: %v does not wrap ErrInvalidTarget", v, err)
			}
			return
		}
		for _, tg := range targets {
			if n := tg.kinds(); n != 1 {
				t.Fatalf("%q: target %+v has %d kinds", v, tg, n)
			}
			if tg.Exec != nil {
				continue // its words may hold spaces: String is for messages
			}
			again, err := ParseTargets([]string{tg.String()})
			if err != nil || len(again) != 1 || !reflect.DeepEqual(again[0], tg) {
				t.Fatalf("%q: target %+v prints as %q, which parses as %+v, %v", v, tg, tg.String(), again, err)
			}
		}
	})
}
