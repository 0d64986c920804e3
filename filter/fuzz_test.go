package filter

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzRecords are the records every pattern that compiles is matched against in FuzzCompile.
var fuzzRecords = []Record{
	testRecord(testEvent),
	testRecord(`not json`),
	testRecord(``),
	testRecord(`[{"a":"x"},[{"a":["y",1]}],null]`),
	testRecord(`{"a":{"b":[1,"x",true,null,{"c":-0.5e-3}]},"data":{"a":"x"}}`),
	{},
}

func addPatternSeeds(add func(p string)) {
	for _, tc := range matchCases {
		add(tc.pattern)
	}
	for _, tc := range invalidPatterns {
		add(tc.pattern)
	}
	for _, p := range validPatterns {
		add(p)
	}
}

// FuzzCompile checks that Compile never panics or hangs, that every error it returns is Lambda's,
// that it accepts only JSON objects within the length limit, and that matching what it accepts
// never panics and gives the same answer twice and when the pattern is repeated.
func FuzzCompile(f *testing.F) {
	addPatternSeeds(func(p string) { f.Add(p) })
	f.Fuzz(func(t *testing.T, p string) {
		fs, err := Compile([]string{p})
		if err != nil {
			var pe *PatternError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidPattern) || pe.Index != 0 {
				t.Fatalf("Compile(%q) returned %#v, want a *PatternError for filter 0", p, err)
			}
			if err.Error() != "Invalid filter pattern definition." {
				t.Fatalf("Error() = %q", err.Error())
			}
			return
		}
		dec := json.NewDecoder(strings.NewReader(p))
		dec.UseNumber()
		var v map[string]any
		if !json.Valid([]byte(p)) || dec.Decode(&v) != nil || len(v) == 0 {
			t.Fatalf("Compile accepted %q, which is not a non-empty JSON object", p)
		}
		if utf8.RuneCountInString(p) > MaxPatternLength {
			t.Fatalf("Compile accepted a pattern of %d characters", utf8.RuneCountInString(p))
		}
		twice, err := Compile([]string{p, p})
		if err != nil {
			t.Fatalf("Compile of the pattern twice failed: %v", err)
		}
		for i, rec := range fuzzRecords {
			got := fs.Match(rec)
			if again := fs.Match(rec); again != got {
				t.Fatalf("record %d: Match is not deterministic", i)
			}
			if both := twice.Match(rec); both != got {
				t.Fatalf("record %d: [p] gives %v but [p, p] gives %v", i, got, both)
			}
		}
	})
}

// FuzzMatch checks that Match never panics on any data, partition key or pattern, is
// deterministic, and that {"$or": [p, p]} matches exactly what p matches.
func FuzzMatch(f *testing.F) {
	datas := []string{testEvent, `not json`, ``, `[]`, `{"s":"buy"} x`, `"\ud800"`, `{"a":[[[[{"b":1}]]]]}`}
	i := 0
	addPatternSeeds(func(p string) {
		f.Add(p, []byte(datas[i%len(datas)]), "pk-1")
		i++
	})
	f.Fuzz(func(t *testing.T, p string, data []byte, pk string) {
		fs, err := Compile([]string{p})
		if err != nil {
			return
		}
		rec := Record{Data: data, PartitionKey: pk, SequenceNumber: pk}
		got := fs.Match(rec)
		if fs.Match(rec) != got {
			t.Fatal("Match is not deterministic")
		}
		// A top-level $or of the pattern with itself is the pattern. It may not compile (too long,
		// or the pattern has operator-named keys, which $or branches refuse); then skip.
		or, err := Compile([]string{`{"$or":[` + p + `,` + p + `]}`})
		if err != nil {
			return
		}
		if both := or.Match(rec); both != got {
			t.Fatalf("pattern %q gives %v, but $or of it with itself gives %v, on data %q", p, got, both, data)
		}
		// The data as a whole record (a DynamoDB stream's): the same laws.
		doc := fs.MatchDocument(data)
		if fs.MatchDocument(data) != doc || or.MatchDocument(data) != doc {
			t.Fatalf("pattern %q on the document %q: MatchDocument is not deterministic, or differs from its $or with itself", p, data)
		}
	})
}
