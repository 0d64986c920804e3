package filter

import (
	"errors"
	"strings"
	"testing"
)

// invalidPatterns are patterns Compile must reject with Lambda's message.
var invalidPatterns = []struct {
	name    string
	pattern string
}{
	// the pattern as a whole
	{"empty string", ``},
	{"whitespace", ` `},
	{"not JSON", `not json`},
	{"truncated", `{"data":{"a":["x"]}`},
	{"trailing garbage", `{"data":{"a":["x"]}} x`},
	{"two values", `{"data":{"a":["x"]}}{}`},
	{"array", `[{"data":{"a":["x"]}}]`},
	{"null", `null`},
	{"string", `"data"`},
	{"number", `5`},
	{"empty object", `{}`},
	{"too long", `{"data":{"a":["` + strings.Repeat("x", MaxPatternLength-18) + `"]}}`},

	// structure
	{"empty nested object", `{"data":{}}`},
	{"empty deeper object", `{"data":{"a":{}}}`},
	{"string value", `{"data":{"a":"x"}}`},
	{"number value", `{"data":{"a":5}}`},
	{"null value", `{"data":{"a":null}}`},
	{"boolean value", `{"data":{"a":true}}`},
	{"data as rule array", `{"data":["x"]}`},
	{"data as exists", `{"data":[{"exists":true}]}`},
	{"data as string", `{"data":"x"}`},
	{"data as rule array in $or", `{"$or":[{"data":["x"]},{"partitionKey":["y"]}]}`},
	{"empty rule array", `{"data":{"a":[]}}`},
	{"nested rule array", `{"data":{"a":[["x"]]}}`},
	{"empty operator object", `{"data":{"a":[{}]}}`},
	{"two operators in one object", `{"data":{"a":[{"prefix":"x","suffix":"y"}]}}`},

	// operators we do not support
	{"wildcard", `{"data":{"a":[{"wildcard":"x*"}]}}`},
	{"cidr", `{"data":{"a":[{"cidr":"10.0.0.0/8"}]}}`},
	{"exactly", `{"data":{"a":[{"exactly":"x"}]}}`},
	{"unknown operator", `{"data":{"a":[{"contains":"x"}]}}`},
	{"operator name with other case", `{"data":{"a":[{"Prefix":"x"}]}}`},

	// exists
	{"exists string", `{"data":{"a":[{"exists":"true"}]}}`},
	{"exists null", `{"data":{"a":[{"exists":null}]}}`},
	{"exists number", `{"data":{"a":[{"exists":1}]}}`},

	// prefix, suffix, equals-ignore-case
	{"prefix number", `{"data":{"a":[{"prefix":5}]}}`},
	{"prefix null", `{"data":{"a":[{"prefix":null}]}}`},
	{"prefix array", `{"data":{"a":[{"prefix":["x"]}]}}`},
	{"prefix ignore case number", `{"data":{"a":[{"prefix":{"equals-ignore-case":5}}]}}`},
	{"prefix unknown object", `{"data":{"a":[{"prefix":{"foo":"x"}}]}}`},
	{"prefix object two keys", `{"data":{"a":[{"prefix":{"equals-ignore-case":"x","foo":"y"}}]}}`},
	{"suffix number", `{"data":{"a":[{"suffix":1}]}}`},
	{"suffix empty object", `{"data":{"a":[{"suffix":{}}]}}`},
	{"equals-ignore-case number", `{"data":{"a":[{"equals-ignore-case":1}]}}`},
	{"equals-ignore-case array", `{"data":{"a":[{"equals-ignore-case":["x"]}]}}`},

	// numeric
	{"numeric number", `{"data":{"a":[{"numeric":5}]}}`},
	{"numeric empty", `{"data":{"a":[{"numeric":[]}]}}`},
	{"numeric operator only", `{"data":{"a":[{"numeric":["="]}]}}`},
	{"numeric string operand", `{"data":{"a":[{"numeric":["=","5"]}]}}`},
	{"numeric null operand", `{"data":{"a":[{"numeric":[">",null]}]}}`},
	{"numeric unknown operator", `{"data":{"a":[{"numeric":["==",5]}]}}`},
	{"numeric not equal operator", `{"data":{"a":[{"numeric":["!=",5]}]}}`},
	{"numeric reversed pair", `{"data":{"a":[{"numeric":[5,"="]}]}}`},
	{"numeric three terms", `{"data":{"a":[{"numeric":[">",5,"<"]}]}}`},
	{"numeric equal then bound", `{"data":{"a":[{"numeric":["=",5,"<",6]}]}}`},
	{"numeric upper then lower", `{"data":{"a":[{"numeric":["<",5,">",1]}]}}`},
	{"numeric two lower bounds", `{"data":{"a":[{"numeric":[">",5,">",6]}]}}`},
	{"numeric empty range", `{"data":{"a":[{"numeric":[">",5,"<",5]}]}}`},
	{"numeric point range", `{"data":{"a":[{"numeric":[">=",5,"<=",5]}]}}`},
	{"numeric inverted range", `{"data":{"a":[{"numeric":[">=",6,"<=",5]}]}}`},
	{"numeric six terms", `{"data":{"a":[{"numeric":[">",1,"<",2,"<",3]}]}}`},
	{"numeric above 5e9", `{"data":{"a":[{"numeric":["=",5000000001]}]}}`},
	{"numeric below -5e9", `{"data":{"a":[{"numeric":["<",-6e9]}]}}`},
	{"numeric overflow", `{"data":{"a":[{"numeric":["=",1e999]}]}}`},
	{"numeric range bound above 5e9", `{"data":{"a":[{"numeric":[">",0,"<",6e9]}]}}`},

	// anything-but
	{"anything-but true", `{"data":{"a":[{"anything-but":true}]}}`},
	{"anything-but null", `{"data":{"a":[{"anything-but":null}]}}`},
	{"anything-but empty array", `{"data":{"a":[{"anything-but":[]}]}}`},
	{"anything-but string then number", `{"data":{"a":[{"anything-but":["a",1]}]}}`},
	{"anything-but number then string", `{"data":{"a":[{"anything-but":[1,"a"]}]}}`},
	{"anything-but null in array", `{"data":{"a":[{"anything-but":[null]}]}}`},
	{"anything-but boolean in array", `{"data":{"a":[{"anything-but":[true]}]}}`},
	{"anything-but nested array", `{"data":{"a":[{"anything-but":[["a"]]}]}}`},
	{"anything-but object in array", `{"data":{"a":[{"anything-but":[{"prefix":"a"}]}]}}`},
	{"anything-but number above 5e9", `{"data":{"a":[{"anything-but":6e9}]}}`},
	{"anything-but list number above 5e9", `{"data":{"a":[{"anything-but":[1,6e9]}]}}`},
	{"anything-but empty prefix", `{"data":{"a":[{"anything-but":{"prefix":""}}]}}`},
	{"anything-but empty suffix", `{"data":{"a":[{"anything-but":{"suffix":""}}]}}`},
	{"anything-but prefix number", `{"data":{"a":[{"anything-but":{"prefix":5}}]}}`},
	{"anything-but wildcard", `{"data":{"a":[{"anything-but":{"wildcard":"a*"}}]}}`},
	{"anything-but numeric", `{"data":{"a":[{"anything-but":{"numeric":[">",1]}}]}}`},
	{"anything-but two operators", `{"data":{"a":[{"anything-but":{"prefix":"a","suffix":"b"}}]}}`},
	{"anything-but empty object", `{"data":{"a":[{"anything-but":{}}]}}`},
	{"anything-but ignore case number", `{"data":{"a":[{"anything-but":{"equals-ignore-case":5}}]}}`},
	{"anything-but ignore case empty", `{"data":{"a":[{"anything-but":{"equals-ignore-case":[]}}]}}`},
	{"anything-but ignore case number in array", `{"data":{"a":[{"anything-but":{"equals-ignore-case":["a",1]}}]}}`},

	// $or
	{"$or one branch", `{"data":{"$or":[{"a":["x"]}]}}`},
	{"$or empty", `{"data":{"$or":[]}}`},
	{"$or object", `{"data":{"$or":{"a":["x"],"b":["y"]}}}`},
	{"$or string", `{"data":{"$or":"x"}}`},
	{"$or with a string", `{"data":{"$or":[{"a":["x"]},"b"]}}`},
	{"$or with an empty object", `{"data":{"$or":[{"a":["x"]},{}]}}`},
	{"$or with a bad branch", `{"data":{"$or":[{"a":["x"]},{"b":[]}]}}`},
	{"$or branch keyed by an operator", `{"data":{"$or":[{"prefix":["x"]},{"a":["y"]}]}}`},
	{"$or branch keyed by numeric deeper", `{"data":{"$or":[{"a":{"numeric":["x"]}},{"b":["y"]}]}}`},
	{"$or branch keyed by a comparison", `{"data":{"$or":[{">":["x"]},{"b":["y"]}]}}`},
	{"top-level $or of one", `{"$or":[{"data":{"a":["x"]}}]}`},
}

func TestCompileInvalid(t *testing.T) {
	for _, tc := range invalidPatterns {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Compile([]string{tc.pattern})
			if err == nil {
				t.Fatalf("Compile(%s) succeeded, want an error", tc.pattern)
			}
			if f != nil {
				t.Errorf("Compile returned Filters with its error")
			}
			if !errors.Is(err, ErrInvalidPattern) {
				t.Errorf("error %v does not wrap ErrInvalidPattern", err)
			}
			if err.Error() != "Invalid filter pattern definition." {
				t.Errorf("Error() = %q, want Lambda's exact message", err.Error())
			}
			var pe *PatternError
			if !errors.As(err, &pe) || pe.Reason == "" {
				t.Fatalf("error %#v is not a *PatternError with a reason", err)
			}
		})
	}
}

// validPatterns are patterns that look odd but must compile.
var validPatterns = []string{
	`{"data":{"a":["x"]}}`,
	`{"partitionKey":["x"]}`,
	`{"anyKey":["x"]}`,
	`{"data":{"prefix":["x"]}}`,             // operator names are ordinary keys outside $or
	`{"data":{"numeric":{"exists":["x"]}}}`, // ...at any depth
	`{"data":{"a":[{"prefix":""}]}}`,
	`{"data":{"a":[{"suffix":{"equals-ignore-case":""}}]}}`,
	`{"data":{"a":[{"equals-ignore-case":""}]}}`,
	`{"data":{"a":[{"numeric":[">=",-5e9,"<=",5e9]}]}}`,
	`{"data":{"a":[{"numeric":[">",-5000000000]}]}}`,
	`{"data":{"a":[{"numeric":["=",0.1234567]}]}}`,
	`{"data":{"a":[1e999, -0, 12345678901234567890]}}`, // exact numbers are text: any JSON number
	`{"data":{"a":[{"anything-but":["a","b"]}]}}`,
	`{"data":{"a":[{"anything-but":[1,2.5,-3e3]}]}}`,
	`{"data":{"a":[{"anything-but":{"equals-ignore-case":["a"]}}]}}`,
	`{"data":{"a":[{"exists":true},{"exists":false}]}}`,
	`{"data":{"a":["x",1,true,false,null,""]}}`,
	`{"data":{"$or":[{"a":["x"]},{"b":["y"]},{"c":{"$or":[{"d":["1"]},{"e":["2"]}]}}]}}`,
	`{"$or":[{"data":{"a":["x"]}},{"partitionKey":["y"]}]}`,
	`  {"data":{"a":["x"]}}  `,
	// exactly MaxPatternLength characters, and more bytes than that
	`{"data":{"a":["` + strings.Repeat("é", MaxPatternLength-19) + `"]}}`,
}

func TestCompileValid(t *testing.T) {
	for _, p := range validPatterns {
		if _, err := Compile([]string{p}); err != nil {
			t.Errorf("Compile(%.80s): %v (%s)", p, err, err.(*PatternError).Detail())
		}
	}
}

// TestRepeatedKeyLastWins checks that a repeated key is decided by its last occurrence, at
// compile time too: an invalid earlier occurrence is ignored, an invalid last one is not.
func TestRepeatedKeyLastWins(t *testing.T) {
	if _, err := Compile([]string{`{"data":{"a":5,"a":["x"]}}`}); err != nil {
		t.Errorf("invalid first occurrence should be ignored: %v", err)
	}
	if _, err := Compile([]string{`{"data":{"a":["x"],"a":5}}`}); err == nil {
		t.Error("invalid last occurrence should be rejected")
	}
}

func TestCompileErrorIndexAndDetail(t *testing.T) {
	_, err := Compile([]string{`{"data":{"a":["x"]}}`, `{"data":{"order":{"qty":[{"numeric":[">",5,"<",1]}]}}}`})
	var pe *PatternError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, want a *PatternError", err)
	}
	if pe.Index != 1 || pe.Path != "data.order.qty" {
		t.Errorf("Index, Path = %d, %q; want 1, %q", pe.Index, pe.Path, "data.order.qty")
	}
	if want := "filter 1 at data.order.qty: numeric: the lower bound must be less than the upper bound"; pe.Detail() != want {
		t.Errorf("Detail() = %q, want %q", pe.Detail(), want)
	}
}

func TestPatternLength(t *testing.T) {
	head, tail := `{"data":{"a":["`, `"]}}`
	for _, tc := range []struct {
		name string
		fill string
		n    int
		ok   bool
	}{
		{"4096 ASCII", "x", MaxPatternLength - len(head) - len(tail), true},
		{"4097 ASCII", "x", MaxPatternLength - len(head) - len(tail) + 1, false},
		{"4096 runes, more bytes", "é", MaxPatternLength - len(head) - len(tail), true},
		{"4097 runes", "€", MaxPatternLength - len(head) - len(tail) + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile([]string{head + strings.Repeat(tc.fill, tc.n) + tail})
			if (err == nil) != tc.ok {
				t.Errorf("Compile: err = %v, want ok = %v", err, tc.ok)
			}
		})
	}
}
