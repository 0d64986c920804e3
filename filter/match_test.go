package filter

import (
	"strings"
	"testing"
	"time"
)

// testEvent is the decoded data most match cases run against.
const testEvent = `{
	"s": "buy", "n": 300, "f": 301.5, "neg": -5, "tiny": 0.0000001, "big": 1e10,
	"b": true, "z": null, "e": "", "numstr": "300", "upper": "EventBridge", "png": "photo.PNG",
	"kelvin": "\u212a", "esc": "a\"b",
	"arr": ["a", "b", 3], "same": ["a", "a"], "nums": [1, 5, 10], "empty": [], "nested": [["deep"]],
	"o": {"type": "buy", "qty": 1000, "inner": {"x": "y"}},
	"objs": [{"k": "a", "v": 1}, {"k": "b", "v": 2}],
	"mixed": [{"k": "a"}, 7],
	"objarr": [{"k": "a"}]
}`

// testRecord is the record the cases run against, with data replaced per case.
func testRecord(data string) Record {
	return Record{
		Data:                        []byte(data),
		PartitionKey:                "pk-1",
		SequenceNumber:              "49590338271490256608559692538361571095921575989136588898",
		ApproximateArrivalTimestamp: time.Unix(1545084650, 987000000),
	}
}

type matchCase struct {
	name    string
	pattern string
	data    string // testEvent if empty
	want    bool
}

// matchCases are single-pattern cases; the pattern's "data" part runs against testEvent unless
// the case gives its own data.
var matchCases = []matchCase{
	// equals
	{"string equal", `{"data":{"s":["buy"]}}`, "", true},
	{"string differs", `{"data":{"s":["sell"]}}`, "", false},
	{"or within key", `{"data":{"s":["sell","buy"]}}`, "", true},
	{"strings are case sensitive", `{"data":{"s":["BUY"]}}`, "", false},
	{"escaped string", `{"data":{"esc":["a\"b"]}}`, "", true},
	{"number equal as text", `{"data":{"n":[300]}}`, "", true},
	{"300.0 is not 300", `{"data":{"n":[300.0]}}`, "", false},
	{"3.0e2 is not 300", `{"data":{"n":[3.0e2]}}`, "", false},
	{"number rule does not match numeric string", `{"data":{"numstr":[300]}}`, "", false},
	{"string rule does not match number", `{"data":{"n":["300"]}}`, "", false},
	{"boolean", `{"data":{"b":[true]}}`, "", true},
	{"boolean false", `{"data":{"b":[false]}}`, "", false},
	{"string true is not true", `{"data":{"b":["true"]}}`, "", false},
	{"null matches present null", `{"data":{"z":[null]}}`, "", true},
	{"null does not match missing key", `{"data":{"missing":[null]}}`, "", false},
	{"null does not match empty string", `{"data":{"e":[null]}}`, "", false},
	{"empty string", `{"data":{"e":[""]}}`, "", true},
	{"empty string does not match other strings", `{"data":{"s":[""]}}`, "", false},
	{"empty string does not match missing key", `{"data":{"missing":[""]}}`, "", false},
	{"empty string does not match null", `{"data":{"z":[""]}}`, "", false},
	{"and across keys", `{"data":{"s":["buy"],"n":[300]}}`, "", true},
	{"and fails if one key fails", `{"data":{"s":["buy"],"n":[301]}}`, "", false},
	{"missing key", `{"data":{"missing":["x"]}}`, "", false},

	// nesting
	{"nested object", `{"data":{"o":{"type":["buy"]}}}`, "", true},
	{"two levels", `{"data":{"o":{"inner":{"x":["y"]}}}}`, "", true},
	{"nested mismatch", `{"data":{"o":{"type":["sell"]}}}`, "", false},
	{"nested pattern against leaf", `{"data":{"s":{"x":["y"]}}}`, "", false},
	{"leaf rule against object", `{"data":{"o":["buy"]}}`, "", false},
	{"nested and", `{"data":{"s":["buy"],"o":{"type":["buy"],"qty":[1000]}}}`, "", true},

	// arrays in the event
	{"array element string", `{"data":{"arr":["b"]}}`, "", true},
	{"array element number", `{"data":{"arr":[3]}}`, "", true},
	{"array without element", `{"data":{"arr":["c"]}}`, "", false},
	{"nested arrays are flattened", `{"data":{"nested":["deep"]}}`, "", true},
	{"object in array", `{"data":{"objs":{"k":["b"]}}}`, "", true},
	{"keys of one match come from one element", `{"data":{"objs":{"k":["a"],"v":[2]}}}`, "", false},
	{"both keys in one element", `{"data":{"objs":{"k":["b"],"v":[2]}}}`, "", true},
	{"objects among leaves", `{"data":{"mixed":{"k":["a"]}}}`, "", true},
	{"data is an array of objects", `{"data":{"s":["buy"]}}`, `[{"s":"sell"},{"s":"buy"}]`, true},

	// prefix and suffix
	{"prefix", `{"data":{"s":[{"prefix":"bu"}]}}`, "", true},
	{"prefix is case sensitive", `{"data":{"s":[{"prefix":"Bu"}]}}`, "", false},
	{"prefix does not match numbers", `{"data":{"n":[{"prefix":"3"}]}}`, "", false},
	{"empty prefix matches any string", `{"data":{"s":[{"prefix":""}]}}`, "", true},
	{"empty prefix does not match null", `{"data":{"z":[{"prefix":""}]}}`, "", false},
	{"prefix in array", `{"data":{"arr":[{"prefix":"b"}]}}`, "", true},
	{"prefix ignoring case", `{"data":{"upper":[{"prefix":{"equals-ignore-case":"eventb"}}]}}`, "", true},
	{"prefix ignoring case, no match", `{"data":{"upper":[{"prefix":{"equals-ignore-case":"eventc"}}]}}`, "", false},
	{"prefix ignoring case longer than value", `{"data":{"s":[{"prefix":{"equals-ignore-case":"buyer"}}]}}`, "", false},
	{"suffix", `{"data":{"png":[{"suffix":".PNG"}]}}`, "", true},
	{"suffix is case sensitive", `{"data":{"png":[{"suffix":".png"}]}}`, "", false},
	{"suffix ignoring case", `{"data":{"png":[{"suffix":{"equals-ignore-case":".png"}}]}}`, "", true},
	{"suffix ignoring case, no match", `{"data":{"png":[{"suffix":{"equals-ignore-case":".jpg"}}]}}`, "", false},

	// equals-ignore-case
	{"equals-ignore-case", `{"data":{"upper":[{"equals-ignore-case":"eventbridge"}]}}`, "", true},
	{"equals-ignore-case needs whole string", `{"data":{"upper":[{"equals-ignore-case":"event"}]}}`, "", false},
	{"equals-ignore-case folds unicode", `{"data":{"kelvin":[{"equals-ignore-case":"k"}]}}`, "", true},
	{"equals-ignore-case only strings", `{"data":{"n":[{"equals-ignore-case":"300"}]}}`, "", false},

	// anything-but
	{"anything-but string", `{"data":{"s":[{"anything-but":"sell"}]}}`, "", true},
	{"anything-but excluded string", `{"data":{"s":[{"anything-but":"buy"}]}}`, "", false},
	{"anything-but list", `{"data":{"s":[{"anything-but":["sell","buy"]}]}}`, "", false},
	{"anything-but number", `{"data":{"n":[{"anything-but":300}]}}`, "", false},
	{"anything-but number compares numerically", `{"data":{"n":[{"anything-but":[3.0e2]}]}}`, "", false},
	{"anything-but other number", `{"data":{"f":[{"anything-but":[300]}]}}`, "", true},
	{"anything-but string matches a number", `{"data":{"n":[{"anything-but":"x"}]}}`, "", true},
	{"anything-but string matches null", `{"data":{"z":[{"anything-but":"x"}]}}`, "", true},
	{"anything-but numbers match a boolean", `{"data":{"b":[{"anything-but":[1,2]}]}}`, "", true},
	{"anything-but numbers match numeric string", `{"data":{"numstr":[{"anything-but":[300]}]}}`, "", true},
	{"anything-but does not match missing key", `{"data":{"missing":[{"anything-but":"x"}]}}`, "", false},
	{"anything-but does not match object", `{"data":{"o":[{"anything-but":"x"}]}}`, "", false},
	{"anything-but on array: one element not excluded", `{"data":{"arr":[{"anything-but":["a"]}]}}`, "", true},
	{"anything-but on array: all excluded", `{"data":{"same":[{"anything-but":["a"]}]}}`, "", false},
	{"anything-but prefix", `{"data":{"s":[{"anything-but":{"prefix":"bu"}}]}}`, "", false},
	{"anything-but other prefix", `{"data":{"s":[{"anything-but":{"prefix":"se"}}]}}`, "", true},
	{"anything-but prefix matches a number", `{"data":{"n":[{"anything-but":{"prefix":"3"}}]}}`, "", true},
	{"anything-but suffix", `{"data":{"png":[{"anything-but":{"suffix":".PNG"}}]}}`, "", false},
	{"anything-but other suffix", `{"data":{"png":[{"anything-but":{"suffix":".png"}}]}}`, "", true},
	{"anything-but ignoring case", `{"data":{"s":[{"anything-but":{"equals-ignore-case":"BUY"}}]}}`, "", false},
	{"anything-but ignoring case list", `{"data":{"s":[{"anything-but":{"equals-ignore-case":["SELL","HOLD"]}}]}}`, "", true},

	// numeric
	{"numeric equal", `{"data":{"n":[{"numeric":["=",300]}]}}`, "", true},
	{"numeric equal other forms", `{"data":{"n":[{"numeric":["=",3.0e2]}]}}`, "", true},
	{"numeric not equal", `{"data":{"n":[{"numeric":["=",301]}]}}`, "", false},
	{"greater than", `{"data":{"f":[{"numeric":[">",301.5]}]}}`, "", false},
	{"greater or equal", `{"data":{"f":[{"numeric":[">=",301.5]}]}}`, "", true},
	{"less than", `{"data":{"f":[{"numeric":["<",301.5]}]}}`, "", false},
	{"less or equal", `{"data":{"f":[{"numeric":["<=",301.5]}]}}`, "", true},
	{"range", `{"data":{"f":[{"numeric":[">",301,"<=",302]}]}}`, "", true},
	{"range closed top", `{"data":{"n":[{"numeric":[">",0,"<=",300]}]}}`, "", true},
	{"range open top", `{"data":{"n":[{"numeric":[">",0,"<",300]}]}}`, "", false},
	{"range open bottom", `{"data":{"n":[{"numeric":[">",300,"<",400]}]}}`, "", false},
	{"range closed bottom", `{"data":{"n":[{"numeric":[">=",300,"<",400]}]}}`, "", true},
	{"negative", `{"data":{"neg":[{"numeric":["<",0]}]}}`, "", true},
	{"numeric does not match numeric string", `{"data":{"numstr":[{"numeric":["=",300]}]}}`, "", false},
	{"numeric ignores numbers beyond 5e9", `{"data":{"big":[{"numeric":[">",0]}]}}`, "", false},
	{"anything-but number does not exclude beyond 5e9", `{"data":{"big":[{"anything-but":[5000000000]}]}}`, "", true},
	{"numeric to six decimals", `{"data":{"tiny":[{"numeric":["=",0]}]}}`, "", true},
	{"numeric in array", `{"data":{"nums":[{"numeric":[">",9]}]}}`, "", true},
	{"numeric in array, none", `{"data":{"nums":[{"numeric":[">",10]}]}}`, "", false},
	{"numeric or exact", `{"data":{"n":[{"numeric":["<",0]},300]}}`, "", true},

	// exists
	{"exists", `{"data":{"s":[{"exists":true}]}}`, "", true},
	{"exists on missing key", `{"data":{"missing":[{"exists":true}]}}`, "", false},
	{"not exists on missing key", `{"data":{"missing":[{"exists":false}]}}`, "", true},
	{"not exists on present key", `{"data":{"s":[{"exists":false}]}}`, "", false},
	{"null exists", `{"data":{"z":[{"exists":true}]}}`, "", true},
	{"empty string exists", `{"data":{"e":[{"exists":true}]}}`, "", true},
	{"object does not exist as a leaf", `{"data":{"o":[{"exists":true}]}}`, "", false},
	{"object counts as not existing", `{"data":{"o":[{"exists":false}]}}`, "", true},
	{"empty array does not exist", `{"data":{"empty":[{"exists":true}]}}`, "", false},
	{"empty array counts as not existing", `{"data":{"empty":[{"exists":false}]}}`, "", true},
	{"array of objects does not exist as a leaf", `{"data":{"objarr":[{"exists":true}]}}`, "", false},
	{"array with leaves exists", `{"data":{"arr":[{"exists":true}]}}`, "", true},
	{"not exists under missing parent", `{"data":{"nope":{"x":[{"exists":false}]}}}`, "", true},
	{"exists under missing parent", `{"data":{"nope":{"x":[{"exists":true}]}}}`, "", false},
	{"not exists under leaf parent", `{"data":{"s":{"x":[{"exists":false}]}}}`, "", true},
	{"not exists in one array element", `{"data":{"objs":{"missing":[{"exists":false}]}}}`, "", true},
	{"not exists in no array element", `{"data":{"objs":{"k":[{"exists":false}]}}}`, "", false},
	{"not exists under empty array", `{"data":{"empty":{"x":[{"exists":false}]}}}`, "", true},
	{"exists or value", `{"data":{"missing":[{"exists":false},"x"]}}`, "", true},

	// $or
	{"$or one branch", `{"data":{"$or":[{"s":["sell"]},{"n":[300]}]}}`, "", true},
	{"$or no branch", `{"data":{"$or":[{"s":["sell"]},{"n":[301]}]}}`, "", false},
	{"$or and sibling key", `{"data":{"s":["sell"],"$or":[{"s":["buy"]},{"n":[300]}]}}`, "", false},
	{"$or and sibling key both", `{"data":{"s":["buy"],"$or":[{"s":["sell"]},{"n":[300]}]}}`, "", true},
	{"$or nested in object", `{"data":{"o":{"$or":[{"type":["sell"]},{"qty":[{"numeric":[">",999]}]}]}}}`, "", true},
	{"$or in $or", `{"data":{"$or":[{"s":["sell"]},{"$or":[{"n":[1]},{"f":[301.5]}]}]}}`, "", true},
	{"$or branch with several keys", `{"data":{"$or":[{"s":["buy"],"n":[1]},{"s":["buy"],"n":[300]}]}}`, "", true},
	{"$or inside array elements", `{"data":{"objs":{"$or":[{"k":["a"],"v":[2]},{"k":["b"],"v":[2]}]}}}`, "", true},
	{"$or keeps keys to one element", `{"data":{"objs":{"k":["a"],"$or":[{"v":[2]},{"v":[3]}]}}}`, "", false},
	{"$or across data and metadata", `{"$or":[{"data":{"s":["sell"]}},{"partitionKey":["pk-1"]}]}`, "", true},

	// repeated keys: the last one wins
	{"repeated pattern key, last wins", `{"data":{"s":["sell"],"s":["buy"]}}`, "", true},
	{"repeated pattern key, first ignored", `{"data":{"s":["buy"],"s":["sell"]}}`, "", false},
	{"repeated data key, last wins", `{"data":{"s":["buy"]}}`, `{"s":"sell","s":"buy"}`, true},

	// data that is not JSON, or not an object
	{"not JSON", `{"data":{"s":["buy"]}}`, `hello`, false},
	{"not JSON fails even exists:false", `{"data":{"s":[{"exists":false}]}}`, `hello`, false},
	{"empty data is not JSON", `{"data":{"s":[{"exists":false}]}}`, "\x00", false},
	{"trailing garbage is not JSON", `{"data":{"s":["buy"]}}`, `{"s":"buy"} x`, false},
	{"two JSON values are not JSON", `{"data":{"s":["buy"]}}`, `{"s":"buy"}{}`, false},
	{"trailing bracket is not JSON", `{"data":{"s":["buy"]}}`, `{"s":"buy"}]`, false},
	{"surrounding whitespace is fine", `{"data":{"s":["buy"]}}`, " \n{\"s\":\"buy\"}\r\n\t", true},
	{"truncated JSON", `{"data":{"s":["buy"]}}`, `{"s":"buy"`, false},
	{"JSON string data has no keys", `{"data":{"s":["buy"]}}`, `"buy"`, false},
	{"JSON string data, exists:false", `{"data":{"s":[{"exists":false}]}}`, `"buy"`, true},
	{"JSON null data, exists:false", `{"data":{"s":[{"exists":false}]}}`, `null`, true},
	{"no data rule ignores data", `{"partitionKey":["pk-1"]}`, `hello`, true},
	{"$or branch without data passes", `{"$or":[{"data":{"s":["buy"]}},{"partitionKey":["pk-1"]}]}`, `hello`, true},
	{"$or branch with data fails alone", `{"$or":[{"data":{"s":["buy"]}},{"partitionKey":["pk-2"]}]}`, `hello`, false},

	// metadata
	{"partition key", `{"partitionKey":["pk-1"]}`, "", true},
	{"other partition key", `{"partitionKey":["pk-2"]}`, "", false},
	{"partition key prefix", `{"partitionKey":[{"prefix":"pk-"}]}`, "", true},
	{"partition key and data", `{"partitionKey":["pk-1"],"data":{"s":["buy"]}}`, "", true},
	{"partition key and data mismatch", `{"partitionKey":["pk-1"],"data":{"s":["sell"]}}`, "", false},
	{"sequence number", `{"sequenceNumber":[{"prefix":"4959"}]}`, "", true},
	{"schema version", `{"kinesisSchemaVersion":["1.0"]}`, "", true},
	{"arrival time as event text", `{"approximateArrivalTimestamp":[1545084650.987]}`, "", true},
	{"arrival time numeric", `{"approximateArrivalTimestamp":[{"numeric":[">",1545084650,"<",1545084651]}]}`, "", true},
	{"arrival time is a number, not a string", `{"approximateArrivalTimestamp":["1545084650.987"]}`, "", false},
	{"metadata exists", `{"partitionKey":[{"exists":true}]}`, "", true},
	{"metadata is a leaf", `{"partitionKey":{"x":[{"exists":false}]}}`, "", true},
	{"unknown top-level key is absent", `{"eventSource":["aws:kinesis"]}`, "", false},
	{"unknown top-level key, exists:false", `{"eventSource":[{"exists":false}]}`, "", true},
	{"unknown top-level object", `{"kinesis":{"partitionKey":["pk-1"]}}`, "", false},
}

func TestMatch(t *testing.T) {
	for _, tc := range matchCases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Compile([]string{tc.pattern})
			if err != nil {
				t.Fatalf("Compile(%s): %v (%s)", tc.pattern, err, err.(*PatternError).Detail())
			}
			data := tc.data
			if data == "" {
				data = testEvent
			} else if data == "\x00" {
				data = ""
			}
			if got := f.Match(testRecord(data)); got != tc.want {
				t.Errorf("pattern %s against %s: got %v, want %v", tc.pattern, data, got, tc.want)
			}
		})
	}
}

func TestMatchFilters(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		data     string
		want     bool
	}{
		{"no filters pass everything", nil, `not json`, true},
		{"empty filters pass everything", []string{}, `{}`, true},
		{"filters are or-ed: second matches", []string{`{"data":{"s":["sell"]}}`, `{"data":{"s":["buy"]}}`}, `{"s":"buy"}`, true},
		{"filters are or-ed: none matches", []string{`{"data":{"s":["sell"]}}`, `{"data":{"s":["hold"]}}`}, `{"s":"buy"}`, false},
		{"non-JSON data: metadata filter still passes", []string{`{"data":{"s":["buy"]}}`, `{"partitionKey":["pk-1"]}`}, `not json`, true},
		{"non-JSON data: every filter needs data", []string{`{"data":{"s":["buy"]}}`, `{"data":{"s":[{"exists":false}]}}`}, `not json`, false},
		{"ten filters", []string{
			`{"data":{"i":[0]}}`, `{"data":{"i":[1]}}`, `{"data":{"i":[2]}}`, `{"data":{"i":[3]}}`, `{"data":{"i":[4]}}`,
			`{"data":{"i":[5]}}`, `{"data":{"i":[6]}}`, `{"data":{"i":[7]}}`, `{"data":{"i":[8]}}`, `{"data":{"i":[9]}}`,
		}, `{"i":9}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Compile(tc.patterns)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if got := f.Match(testRecord(tc.data)); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNilFiltersPassEverything(t *testing.T) {
	var f *Filters
	if !f.Match(Record{Data: []byte("x")}) || f.Len() != 0 {
		t.Fatal("a nil *Filters must pass every record")
	}
}

func TestZeroArrivalTimeReadsAsZero(t *testing.T) {
	f, err := Compile([]string{`{"approximateArrivalTimestamp":[0]}`})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Match(Record{}) {
		t.Fatal("the zero arrival time should read as 0, as the event renders it")
	}
}

// TestMatchDoesNotRetainData checks that a Filters holds nothing of a record after Match: the same
// Filters gives each record its own answer.
func TestMatchDoesNotRetainData(t *testing.T) {
	f, err := Compile([]string{`{"data":{"s":["buy"]}}`})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		data string
		want bool
	}{{`{"s":"buy"}`, true}, {`{"s":"sell"}`, false}, {`x`, false}, {`{"s":"buy"}`, true}} {
		if got := f.Match(testRecord(tc.data)); got != tc.want {
			t.Errorf("record %d (%s): got %v, want %v", i, tc.data, got, tc.want)
		}
	}
}

// TestDataDecodedOnce checks that data is parsed at most once per Match, however many patterns
// and rules look at it, and not at all when no pattern has a data rule.
func TestDataDecodedOnce(t *testing.T) {
	many, err := Compile([]string{
		`{"data":{"a":["1"]}}`, `{"data":{"b":["2"]}}`, `{"data":{"$or":[{"c":["3"]},{"d":["4"]}]}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	d := recordDoc{rec: testRecord(`{"d":"4"}`)}
	for _, p := range many.patterns {
		if p.matchTop(&d) {
			break
		}
	}
	if !d.parsed || !d.isJSON {
		t.Fatalf("data should have been parsed once and found to be JSON")
	}

	metaOnly, err := Compile([]string{`{"partitionKey":["x"]}`})
	if err != nil {
		t.Fatal(err)
	}
	d = recordDoc{rec: testRecord(`{}`)}
	metaOnly.patterns[0].matchTop(&d)
	if d.parsed {
		t.Fatal("data was parsed although no pattern has a data rule")
	}
}

// TestPathologicalInputsFinish runs the largest shapes the limits allow: the deepest pattern that
// fits in 4096 characters, the deepest "$or" nesting, and data far deeper and wider than the
// pattern. Matching must stay linear, so these finish in milliseconds; the bound only catches a
// blow-up.
func TestPathologicalInputsFinish(t *testing.T) {
	deepPattern := func(n int) string {
		return `{"data":` + strings.Repeat(`{"a":`, n) + `[{"exists":false},"x"]` + strings.Repeat(`}`, n+1)
	}
	n := (MaxPatternLength - len(deepPattern(0))) / len(`{"a":}`)
	deepOr := `{"data":` + strings.Repeat(`{"$or":[{"b":[{"numeric":[">",0]}]},`, 100) + `{"a":["x"]}` + strings.Repeat(`]}`, 100) + `}`
	cases := []struct {
		name, pattern, data string
		want                bool
	}{
		{"deepest pattern, matching data", deepPattern(n), strings.Repeat(`{"a":`, n) + `"x"` + strings.Repeat(`}`, n), true},
		{"deepest pattern, arrays at every level", deepPattern(n), strings.Repeat(`[{"a":`, n) + `["y","x"]` + strings.Repeat(`}]`, n), true},
		{"deep $or", deepOr, `{"a":"x"}`, true},
		{"deep $or over a wide array", deepOr, `[` + strings.Repeat(`{"b":-1,"a":"y"},`, 20000) + `{"a":"x"}]`, true},
		{"very deep data arrays", `{"data":{"a":["x"]}}`, strings.Repeat(`[`, 9000) + `{"a":"x"}` + strings.Repeat(`]`, 9000), true},
		{"data deeper than encoding/json allows", `{"data":{"a":[{"exists":false}]}}`, strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.pattern) > MaxPatternLength {
				t.Fatalf("test pattern is %d characters", len(tc.pattern))
			}
			f, err := Compile([]string{tc.pattern})
			if err != nil {
				t.Fatalf("Compile: %v (%s)", err, err.(*PatternError).Detail())
			}
			start := time.Now()
			if got := f.Match(Record{Data: []byte(tc.data)}); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("Match took %v", d)
			}
		})
	}
}
