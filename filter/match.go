package filter

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kinesis-esm/esm/internal/epoch"
)

// recordDoc is the document a pattern's top level is matched against: the fields of the
// record's "kinesis" object in the Lambda event, with data decoded as JSON on first use.
type recordDoc struct {
	rec Record

	parsed bool // data has been looked at
	isJSON bool // data is one valid JSON value
	data   any  // data decoded with json.Number for numbers

	arrival string // approximateArrivalTimestamp as the event renders it, once computed
}

// json returns the decoded data, decoding it on first use, and whether it is valid JSON.
func (d *recordDoc) json() (any, bool) {
	if !d.parsed {
		d.parsed = true
		d.data, d.isJSON = decodeData(d.rec.Data)
	}
	return d.data, d.isJSON
}

func decodeData(b []byte) (any, bool) {
	if !mayBeJSON(b) {
		return nil, false // most non-JSON payloads, without setting up a decoder
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	// A second value or anything but whitespace after the first makes the data not JSON.
	if off := dec.InputOffset(); off < 0 || off > int64(len(b)) || !isJSONSpace(b[off:]) {
		return nil, false
	}
	return v, true
}

// mayBeJSON reports whether b's first non-space byte can start a JSON value.
func mayBeJSON(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return false
	}
	switch c := b[0]; c {
	case '{', '[', '"', '-', 't', 'f', 'n':
		return true
	default:
		return c >= '0' && c <= '9'
	}
}

// meta returns the metadata field a top-level key names. Every record has all of them.
func (d *recordDoc) meta(k topKey) value {
	switch k {
	case topPartitionKey:
		return value{k: kString, s: d.rec.PartitionKey}
	case topSequenceNumber:
		return value{k: kString, s: d.rec.SequenceNumber}
	case topSchemaVersion:
		return value{k: kString, s: "1.0"}
	case topArrival:
		if d.arrival == "" {
			d.arrival = epochSeconds(d.rec.ApproximateArrivalTimestamp)
		}
		return value{k: kNumber, s: d.arrival}
	}
	return value{}
}

// epochSeconds renders t as the Lambda event does: seconds since the epoch as a JSON number with
// Kinesis' milliseconds (internal/epoch), and 0 for the zero Time.
func epochSeconds(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return string(epoch.AppendSeconds(nil, t))
}

// matchTop matches a top-level pattern object (or a branch of one of its "$or"s) against the
// record.
func (o *objNode) matchTop(d *recordDoc) bool {
	for i := range o.fields {
		if !o.fields[i].matchTop(d) {
			return false
		}
	}
	if len(o.or) == 0 {
		return true
	}
	for _, b := range o.or {
		if b.matchTop(d) {
			return true
		}
	}
	return false
}

func (f *field) matchTop(d *recordDoc) bool {
	switch f.top {
	case topData:
		v, ok := d.json()
		return ok && f.sub.matchValue(v) // compile guarantees sub for "data"
	case topUnknown:
		if f.sub != nil {
			return f.sub.matchObj(nil)
		}
		return f.leaf.existsFalse
	}
	// A metadata field: always present, always a leaf.
	if f.sub != nil {
		return f.sub.matchObj(nil)
	}
	return f.leaf.matchOne(d.meta(f.top))
}

// matchValue matches a pattern object against an event value. An event object is matched
// directly. An event array matches if any object in it (at any depth of nested arrays) matches;
// this keeps the keys of one match within one array element. Anything else (a leaf, null, a
// missing key, or an array without objects) is matched as an object with no keys, which only
// rules like exists:false can satisfy.
func (o *objNode) matchValue(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return o.matchObj(t)
	case []any:
		matched, sawObject := o.matchElements(t)
		if matched || sawObject {
			return matched
		}
	}
	return o.matchObj(nil)
}

func (o *objNode) matchElements(arr []any) (matched, sawObject bool) {
	for _, e := range arr {
		switch t := e.(type) {
		case map[string]any:
			sawObject = true
			if o.matchObj(t) {
				return true, true
			}
		case []any:
			m, s := o.matchElements(t)
			if m {
				return true, true
			}
			sawObject = sawObject || s
		}
	}
	return false, sawObject
}

// matchObj matches a pattern object against an event object; nil stands for an object with no
// keys.
func (o *objNode) matchObj(m map[string]any) bool {
	for i := range o.fields {
		f := &o.fields[i]
		v, present := m[f.key]
		if f.sub != nil {
			if !f.sub.matchValue(v) {
				return false
			}
		} else if !f.leaf.match(v, present) {
			return false
		}
	}
	if len(o.or) == 0 {
		return true
	}
	for _, b := range o.or {
		if b.matchObj(m) {
			return true
		}
	}
	return false
}

// match matches a key's rule values against the key's event value. The event value's leaves are
// the value itself if it is a string, number, boolean or null, or the leaves of its elements if it
// is an array; objects have none. exists:true needs a leaf, exists:false needs none, and any other
// rule needs a leaf it accepts.
func (l *leafNode) match(v any, present bool) bool {
	if !present {
		return l.existsFalse
	}
	found, matched := l.scan(v)
	return matched || (!found && l.existsFalse)
}

func (l *leafNode) scan(v any) (found, matched bool) {
	switch t := v.(type) {
	case map[string]any:
		return false, false
	case []any:
		for _, e := range t {
			f, m := l.scan(e)
			if m {
				return true, true
			}
			found = found || f
		}
		return found, false
	}
	return true, l.matchOne(leafValue(v))
}

// matchOne matches the rule values against one leaf value.
func (l *leafNode) matchOne(v value) bool {
	if l.existsTrue {
		return true
	}
	for i := range l.ms {
		if l.ms[i].match(v) {
			return true
		}
	}
	return false
}

type kind uint8

const (
	kOther kind = iota // a value encoding/json should never produce with UseNumber
	kString
	kNumber
	kBool
	kNull
)

// value is a leaf of the event, unboxed so matching it allocates nothing. For numbers s is the
// JSON text.
type value struct {
	k kind
	s string
	b bool
}

func leafValue(v any) value {
	switch t := v.(type) {
	case string:
		return value{k: kString, s: t}
	case json.Number:
		return value{k: kNumber, s: string(t)}
	case bool:
		return value{k: kBool, b: t}
	case nil:
		return value{k: kNull}
	}
	return value{k: kOther}
}

func (m *matcher) match(v value) bool {
	switch m.op {
	case opExactString:
		return v.k == kString && v.s == m.s
	case opExactNumber:
		return v.k == kNumber && v.s == m.s
	case opExactBool:
		return v.k == kBool && v.b == m.b
	case opExactNull:
		return v.k == kNull
	case opPrefix:
		return v.k == kString && strings.HasPrefix(v.s, m.s)
	case opPrefixFold:
		return v.k == kString && hasPrefixFold(v.s, m.s)
	case opSuffix:
		return v.k == kString && strings.HasSuffix(v.s, m.s)
	case opSuffixFold:
		return v.k == kString && hasSuffixFold(v.s, m.s)
	case opEqualsFold:
		return v.k == kString && strings.EqualFold(v.s, m.s)
	case opNumeric:
		n, ok := micro(v)
		return ok && m.inRange(n)
	case opButStrings:
		if v.k == kString {
			_, excluded := m.set[v.s]
			return !excluded
		}
		return true
	case opButNumbers:
		if n, ok := micro(v); ok {
			for _, x := range m.nums {
				if x == n {
					return false
				}
			}
		}
		return true
	case opButPrefix:
		return v.k != kString || !strings.HasPrefix(v.s, m.s)
	case opButSuffix:
		return v.k != kString || !strings.HasSuffix(v.s, m.s)
	case opButFold:
		if v.k == kString {
			for _, s := range m.list {
				if strings.EqualFold(v.s, s) {
					return false
				}
			}
		}
		return true
	}
	return false
}

func (m *matcher) inRange(n int64) bool {
	if m.hasLo && (n < m.lo || (m.loOpen && n == m.lo)) {
		return false
	}
	if m.hasHi && (n > m.hi || (m.hiOpen && n == m.hi)) {
		return false
	}
	return true
}

// micro returns a number leaf in micro-units, if it is within the ±5e9 numeric rules work on.
func micro(v value) (int64, bool) {
	if v.k != kNumber {
		return 0, false
	}
	f, err := strconv.ParseFloat(v.s, 64)
	if err != nil || f < -numericLimit || f > numericLimit {
		return 0, false
	}
	return toMicro(f), true
}

// hasPrefixFold reports whether s begins with prefix under Unicode simple case folding, the
// folding strings.EqualFold uses.
func hasPrefixFold(s, prefix string) bool {
	for prefix != "" {
		if s == "" {
			return false
		}
		pr, pn := utf8.DecodeRuneInString(prefix)
		sr, sn := utf8.DecodeRuneInString(s)
		if !equalFoldRune(pr, sr) {
			return false
		}
		prefix, s = prefix[pn:], s[sn:]
	}
	return true
}

// hasSuffixFold reports whether s ends with suffix under Unicode simple case folding.
func hasSuffixFold(s, suffix string) bool {
	for suffix != "" {
		if s == "" {
			return false
		}
		pr, pn := utf8.DecodeLastRuneInString(suffix)
		sr, sn := utf8.DecodeLastRuneInString(s)
		if !equalFoldRune(pr, sr) {
			return false
		}
		suffix, s = suffix[:len(suffix)-pn], s[:len(s)-sn]
	}
	return true
}

func equalFoldRune(a, b rune) bool {
	if a == b {
		return true
	}
	for f := unicode.SimpleFold(a); f != a; f = unicode.SimpleFold(f) {
		if f == b {
			return true
		}
	}
	return false
}
