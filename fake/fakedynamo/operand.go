package fakedynamo

import (
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

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
