package fakedynamo

import (
	"bytes"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// This file parses and evaluates DynamoDB expressions: condition (and filter) expressions,
// update expressions, projection expressions and key conditions, with expression attribute
// names (#n) and values (:v), document paths (a.b[2].c) and the functions DynamoDB defines.

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

// operand is a value in an expression: a path, a :value, a function call or arithmetic.
type operand interface {
	eval(item map[string]types.AttributeValue) (types.AttributeValue, error)
}

type pathOp struct{ p path }

func (o pathOp) eval(item map[string]types.AttributeValue) (types.AttributeValue, error) {
	return lookup(item, o.p), nil
}

type valueOp struct{ v types.AttributeValue }

func (o valueOp) eval(map[string]types.AttributeValue) (types.AttributeValue, error) { return o.v, nil }

type sizeOp struct{ p path }

func (o sizeOp) eval(item map[string]types.AttributeValue) (types.AttributeValue, error) {
	v := lookup(item, o.p)
	var n int
	switch v := v.(type) {
	case nil:
		return nil, nil
	case *types.AttributeValueMemberS:
		n = len(v.Value)
	case *types.AttributeValueMemberB:
		n = len(v.Value)
	case *types.AttributeValueMemberSS:
		n = len(v.Value)
	case *types.AttributeValueMemberNS:
		n = len(v.Value)
	case *types.AttributeValueMemberBS:
		n = len(v.Value)
	case *types.AttributeValueMemberL:
		n = len(v.Value)
	case *types.AttributeValueMemberM:
		n = len(v.Value)
	default:
		return nil, nil
	}
	return &types.AttributeValueMemberN{Value: strconv.Itoa(n)}, nil
}

type ifNotExistsOp struct {
	p   path
	alt operand
}

func (o ifNotExistsOp) eval(item map[string]types.AttributeValue) (types.AttributeValue, error) {
	if v := lookup(item, o.p); v != nil {
		return v, nil
	}
	return o.alt.eval(item)
}

type listAppendOp struct{ a, b operand }

func (o listAppendOp) eval(item map[string]types.AttributeValue) (types.AttributeValue, error) {
	a, b, err := evalBoth(item, o.a, o.b)
	if err != nil {
		return nil, err
	}
	la, ok1 := a.(*types.AttributeValueMemberL)
	lb, ok2 := b.(*types.AttributeValueMemberL)
	if !ok1 || !ok2 {
		return nil, validation("An operand in the update expression has an incorrect data type")
	}
	return &types.AttributeValueMemberL{Value: append(slices.Clone(la.Value), lb.Value...)}, nil
}

// evalBoth evaluates the two operands of a binary operation, left first.
func evalBoth(item map[string]types.AttributeValue, x, y operand) (a, b types.AttributeValue, err error) {
	if a, err = x.eval(item); err != nil {
		return nil, nil, err
	}
	if b, err = y.eval(item); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

type arithOp struct {
	op   string
	a, b operand
}

func (o arithOp) eval(item map[string]types.AttributeValue) (types.AttributeValue, error) {
	a, b, err := evalBoth(item, o.a, o.b)
	if err != nil {
		return nil, err
	}
	if a == nil || b == nil {
		return nil, validation("The provided expression refers to an attribute that does not exist in the item")
	}
	na, ok1 := a.(*types.AttributeValueMemberN)
	nb, ok2 := b.(*types.AttributeValueMemberN)
	if !ok1 || !ok2 {
		return nil, validation("An operand in the update expression has an incorrect data type")
	}
	x, y, err := parseNums(na.Value, nb.Value)
	if err != nil {
		return nil, err
	}
	if o.op == "+" {
		x.Add(x, y)
	} else {
		x.Sub(x, y)
	}
	return &types.AttributeValueMemberN{Value: formatNum(x)}, nil
}

func parseNums(a, b string) (*big.Rat, *big.Rat, error) {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	if !ok1 || !ok2 {
		return nil, nil, validation("The parameter cannot be converted to a numeric value")
	}
	return x, y, nil
}

func formatNum(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	s := r.FloatString(38)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

func (p *parser) parseValueRef() (types.AttributeValue, error) {
	t := p.next()
	v, ok := p.env.values[t.s]
	if !ok {
		return nil, validation("Invalid expression: An expression attribute value used in expression is not defined; attribute value: %s", t.s)
	}
	p.env.usedValues[t.s] = true
	return v, nil
}

// parseOperand parses a condition operand: a path, a value or size(path).
func (p *parser) parseOperand() (operand, error) {
	t := p.peek()
	switch {
	case t.kind == tValue:
		v, err := p.parseValueRef()
		return valueOp{v}, err
	case t.kind == tIdent && strings.EqualFold(t.s, "size") && p.toks[p.pos+1].kind == tLParen:
		p.pos += 2
		pa, err := p.parsePath()
		if err != nil {
			return nil, err
		}
		return sizeOp{pa}, p.expect(tRParen, ")")
	}
	pa, err := p.parsePath()
	return pathOp{pa}, err
}

// parseSetValue parses the right-hand side of SET: operand [+|- operand], where operands may be
// if_not_exists(path, value) and list_append(a, b).
func (p *parser) parseSetValue() (operand, error) {
	a, err := p.parseSetOperand()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == tOp && (t.s == "+" || t.s == "-") {
		p.next()
		b, err := p.parseSetOperand()
		if err != nil {
			return nil, err
		}
		return arithOp{t.s, a, b}, nil
	}
	return a, nil
}

func (p *parser) parseSetOperand() (operand, error) {
	t := p.peek()
	if t.kind == tIdent && p.toks[p.pos+1].kind == tLParen {
		switch strings.ToLower(t.s) {
		case "if_not_exists":
			p.pos += 2
			pa, err := p.parsePath()
			if err != nil {
				return nil, err
			}
			alt, err := p.lastArgument()
			return ifNotExistsOp{pa, alt}, err
		case "list_append":
			p.pos += 2
			a, err := p.parseSetOperand()
			if err != nil {
				return nil, err
			}
			b, err := p.lastArgument()
			return listAppendOp{a, b}, err
		default:
			return nil, validation("Invalid UpdateExpression: Invalid function name; function: %s", t.s)
		}
	}
	if t.kind == tValue {
		v, err := p.parseValueRef()
		return valueOp{v}, err
	}
	pa, err := p.parsePath()
	return pathOp{pa}, err
}

// lastArgument parses ", operand)": the second and last argument of a SET function.
func (p *parser) lastArgument() (operand, error) {
	if err := p.expect(tComma, ","); err != nil {
		return nil, err
	}
	b, err := p.parseSetOperand()
	if err != nil {
		return nil, err
	}
	return b, p.expect(tRParen, ")")
}

// cond is a parsed condition.
type cond interface {
	eval(item map[string]types.AttributeValue) (bool, error)
}

type andCond struct{ a, b cond }
type orCond struct{ a, b cond }
type notCond struct{ a cond }

func (c andCond) eval(it map[string]types.AttributeValue) (bool, error) {
	a, err := c.a.eval(it)
	if err != nil || !a {
		return false, err
	}
	return c.b.eval(it)
}

func (c orCond) eval(it map[string]types.AttributeValue) (bool, error) {
	a, err := c.a.eval(it)
	if err != nil || a {
		return a, err
	}
	return c.b.eval(it)
}

func (c notCond) eval(it map[string]types.AttributeValue) (bool, error) {
	a, err := c.a.eval(it)
	return !a, err
}

type cmpCond struct {
	op   string
	a, b operand
}

func (c cmpCond) eval(it map[string]types.AttributeValue) (bool, error) {
	a, err := c.a.eval(it)
	if err != nil {
		return false, err
	}
	b, err := c.b.eval(it)
	if err != nil {
		return false, err
	}
	if a == nil || b == nil {
		return false, nil // a missing attribute compares false, even with <>
	}
	if c.op == "=" {
		return equal(a, b), nil
	}
	if c.op == "<>" {
		return !equal(a, b), nil
	}
	n, ok := compare(a, b)
	if !ok {
		return false, nil
	}
	switch c.op {
	case "<":
		return n < 0, nil
	case "<=":
		return n <= 0, nil
	case ">":
		return n > 0, nil
	case ">=":
		return n >= 0, nil
	}
	return false, fmt.Errorf("operator %s", c.op)
}

type betweenCond struct{ a, lo, hi operand }

func (c betweenCond) eval(it map[string]types.AttributeValue) (bool, error) {
	ge, err := cmpCond{">=", c.a, c.lo}.eval(it)
	if err != nil || !ge {
		return false, err
	}
	return cmpCond{"<=", c.a, c.hi}.eval(it)
}

type inCond struct {
	a    operand
	list []operand
}

func (c inCond) eval(it map[string]types.AttributeValue) (bool, error) {
	for _, o := range c.list {
		if ok, err := (cmpCond{"=", c.a, o}).eval(it); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

type funcCond struct {
	name string
	p    path
	arg  operand
}

func (c funcCond) eval(it map[string]types.AttributeValue) (bool, error) {
	v := lookup(it, c.p)
	switch c.name {
	case "attribute_exists":
		return v != nil, nil
	case "attribute_not_exists":
		return v == nil, nil
	}
	arg, err := c.arg.eval(it)
	if err != nil || v == nil || arg == nil {
		return false, err
	}
	switch c.name {
	case "attribute_type":
		s, ok := arg.(*types.AttributeValueMemberS)
		if !ok {
			return false, validation("Invalid ConditionExpression: Incorrect operand type for operator or function; operator or function: attribute_type")
		}
		return typeName(v) == s.Value, nil
	case "begins_with":
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			s, ok := arg.(*types.AttributeValueMemberS)
			return ok && strings.HasPrefix(v.Value, s.Value), nil
		case *types.AttributeValueMemberB:
			b, ok := arg.(*types.AttributeValueMemberB)
			return ok && bytes.HasPrefix(v.Value, b.Value), nil
		}
		return false, nil
	case "contains":
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			s, ok := arg.(*types.AttributeValueMemberS)
			return ok && strings.Contains(v.Value, s.Value), nil
		case *types.AttributeValueMemberSS:
			s, ok := arg.(*types.AttributeValueMemberS)
			return ok && slices.Contains(v.Value, s.Value), nil
		case *types.AttributeValueMemberNS:
			n, ok := arg.(*types.AttributeValueMemberN)
			return ok && slices.ContainsFunc(v.Value, func(x string) bool { return numEqual(x, n.Value) }), nil
		case *types.AttributeValueMemberL:
			return slices.ContainsFunc(v.Value, func(x types.AttributeValue) bool { return equal(x, arg) }), nil
		}
		return false, nil
	}
	return false, fmt.Errorf("function %s", c.name)
}

// parseCondition parses a whole condition expression.
func parseCondition(s string, e *env) (cond, error) {
	p, err := newParser(s, e)
	if err != nil {
		return nil, err
	}
	c, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if p.peek().kind != tEOF {
		return nil, fmt.Errorf("Invalid expression: syntax error near %q", p.peek().s)
	}
	return c, nil
}

func (p *parser) parseOr() (cond, error) {
	return p.parseChain("OR", p.parseAnd, func(a, b cond) cond { return orCond{a, b} })
}

func (p *parser) parseAnd() (cond, error) {
	return p.parseChain("AND", p.parseNot, func(a, b cond) cond { return andCond{a, b} })
}

// parseChain parses operands joined by a left-associative keyword (AND, OR): operand parses
// the tighter-binding level and join combines two sides.
func (p *parser) parseChain(keyword string, operand func() (cond, error), join func(a, b cond) cond) (cond, error) {
	a, err := operand()
	if err != nil {
		return nil, err
	}
	for p.keyword(keyword) {
		p.next()
		b, err := operand()
		if err != nil {
			return nil, err
		}
		a = join(a, b)
	}
	return a, nil
}

func (p *parser) parseNot() (cond, error) {
	if p.keyword("NOT") {
		p.next()
		a, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return notCond{a}, nil
	}
	return p.parsePrimary()
}

var condFuncs = map[string]int{ // name → number of arguments
	"attribute_exists": 1, "attribute_not_exists": 1, "attribute_type": 2, "begins_with": 2, "contains": 2,
}

func (p *parser) parsePrimary() (cond, error) {
	t := p.peek()
	if t.kind == tLParen {
		p.next()
		c, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		return c, p.expect(tRParen, ")")
	}
	if t.kind == tIdent && p.toks[p.pos+1].kind == tLParen {
		if n, ok := condFuncs[strings.ToLower(t.s)]; ok {
			p.pos += 2
			pa, err := p.parsePath()
			if err != nil {
				return nil, err
			}
			fc := funcCond{name: strings.ToLower(t.s), p: pa}
			if n == 2 {
				if err := p.expect(tComma, ","); err != nil {
					return nil, err
				}
				if fc.arg, err = p.parseOperand(); err != nil {
					return nil, err
				}
			}
			return fc, p.expect(tRParen, ")")
		}
		if !strings.EqualFold(t.s, "size") {
			return nil, validation("Invalid ConditionExpression: Invalid function name; function: %s", t.s)
		}
	}
	a, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	switch t := p.peek(); {
	case t.kind == tOp && t.s != "+" && t.s != "-":
		p.next()
		b, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		return cmpCond{t.s, a, b}, nil
	case p.keyword("BETWEEN"):
		p.next()
		lo, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		if !p.keyword("AND") {
			return nil, fmt.Errorf("Invalid expression: BETWEEN needs AND")
		}
		p.next()
		hi, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		return betweenCond{a, lo, hi}, nil
	case p.keyword("IN"):
		p.next()
		if err := p.expect(tLParen, "("); err != nil {
			return nil, err
		}
		var list []operand
		for {
			o, err := p.parseOperand()
			if err != nil {
				return nil, err
			}
			list = append(list, o)
			if p.peek().kind != tComma {
				break
			}
			p.next()
		}
		return inCond{a, list}, p.expect(tRParen, ")")
	}
	return nil, fmt.Errorf("Invalid expression: expected a comparison near %q", p.peek().s)
}

// update is a parsed update expression.
type update struct {
	set    []setAction
	remove []path
	add    []addAction
	del    []addAction
}

type setAction struct {
	p path
	v operand
}

type addAction struct {
	p path
	v types.AttributeValue
}

func parseUpdate(s string, e *env) (*update, error) {
	p, err := newParser(s, e)
	if err != nil {
		return nil, err
	}
	u := &update{}
	seen := map[string]bool{}
	for p.peek().kind != tEOF {
		t := p.next()
		if t.kind != tIdent {
			return nil, fmt.Errorf("Invalid UpdateExpression: Syntax error; token: %q", t.s)
		}
		clause := strings.ToUpper(t.s)
		if seen[clause] {
			return nil, validation("Invalid UpdateExpression: The \"%s\" section can only be used once in an update expression", clause)
		}
		seen[clause] = true
		for {
			pa, err := p.parsePath()
			if err != nil {
				return nil, err
			}
			switch clause {
			case "SET":
				if err := p.expect(tOp, "="); err != nil {
					return nil, err
				}
				v, err := p.parseSetValue()
				if err != nil {
					return nil, err
				}
				u.set = append(u.set, setAction{pa, v})
			case "REMOVE":
				u.remove = append(u.remove, pa)
			case "ADD", "DELETE":
				if p.peek().kind != tValue {
					return nil, fmt.Errorf("Invalid UpdateExpression: %s needs a value", clause)
				}
				v, err := p.parseValueRef()
				if err != nil {
					return nil, err
				}
				if clause == "ADD" {
					u.add = append(u.add, addAction{pa, v})
				} else {
					u.del = append(u.del, addAction{pa, v})
				}
			default:
				return nil, fmt.Errorf("Invalid UpdateExpression: Syntax error; token: %q", t.s)
			}
			if p.peek().kind != tComma {
				break
			}
			p.next()
		}
	}
	if len(u.set)+len(u.remove)+len(u.add)+len(u.del) == 0 {
		return nil, validation("Invalid UpdateExpression: The expression can not be empty;")
	}
	// Two actions on overlapping paths are an error.
	var all []string
	for _, a := range u.set {
		all = append(all, a.p.String())
	}
	for _, a := range u.remove {
		all = append(all, a.String())
	}
	for _, a := range u.add {
		all = append(all, a.p.String())
	}
	for _, a := range u.del {
		all = append(all, a.p.String())
	}
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			if all[i] == all[j] || strings.HasPrefix(all[i], all[j]+".") || strings.HasPrefix(all[j], all[i]+".") {
				return nil, validation("Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [%s], path two: [%s]", all[i], all[j])
			}
		}
	}
	return u, nil
}

// apply runs the update on a copy of item (nil for a new item) and returns it, with the names of
// the top-level attributes it touched.
func (u *update) apply(item map[string]types.AttributeValue) (map[string]types.AttributeValue, map[string]bool, error) {
	old := item
	it := cloneItem(item)
	if it == nil {
		it = map[string]types.AttributeValue{}
	}
	touched := map[string]bool{}
	// Every SET value is computed from the item as it was before the update.
	vals := make([]types.AttributeValue, len(u.set))
	for i, a := range u.set {
		v, err := a.v.eval(old)
		if err != nil {
			return nil, nil, err
		}
		if v == nil {
			return nil, nil, validation("The provided expression refers to an attribute that does not exist in the item")
		}
		vals[i] = v
	}
	for i, a := range u.set {
		if err := setPath(it, a.p, vals[i]); err != nil {
			return nil, nil, err
		}
		touched[a.p[0].name] = true
	}
	for _, pa := range u.remove {
		removePath(it, pa)
		touched[pa[0].name] = true
	}
	for _, a := range u.add {
		cur := lookup(it, a.p)
		nv, err := addValue(cur, a.v)
		if err != nil {
			return nil, nil, err
		}
		if err := setPath(it, a.p, nv); err != nil {
			return nil, nil, err
		}
		touched[a.p[0].name] = true
	}
	for _, a := range u.del {
		cur := lookup(it, a.p)
		if cur == nil {
			continue
		}
		nv, err := deleteFromSet(cur, a.v)
		if err != nil {
			return nil, nil, err
		}
		if nv == nil {
			removePath(it, a.p)
		} else if err := setPath(it, a.p, nv); err != nil {
			return nil, nil, err
		}
		touched[a.p[0].name] = true
	}
	return it, touched, nil
}

func addValue(cur, v types.AttributeValue) (types.AttributeValue, error) {
	switch v := v.(type) {
	case *types.AttributeValueMemberN:
		if cur == nil {
			return v, nil
		}
		c, ok := cur.(*types.AttributeValueMemberN)
		if !ok {
			return nil, validation("An operand in the update expression has an incorrect data type")
		}
		x, y, err := parseNums(c.Value, v.Value)
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberN{Value: formatNum(x.Add(x, y))}, nil
	case *types.AttributeValueMemberSS:
		if cur == nil {
			return &types.AttributeValueMemberSS{Value: dedup(v.Value)}, nil
		}
		c, ok := cur.(*types.AttributeValueMemberSS)
		if !ok {
			return nil, validation("An operand in the update expression has an incorrect data type")
		}
		return &types.AttributeValueMemberSS{Value: dedup(append(slices.Clone(c.Value), v.Value...))}, nil
	case *types.AttributeValueMemberNS:
		if cur == nil {
			return &types.AttributeValueMemberNS{Value: dedup(v.Value)}, nil
		}
		c, ok := cur.(*types.AttributeValueMemberNS)
		if !ok {
			return nil, validation("An operand in the update expression has an incorrect data type")
		}
		return &types.AttributeValueMemberNS{Value: dedup(append(slices.Clone(c.Value), v.Value...))}, nil
	}
	return nil, validation("Invalid UpdateExpression: Incorrect operand type for operator or function; operator: ADD, operand type: %s", typeName(v))
}

func deleteFromSet(cur, v types.AttributeValue) (types.AttributeValue, error) {
	switch v := v.(type) {
	case *types.AttributeValueMemberSS:
		c, ok := cur.(*types.AttributeValueMemberSS)
		if !ok {
			return nil, validation("An operand in the update expression has an incorrect data type")
		}
		out := slices.DeleteFunc(slices.Clone(c.Value), func(s string) bool { return slices.Contains(v.Value, s) })
		if len(out) == 0 {
			return nil, nil
		}
		return &types.AttributeValueMemberSS{Value: out}, nil
	case *types.AttributeValueMemberNS:
		c, ok := cur.(*types.AttributeValueMemberNS)
		if !ok {
			return nil, validation("An operand in the update expression has an incorrect data type")
		}
		out := slices.DeleteFunc(slices.Clone(c.Value), func(s string) bool {
			return slices.ContainsFunc(v.Value, func(x string) bool { return numEqual(x, s) })
		})
		if len(out) == 0 {
			return nil, nil
		}
		return &types.AttributeValueMemberNS{Value: out}, nil
	}
	return nil, validation("Invalid UpdateExpression: Incorrect operand type for operator or function; operator: DELETE, operand type: %s", typeName(v))
}

func dedup(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// parseProjection parses a projection expression into paths.
func parseProjection(s string, e *env) ([]path, error) {
	p, err := newParser(s, e)
	if err != nil {
		return nil, err
	}
	var out []path
	for {
		pa, err := p.parsePath()
		if err != nil {
			return nil, err
		}
		out = append(out, pa)
		if p.peek().kind == tEOF {
			return out, nil
		}
		if err := p.expect(tComma, ","); err != nil {
			return nil, err
		}
	}
}

// project keeps only the paths of an item (top-level attributes and nested elements).
func project(item map[string]types.AttributeValue, paths []path) map[string]types.AttributeValue {
	if paths == nil {
		return item
	}
	out := map[string]types.AttributeValue{}
	for _, pa := range paths {
		v := lookup(item, pa)
		if v == nil {
			continue
		}
		if len(pa) == 1 {
			out[pa[0].name] = v
			continue
		}
		// Nested: keep the element inside its parents (list indexes collapse, as DynamoDB does).
		_ = setPathCreate(out, pa, v)
	}
	return out
}

// keyCond is a parsed key condition: hash = :v [AND range-condition].
type keyCond struct {
	hashName  string
	hashValue types.AttributeValue
	rng       cond // on the range key, or nil
	rangeName string
}

func parseKeyCondition(s string, e *env, hashKey, rangeKey string) (*keyCond, error) {
	c, err := parseCondition(s, e)
	if err != nil {
		return nil, err
	}
	kc := &keyCond{}
	var visit func(c cond) error
	visit = func(c cond) error {
		switch c := c.(type) {
		case andCond:
			if err := visit(c.a); err != nil {
				return err
			}
			return visit(c.b)
		case cmpCond:
			po, ok := c.a.(pathOp)
			vo, ok2 := c.b.(valueOp)
			if !ok || !ok2 || len(po.p) != 1 {
				return validation("Invalid KeyConditionExpression: the key must be compared with a value")
			}
			switch name := po.p[0].name; {
			case name == hashKey && c.op == "=" && kc.hashValue == nil:
				kc.hashName, kc.hashValue = name, vo.v
				return nil
			case name == rangeKey && rangeKey != "" && kc.rng == nil && c.op != "<>":
				kc.rng, kc.rangeName = c, name
				return nil
			}
			return validation("Query condition missed key schema element: %s", hashKey)
		case betweenCond, funcCond:
			if kc.rng != nil || rangeKey == "" {
				return validation("Invalid KeyConditionExpression: too many conditions on the range key")
			}
			kc.rng, kc.rangeName = c, rangeKey
			return nil
		}
		return validation("Invalid operator used in KeyConditionExpression")
	}
	if err := visit(c); err != nil {
		return nil, err
	}
	if kc.hashValue == nil {
		return nil, validation("Query condition missed key schema element: %s", hashKey)
	}
	return kc, nil
}
