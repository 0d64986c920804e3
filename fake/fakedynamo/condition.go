package fakedynamo

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

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
