package filter

import (
	"errors"
	"strconv"
	"time"
	"unicode/utf8"
)

// MaxPatternLength is the longest pattern Compile accepts, in characters (Unicode code points).
// It is the length constraint of Filter.Pattern in Lambda's API reference.
const MaxPatternLength = 4096

// ErrInvalidPattern is the condition behind every error Compile returns. Its message is the one
// Lambda's CreateEventSourceMapping and UpdateEventSourceMapping put in their
// InvalidParameterValueException, so an API layer can return err.Error() unchanged. (Its capital
// and full stop break Go's convention for error strings on purpose.)
var ErrInvalidPattern = errors.New("Invalid filter pattern definition.")

// PatternError is the error Compile returns for a pattern it rejects. Error() is exactly Lambda's
// "Invalid filter pattern definition."; the fields say what was wrong, for logs and tests, and are
// not part of any AWS response. errors.Is(err, ErrInvalidPattern) holds for every PatternError.
type PatternError struct {
	// Index is the position of the offending pattern in the slice given to Compile.
	Index int
	// Path is the dotted path of the key whose rule is wrong ("data.order.type"), or "" when the
	// problem is the pattern as a whole (too long, not JSON, not an object).
	Path string
	// Reason says which rule the pattern broke, in our words, not AWS's.
	Reason string
}

// Error returns Lambda's message, "Invalid filter pattern definition.".
func (e *PatternError) Error() string { return ErrInvalidPattern.Error() }

// Unwrap returns ErrInvalidPattern.
func (e *PatternError) Unwrap() error { return ErrInvalidPattern }

// Detail returns the position, path and reason in one line, for logs.
func (e *PatternError) Detail() string {
	s := "filter " + strconv.Itoa(e.Index)
	if e.Path != "" {
		s += " at " + e.Path
	}
	return s + ": " + e.Reason
}

// Record is what Match needs of one Kinesis record. Build it straight from the GetRecords result;
// nothing in it is retained after Match returns.
type Record struct {
	// Data is the record's payload as Kinesis returns it: raw bytes, not base64.
	Data []byte
	// PartitionKey is matched by a top-level "partitionKey" rule.
	PartitionKey string
	// SequenceNumber is matched by a top-level "sequenceNumber" rule.
	SequenceNumber string
	// ApproximateArrivalTimestamp is matched by a top-level "approximateArrivalTimestamp" rule, as
	// the number of seconds the Lambda event carries (the zero Time reads as 0, as in the event).
	ApproximateArrivalTimestamp time.Time
}

// Filters is a compiled FilterCriteria: a record passes if any one of its patterns matches. It is
// immutable, so one value may be used by any number of goroutines at once.
type Filters struct {
	patterns []*objNode
}

// Compile compiles the Pattern strings of one FilterCriteria, in order. The patterns are OR-ed:
// a record passes if it matches any of them. An empty or nil slice gives Filters that pass every
// record, as a mapping without FilterCriteria does. Compile does not enforce the number of
// filters (5 by default, 10 with a quota increase); that limit belongs to the API layer.
//
// Compile returns a *PatternError (wrapping ErrInvalidPattern) for the first pattern that breaks
// a rule listed in the package documentation.
func Compile(patterns []string) (*Filters, error) {
	f := &Filters{patterns: make([]*objNode, 0, len(patterns))}
	for i, p := range patterns {
		o, err := compilePattern(p)
		if err != nil {
			err.Index = i
			return nil, err
		}
		f.patterns = append(f.patterns, o)
	}
	return f, nil
}

// Len reports how many patterns f holds; 0 means f passes every record.
func (f *Filters) Len() int {
	if f == nil {
		return 0
	}
	return len(f.patterns)
}

// Match reports whether rec passes f: whether it matches at least one of the patterns. A nil or
// empty f passes every record. Match decodes rec.Data as JSON at most once, and only if a pattern
// has a "data" rule; if Data is not a single valid JSON value, every "data" rule fails, so a
// pattern with a "data" key filters the record out. Match never panics, whatever rec holds, and
// is safe to call concurrently.
func (f *Filters) Match(rec Record) bool {
	if f == nil || len(f.patterns) == 0 {
		return true
	}
	d := recordDoc{rec: rec}
	for _, p := range f.patterns {
		if p.matchTop(&d) {
			return true
		}
	}
	return false
}

// MatchDocument reports whether a record given as its event's JSON object passes f: the patterns'
// top level is matched against that object, key by key (a DynamoDB stream's record: "eventName",
// "dynamodb" with its typed Keys, NewImage and OldImage, and the other keys of the event's record).
// A record that is not a JSON object matches only patterns that exists:false can satisfy. A nil or
// empty f passes every record. Like Match, it never panics and is safe to call concurrently.
func (f *Filters) MatchDocument(doc []byte) bool {
	if f == nil || len(f.patterns) == 0 {
		return true
	}
	v, _ := decodeData(doc)
	m, _ := v.(map[string]any)
	for _, p := range f.patterns {
		if p.matchObj(m) {
			return true
		}
	}
	return false
}

func patternTooLong(p string) bool {
	return len(p) > MaxPatternLength && utf8.RuneCountInString(p) > MaxPatternLength
}
