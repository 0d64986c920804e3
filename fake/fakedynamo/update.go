package fakedynamo

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

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

// parseUpdate parses an update expression: its SET, REMOVE, ADD and DELETE clauses, each at
// most once, with no two actions on overlapping paths.
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
			if err := p.parseAction(u, clause, t.s); err != nil {
				return nil, err
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

// parseAction parses one action of the clause (SET, REMOVE, ADD or DELETE; token is the
// clause as written) into u.
func (p *parser) parseAction(u *update, clause, token string) error {
	pa, err := p.parsePath()
	if err != nil {
		return err
	}
	switch clause {
	case "SET":
		if err := p.expect(tOp, "="); err != nil {
			return err
		}
		v, err := p.parseSetValue()
		if err != nil {
			return err
		}
		u.set = append(u.set, setAction{pa, v})
	case "REMOVE":
		u.remove = append(u.remove, pa)
	case "ADD", "DELETE":
		if p.peek().kind != tValue {
			return fmt.Errorf("Invalid UpdateExpression: %s needs a value", clause)
		}
		v, err := p.parseValueRef()
		if err != nil {
			return err
		}
		if clause == "ADD" {
			u.add = append(u.add, addAction{pa, v})
		} else {
			u.del = append(u.del, addAction{pa, v})
		}
	default:
		return fmt.Errorf("Invalid UpdateExpression: Syntax error; token: %q", token)
	}
	return nil
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
