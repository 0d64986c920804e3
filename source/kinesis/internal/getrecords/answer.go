package getrecords

import (
	"bufio"
	"bytes"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// quick is what the caller needs of an answer the wire read and decoded itself (peekEmpty): its
// Date header (when it has one; a Date header is 29 bytes) and whether it has an Age header, for
// the clock skew.
type quick struct {
	ok      bool
	date    [32]byte
	dateLen int
	age     bool
}

// peekEmpty decodes into out the answer at the head of br, and discards it, if its head is in
// br's buffer (the whole answer fits in it) and it is the answer of an idle shard: a 200 with a
// Content-Length, no transfer or content encoding, and a body decodeEmpty takes. Anything else is left in br for
// http.ReadResponse and the SDK's protocol; close tells that the answer said Connection: close.
func peekEmpty(br *bufio.Reader, out *kinesis.GetRecordsOutput) (q quick, close bool) {
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 || !bytes.HasPrefix(buf, []byte("HTTP/1.1 200 ")) {
		return quick{}, false
	}
	length := -1
	lines := buf[:end+2]
	_, lines, _ = bytes.Cut(lines, []byte("\r\n")) // the status line
	for len(lines) > 0 {
		var line []byte
		line, lines, _ = bytes.Cut(lines, []byte("\r\n"))
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return quick{}, false
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if length >= 0 || len(v) == 0 || len(v) > 6 {
				return quick{}, false
			}
			length = 0
			for _, c := range v {
				if c < '0' || c > '9' {
					return quick{}, false
				}
				length = length*10 + int(c-'0')
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")), bytes.EqualFold(k, []byte("Content-Encoding")), bytes.EqualFold(k, []byte("Trailer")):
			return quick{}, false
		case bytes.EqualFold(k, []byte("Connection")):
			switch {
			case bytes.EqualFold(v, []byte("close")):
				close = true
			case !bytes.EqualFold(v, []byte("keep-alive")):
				return quick{}, false
			}
		case bytes.EqualFold(k, []byte("Date")):
			if q.dateLen > 0 || len(v) > len(q.date) {
				return quick{}, false
			}
			q.dateLen = copy(q.date[:], v)
		case bytes.EqualFold(k, []byte("Age")):
			q.age = true
		}
	}
	if length < 0 || end+4+length > br.Size() {
		return quick{}, false
	}
	if end+4+length > len(buf) { // the body is on its way (a TLS record of its own, say)
		var err error
		if buf, err = br.Peek(end + 4 + length); err != nil {
			return quick{}, false
		}
	}
	if !decodeEmpty(buf[end+4:end+4+length], out) {
		return quick{}, false
	}
	_, _ = br.Discard(end + 4 + length)
	q.ok = true
	return q, close
}

// decodeEmpty decodes body into out if it is an answer with no records and a next iterator of
// characters JSON writes as they are: {"Records":[],"NextShardIterator":"…","MillisBehindLatest":N}
// with its members in any order and JSON's white space, Records or ChildShards null, and other
// members the SDK skips (skipValue). It reports false, and leaves out as it was, for anything else
// (records, child shards, escapes in strings, numbers other than integers), which the SDK's
// protocol decodes.
func decodeEmpty(body []byte, out *kinesis.GetRecordsOutput) bool {
	a, ok := scanIdle(body, "NextShardIterator")
	if !ok || !a.hasRecords {
		return false
	}
	next, behind := string(a.position), a.behind
	if a.records {
		out.Records = []types.Record{}
	}
	out.NextShardIterator = &next
	out.MillisBehindLatest = &behind
	return true
}

// idleAnswer is what scanIdle read.
type idleAnswer struct {
	position   []byte // the value of the position member (the next iterator, the continuation)
	behind     int64  // MillisBehindLatest
	records    bool   // Records is [] (rather than null)
	hasRecords bool   // Records is there
}

// scanIdle reads the JSON object of an idle shard's answer or event: Records [] or null,
// position (the member naming where reading goes on) a string without escapes, MillisBehindLatest
// an integer, ChildShards null, each at most once, in any order, with JSON's white space, and other
// members the SDK skips. It reports false for anything else, and when position or
// MillisBehindLatest is missing.
func scanIdle(body []byte, position string) (a idleAnswer, ok bool) {
	p := jsonScan{b: body}
	var seen [4]bool
	if !p.byte('{') {
		return a, false
	}
	for first := true; !p.byte('}'); first = false {
		if !first && !p.byte(',') {
			return a, false
		}
		key, ok := p.plainString()
		if !ok || !p.byte(':') {
			return a, false
		}
		i := -1
		switch string(key) {
		case "Records":
			i = 0
		case position:
			i = 1
		case "MillisBehindLatest":
			i = 2
		case "ChildShards":
			i = 3
		}
		if i >= 0 {
			if seen[i] {
				return a, false
			}
			seen[i] = true
		}
		switch i {
		case -1:
			ok = p.skipValue(0)
		case 0:
			a.records = p.byte('[')
			ok = (a.records && p.byte(']')) || (!a.records && p.literal("null"))
		case 1:
			a.position, ok = p.plainString()
		case 2:
			a.behind, ok = p.integer()
		case 3:
			ok = p.literal("null")
		}
		if !ok {
			return a, false
		}
	}
	p.space()
	a.hasRecords = seen[0]
	return a, p.i == len(p.b) && seen[1] && seen[2]
}

// jsonScan reads the few JSON forms decodeEmpty takes.
type jsonScan struct {
	b []byte
	i int
}

func (p *jsonScan) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

// byte consumes c, after white space.
func (p *jsonScan) byte(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// plainString consumes a string without escapes or control characters and returns its content.
func (p *jsonScan) plainString() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			return p.b[start : p.i-1], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// integer consumes a non-negative integer of at most 15 digits (no fraction or exponent).
func (p *jsonScan) integer() (int64, bool) {
	p.space()
	start := p.i
	var n int64
	for ; p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9'; p.i++ {
		n = n*10 + int64(p.b[p.i]-'0')
	}
	digits := p.i - start
	if digits == 0 || digits > 15 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	return n, true
}

// literal consumes word (null, true, false), after white space.
func (p *jsonScan) literal(word string) bool {
	p.space()
	if bytes.HasPrefix(p.b[p.i:], []byte(word)) {
		p.i += len(word)
		return true
	}
	return false
}

// skipValue consumes a value of a member the SDK does not decode: an object, an array, a string
// without escapes, an integer or a literal, nested at most 8 deep.
func (p *jsonScan) skipValue(depth int) bool {
	if depth > 8 {
		return false
	}
	p.space()
	if p.i == len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '{' || c == '[':
		p.i++
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		for first := true; !p.byte(end); first = false {
			if !first && !p.byte(',') {
				return false
			}
			if c == '{' {
				if _, ok := p.plainString(); !ok || !p.byte(':') {
					return false
				}
			}
			if !p.skipValue(depth + 1) {
				return false
			}
		}
		return true
	case c == '"':
		_, ok := p.plainString()
		return ok
	case c == '-':
		p.i++
		_, ok := p.integer()
		return ok
	case c >= '0' && c <= '9':
		_, ok := p.integer()
		return ok
	}
	return p.literal("null") || p.literal("true") || p.literal("false")
}
