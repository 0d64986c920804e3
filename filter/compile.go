package filter

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The compiled form of a pattern is a tree that mirrors the pattern's JSON: an objNode per JSON
// object, a field per key, and a leafNode per array of rule values.

// objNode is one pattern object: every field must match (AND), and if the object had a "$or"
// key, at least one of its branches must match too. Branches are objNodes matched against the
// same event object as their parent.
type objNode struct {
	fields []field
	or     []*objNode
}

// field is one key of a pattern object. Exactly one of sub and leaf is set.
type field struct {
	key  string
	top  topKey    // which record field a top-level key names; topNone below the top level
	sub  *objNode  // the key's pattern value was an object
	leaf *leafNode // the key's pattern value was an array of rule values
}

// topKey is what a key of the top-level pattern object refers to in a Kinesis record.
type topKey uint8

const (
	topNone topKey = iota // not at the top level
	topData
	topPartitionKey
	topSequenceNumber
	topSchemaVersion
	topArrival
	topUnknown // any other top-level key: absent from every record
)

var topKeys = map[string]topKey{
	"data":                        topData,
	"partitionKey":                topPartitionKey,
	"sequenceNumber":              topSequenceNumber,
	"kinesisSchemaVersion":        topSchemaVersion,
	"approximateArrivalTimestamp": topArrival,
}

// leafNode is the array of rule values for one key: it matches if any rule matches (OR).
type leafNode struct {
	ms          []matcher
	existsTrue  bool // [{"exists": true}] is among the rules
	existsFalse bool // [{"exists": false}] is among the rules
}

type opKind uint8

const (
	opExactString opKind = iota + 1
	opExactNumber        // compared as JSON text
	opExactBool
	opExactNull
	opPrefix
	opPrefixFold
	opSuffix
	opSuffixFold
	opEqualsFold
	opNumeric
	opButStrings
	opButNumbers
	opButPrefix
	opButSuffix
	opButFold
)

// matcher is one rule value other than exists. Numbers in numeric and anything-but rules are held
// in micro-units (value × 10⁶, rounded), the precision AWS documents for numeric matching.
type matcher struct {
	op   opKind
	s    string              // exact string, number text, prefix, suffix, equals-ignore-case
	b    bool                // exact boolean
	set  map[string]struct{} // anything-but strings
	list []string            // anything-but equals-ignore-case strings
	nums []int64             // anything-but numbers

	lo, hi         int64 // numeric bounds
	hasLo, hasHi   bool
	loOpen, hiOpen bool // bound excluded (> or <) rather than included (>= or <=)
}

// Numeric rules work on numbers in [-5e9, 5e9], compared to six decimal places (EventBridge's
// documented limits).
const (
	numericLimit = 5e9
	microPerUnit = 1e6
)

// orKey is the key that introduces an OR across keys.
const orKey = "$or"

// reservedInOr are the key names the rule engine behind EventBridge (aws/event-ruler) refuses
// inside a "$or" branch, because they are operator names.
var reservedInOr = map[string]bool{
	"exactly": true, "equals-ignore-case": true, "prefix": true, "suffix": true,
	"anything-but": true, "exists": true, "wildcard": true, "numeric": true, "cidr": true,
	"=": true, "<": true, "<=": true, ">": true, ">=": true,
	"regex": true, "not-wildcard": true, "not-equals-ignore-case": true,
	"date-after": true, "date-on-or-after": true, "date-before": true, "date-on-or-before": true,
	"in-date-range": true, "ip-address-in-range": true, "ip-address-not-in-range": true,
}

// compilePattern compiles one Pattern string. The returned error's Index is left for the caller.
func compilePattern(p string) (*objNode, *PatternError) {
	if patternTooLong(p) {
		return nil, &PatternError{Reason: "pattern is longer than " + strconv.Itoa(MaxPatternLength) + " characters"}
	}
	if !json.Valid([]byte(p)) {
		return nil, &PatternError{Reason: "pattern is not valid JSON"}
	}
	dec := json.NewDecoder(strings.NewReader(p))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &PatternError{Reason: "pattern is not valid JSON"}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &PatternError{Reason: "pattern is not a JSON object"}
	}
	c := compiler{}
	return c.object(m, true, false)
}

// compiler carries the path of the key being compiled, for error messages.
type compiler struct {
	path []string
}

func (c *compiler) fail(format string) *PatternError {
	return &PatternError{Path: strings.Join(c.path, "."), Reason: format}
}

// object compiles a pattern object. top is set for the pattern's top-level object and the
// branches of its "$or"s; inOr is set anywhere inside a "$or" branch.
func (c *compiler) object(m map[string]any, top, inOr bool) (*objNode, *PatternError) {
	if len(m) == 0 {
		return nil, c.fail("empty object")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // map order is random; evaluate and report errors deterministically
	o := &objNode{}
	for _, k := range keys {
		v := m[k]
		if k == orKey {
			or, err := c.or(v, top)
			if err != nil {
				return nil, err
			}
			o.or = or
			continue
		}
		c.path = append(c.path, k)
		f, err := c.field(k, v, top, inOr)
		c.path = c.path[:len(c.path)-1]
		if err != nil {
			return nil, err
		}
		o.fields = append(o.fields, f)
	}
	return o, nil
}

func (c *compiler) field(k string, v any, top, inOr bool) (field, *PatternError) {
	f := field{key: k}
	if inOr && reservedInOr[k] {
		return f, c.fail(`"` + k + `" is an operator name and cannot be a key inside "$or"`)
	}
	if top {
		f.top = topUnknown
		if t, ok := topKeys[k]; ok {
			f.top = t
		}
	}
	switch t := v.(type) {
	case map[string]any:
		sub, err := c.object(t, false, inOr)
		if err != nil {
			return f, err
		}
		f.sub = sub
	case []any:
		if f.top == topData {
			return f, c.fail(`the "data" rule must be a JSON object: Kinesis record data can only be filtered as JSON`)
		}
		leaf, err := c.leaf(t)
		if err != nil {
			return f, err
		}
		f.leaf = leaf
	default:
		return f, c.fail("a key's value must be an object or an array")
	}
	return f, nil
}

func (c *compiler) or(v any, top bool) ([]*objNode, *PatternError) {
	c.path = append(c.path, orKey)
	defer func() { c.path = c.path[:len(c.path)-1] }()
	arr, ok := v.([]any)
	if !ok {
		return nil, c.fail(`"$or" must be an array of objects`)
	}
	if len(arr) < 2 {
		return nil, c.fail(`"$or" needs at least two objects`)
	}
	branches := make([]*objNode, 0, len(arr))
	for _, e := range arr {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, c.fail(`"$or" may contain only objects`)
		}
		b, err := c.object(m, top, true)
		if err != nil {
			return nil, err
		}
		branches = append(branches, b)
	}
	return branches, nil
}

func (c *compiler) leaf(arr []any) (*leafNode, *PatternError) {
	if len(arr) == 0 {
		return nil, c.fail("empty array")
	}
	l := &leafNode{}
	for _, e := range arr {
		switch t := e.(type) {
		case string:
			l.ms = append(l.ms, matcher{op: opExactString, s: t})
		case json.Number:
			l.ms = append(l.ms, matcher{op: opExactNumber, s: t.String()})
		case bool:
			l.ms = append(l.ms, matcher{op: opExactBool, b: t})
		case nil:
			l.ms = append(l.ms, matcher{op: opExactNull})
		case map[string]any:
			if err := c.operator(l, t); err != nil {
				return nil, err
			}
		default: // a nested array
			return nil, c.fail("a rule value must be a string, number, boolean, null or operator object")
		}
	}
	return l, nil
}

// operator compiles one {"<operator>": operand} rule value into l.
func (c *compiler) operator(l *leafNode, m map[string]any) *PatternError {
	if len(m) != 1 {
		return c.fail("an operator object must have exactly one key")
	}
	for name, v := range m {
		switch name {
		case "exists":
			b, ok := v.(bool)
			if !ok {
				return c.fail("exists: operand must be true or false")
			}
			if b {
				l.existsTrue = true
			} else {
				l.existsFalse = true
			}
		case "prefix", "suffix":
			mt, err := c.affix(name, v)
			if err != nil {
				return err
			}
			l.ms = append(l.ms, mt)
		case "equals-ignore-case":
			s, ok := v.(string)
			if !ok {
				return c.fail("equals-ignore-case: operand must be a string")
			}
			l.ms = append(l.ms, matcher{op: opEqualsFold, s: s})
		case "numeric":
			mt, err := c.numeric(v)
			if err != nil {
				return err
			}
			l.ms = append(l.ms, mt)
		case "anything-but":
			mt, err := c.anythingBut(v)
			if err != nil {
				return err
			}
			l.ms = append(l.ms, mt)
		default:
			return c.fail(`unsupported operator "` + name + `"`)
		}
	}
	return nil
}

// affix compiles {"prefix": ...} or {"suffix": ...}: a string, or {"equals-ignore-case": string}.
func (c *compiler) affix(name string, v any) (matcher, *PatternError) {
	plain, fold := opPrefix, opPrefixFold
	if name == "suffix" {
		plain, fold = opSuffix, opSuffixFold
	}
	switch t := v.(type) {
	case string:
		return matcher{op: plain, s: t}, nil
	case map[string]any:
		if s, ok := t["equals-ignore-case"].(string); ok && len(t) == 1 {
			return matcher{op: fold, s: s}, nil
		}
	}
	return matcher{}, c.fail(name + `: operand must be a string or {"equals-ignore-case": string}`)
}

// numeric compiles ["=", n], ["<" or "<=", n], [">" or ">=", n] and
// [">" or ">=", n, "<" or "<=", m] with n < m.
func (c *compiler) numeric(v any) (matcher, *PatternError) {
	arr, ok := v.([]any)
	if !ok || (len(arr) != 2 && len(arr) != 4) {
		return matcher{}, c.fail("numeric: operand must be an array of one or two operator, number pairs")
	}
	op1, _ := arr[0].(string)
	f1, n1, err := c.number(arr[1], "numeric")
	if err != nil {
		return matcher{}, err
	}
	m := matcher{op: opNumeric}
	switch op1 {
	case "=":
		m.lo, m.hi, m.hasLo, m.hasHi = n1, n1, true, true
	case "<", "<=":
		m.hi, m.hasHi, m.hiOpen = n1, true, op1 == "<"
	case ">", ">=":
		m.lo, m.hasLo, m.loOpen = n1, true, op1 == ">"
	default:
		return matcher{}, c.fail("numeric: unknown operator")
	}
	if len(arr) == 2 {
		return m, nil
	}
	if !m.hasLo || m.hasHi {
		return matcher{}, c.fail(`numeric: only a lower bound (">" or ">=") may be followed by an upper bound`)
	}
	op2, _ := arr[2].(string)
	if op2 != "<" && op2 != "<=" {
		return matcher{}, c.fail(`numeric: the second operator must be "<" or "<="`)
	}
	f2, n2, err := c.number(arr[3], "numeric")
	if err != nil {
		return matcher{}, err
	}
	if f1 >= f2 {
		return matcher{}, c.fail("numeric: the lower bound must be less than the upper bound")
	}
	m.hi, m.hasHi, m.hiOpen = n2, true, op2 == "<"
	return m, nil
}

// number reads a numeric operand: a JSON number within ±5e9. It returns the value and its
// micro-unit form.
func (c *compiler) number(v any, op string) (float64, int64, *PatternError) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, 0, c.fail(op + ": operand must be a number")
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || math.IsNaN(f) || f < -numericLimit || f > numericLimit {
		return 0, 0, c.fail(op + ": number must be between -5e9 and 5e9")
	}
	return f, toMicro(f), nil
}

// anythingBut compiles the operand of anything-but: a string, a number, a non-empty array of
// only strings or only numbers, or an object {"prefix": s}, {"suffix": s} (s not empty) or
// {"equals-ignore-case": string or array of strings}.
func (c *compiler) anythingBut(v any) (matcher, *PatternError) {
	switch t := v.(type) {
	case string:
		return matcher{op: opButStrings, set: map[string]struct{}{t: {}}}, nil
	case json.Number:
		_, n, err := c.number(t, "anything-but")
		if err != nil {
			return matcher{}, err
		}
		return matcher{op: opButNumbers, nums: []int64{n}}, nil
	case []any:
		return c.anythingButList(t)
	case map[string]any:
		if len(t) != 1 {
			return matcher{}, c.fail("anything-but: an operator object must have exactly one key")
		}
		for name, operand := range t {
			switch name {
			case "prefix", "suffix":
				s, ok := operand.(string)
				if !ok || s == "" {
					return matcher{}, c.fail("anything-but: " + name + " must be a non-empty string")
				}
				if name == "prefix" {
					return matcher{op: opButPrefix, s: s}, nil
				}
				return matcher{op: opButSuffix, s: s}, nil
			case "equals-ignore-case":
				return c.anythingButFold(operand)
			}
			return matcher{}, c.fail(`anything-but: unsupported operator "` + name + `"`)
		}
	}
	return matcher{}, c.fail("anything-but: operand must be a string, a number, an array of strings or of numbers, or an operator object")
}

func (c *compiler) anythingButList(arr []any) (matcher, *PatternError) {
	if len(arr) == 0 {
		return matcher{}, c.fail("anything-but: empty array")
	}
	if _, ok := arr[0].(string); ok {
		set := make(map[string]struct{}, len(arr))
		for _, e := range arr {
			s, ok := e.(string)
			if !ok {
				return matcher{}, c.fail("anything-but: an array must hold only strings or only numbers")
			}
			set[s] = struct{}{}
		}
		return matcher{op: opButStrings, set: set}, nil
	}
	nums := make([]int64, 0, len(arr))
	for _, e := range arr {
		if _, ok := e.(json.Number); !ok {
			return matcher{}, c.fail("anything-but: an array must hold only strings or only numbers")
		}
		_, n, err := c.number(e, "anything-but")
		if err != nil {
			return matcher{}, err
		}
		nums = append(nums, n)
	}
	return matcher{op: opButNumbers, nums: nums}, nil
}

func (c *compiler) anythingButFold(v any) (matcher, *PatternError) {
	switch t := v.(type) {
	case string:
		return matcher{op: opButFold, list: []string{t}}, nil
	case []any:
		if len(t) == 0 {
			break
		}
		list := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return matcher{}, c.fail("anything-but: equals-ignore-case takes only strings")
			}
			list = append(list, s)
		}
		return matcher{op: opButFold, list: list}, nil
	}
	return matcher{}, c.fail("anything-but: equals-ignore-case takes a string or a non-empty array of strings")
}

// toMicro converts a number already known to be within ±5e9 to micro-units.
func toMicro(f float64) int64 { return int64(math.Round(f * microPerUnit)) }

// isJSONSpace reports whether b holds only JSON whitespace.
func isJSONSpace(b []byte) bool {
	return len(bytes.TrimLeft(b, " \t\r\n")) == 0
}
