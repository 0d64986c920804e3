package fakedynamo

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's expressions are parsed and evaluated here and in the files beside: this file holds
// what every kind shares (tokens, expression attribute names #n and values :v, document paths
// a.b[2].c); operand.go the operands, condition.go condition, filter and key condition
// expressions, update.go update expressions and projection.go projections.

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tName  // #name
	tValue // :value
	tNum   // [n] index digits
	tOp    // = <> < <= > >= + -
	tLParen
	tRParen
	tLBrack
	tRBrack
	tComma
	tDot
)

type token struct {
	kind tokKind
	s    string
}

func tokenize(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			out, i = append(out, token{tLParen, "("}), i+1
		case c == ')':
			out, i = append(out, token{tRParen, ")"}), i+1
		case c == '[':
			out, i = append(out, token{tLBrack, "["}), i+1
		case c == ']':
			out, i = append(out, token{tRBrack, "]"}), i+1
		case c == ',':
			out, i = append(out, token{tComma, ","}), i+1
		case c == '.':
			out, i = append(out, token{tDot, "."}), i+1
		case c == '=' || c == '+' || c == '-':
			out, i = append(out, token{tOp, string(c)}), i+1
		case c == '<':
			if i+1 < len(s) && (s[i+1] == '=' || s[i+1] == '>') {
				out, i = append(out, token{tOp, s[i : i+2]}), i+2
			} else {
				out, i = append(out, token{tOp, "<"}), i+1
			}
		case c == '>':
			if i+1 < len(s) && s[i+1] == '=' {
				out, i = append(out, token{tOp, ">="}), i+2
			} else {
				out, i = append(out, token{tOp, ">"}), i+1
			}
		case c == '#' || c == ':':
			j := i + 1
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			if j == i+1 {
				return nil, fmt.Errorf("Invalid expression: syntax error near %q", s[i:])
			}
			k := tName
			if c == ':' {
				k = tValue
			}
			out, i = append(out, token{k, s[i:j]}), j
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			out, i = append(out, token{tNum, s[i:j]}), j
		case isIdentChar(c):
			j := i
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			out, i = append(out, token{tIdent, s[i:j]}), j
		default:
			return nil, fmt.Errorf("Invalid expression: unexpected character %q", c)
		}
	}
	return append(out, token{tEOF, ""}), nil
}

func isIdentChar(c byte) bool {
	return c == '_' || c < 0x80 && (unicode.IsLetter(rune(c)) || unicode.IsDigit(rune(c)))
}

// reserved words that may not be used as bare attribute names (the ones expressions are most
// likely to trip over; DynamoDB reserves several hundred).
var reserved = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "BETWEEN": true, "IN": true, "SET": true, "REMOVE": true,
	"ADD": true, "DELETE": true, "SIZE": true, "KEY": true, "VALUE": true, "NAME": true, "COUNT": true,
	"STATUS": true, "DATA": true, "OWNER": true, "TIMESTAMP": true, "COMMENT": true, "TYPE": true,
}

// env resolves expression attribute names and values and records which were used: DynamoDB
// rejects unused ones.
type env struct {
	names      map[string]string
	values     map[string]types.AttributeValue
	usedNames  map[string]bool
	usedValues map[string]bool
}

func newEnv(names map[string]string, values map[string]types.AttributeValue) *env {
	return &env{names: names, values: values, usedNames: map[string]bool{}, usedValues: map[string]bool{}}
}

// checkUnused fails like DynamoDB when a name or value was supplied but no expression used it.
func (e *env) checkUnused() error {
	for n := range e.names {
		if !e.usedNames[n] {
			return validation("Value provided in ExpressionAttributeNames unused in expressions: keys: {%s}", n)
		}
	}
	for v := range e.values {
		if !e.usedValues[v] {
			return validation("Value provided in ExpressionAttributeValues unused in expressions: keys: {%s}", v)
		}
	}
	return nil
}

type parser struct {
	toks []token
	pos  int
	env  *env
}

func newParser(s string, e *env) (*parser, error) {
	toks, err := tokenize(s)
	if err != nil {
		return nil, err
	}
	return &parser{toks: toks, env: e}, nil
}

func (p *parser) peek() token { return p.toks[p.pos] }
func (p *parser) next() token { t := p.toks[p.pos]; p.pos++; return t }
func (p *parser) keyword(w string) bool {
	t := p.peek()
	return t.kind == tIdent && strings.EqualFold(t.s, w)
}

func (p *parser) expect(k tokKind, what string) error {
	if p.peek().kind != k {
		return fmt.Errorf("Invalid expression: expected %s near %q", what, p.peek().s)
	}
	p.pos++
	return nil
}

// pathElem is one step of a document path: an attribute or map key (name) or a list index.
type pathElem struct {
	name  string
	index int // when name == ""
}

type path []pathElem

func (pa path) String() string {
	var b strings.Builder
	for i, e := range pa {
		switch {
		case e.name != "" && i > 0:
			b.WriteString("." + e.name)
		case e.name != "":
			b.WriteString(e.name)
		default:
			fmt.Fprintf(&b, "[%d]", e.index)
		}
	}
	return b.String()
}

func (p *parser) parsePath() (path, error) {
	var pa path
	first := true
	for {
		t := p.next()
		var name string
		switch t.kind {
		case tName:
			n, ok := p.env.names[t.s]
			if !ok {
				return nil, validation("Value provided in ExpressionAttributeNames unused in expressions, or undefined: An expression attribute name used in the document path is not defined; attribute name: %s", t.s)
			}
			p.env.usedNames[t.s] = true
			name = n
		case tIdent:
			if reserved[strings.ToUpper(t.s)] {
				return nil, validation("Invalid expression: Attribute name is a reserved keyword; reserved keyword: %s", t.s)
			}
			name = t.s
		default:
			if first {
				return nil, fmt.Errorf("Invalid expression: expected an attribute path near %q", t.s)
			}
			return nil, fmt.Errorf("Invalid expression: expected a name after '.' near %q", t.s)
		}
		pa = append(pa, pathElem{name: name})
		first = false
		for p.peek().kind == tLBrack {
			p.next()
			n := p.next()
			if n.kind != tNum {
				return nil, fmt.Errorf("Invalid expression: expected a list index near %q", n.s)
			}
			idx, _ := strconv.Atoi(n.s)
			pa = append(pa, pathElem{index: idx})
			if err := p.expect(tRBrack, "]"); err != nil {
				return nil, err
			}
		}
		if p.peek().kind != tDot {
			return pa, nil
		}
		p.next()
	}
}
