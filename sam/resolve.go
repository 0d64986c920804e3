package sam

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Resolved values: nil, string, bool, num (a number as written), []any and map[string]any.
type num string

// noValue is what Ref AWS::NoValue resolves to: the property is removed.
type noValueT struct{}

var noValue = noValueT{}

// resolver evaluates intrinsic functions against one template. It resolves lazily and remembers
// what it resolved; every evaluation is bounded in depth and steps.
type resolver struct {
	file      string
	root      *node
	opts      options
	params    map[string]*param
	resources map[string]*node
	conds     map[string]bool
	condBusy  map[string]bool
	names     map[string]string
	nameBusy  map[string]bool
	steps     int
}

func (r *resolver) errAt(n *node, path, format string, args ...any) *Error {
	line := 0
	if n != nil {
		line = n.line
	}
	return &Error{File: r.file, Line: line, Path: path, Message: fmt.Sprintf(format, args...)}
}

// resolve evaluates n. path names the property for error messages.
func (r *resolver) resolve(n *node, path string) (any, error) { return r.eval(n, path, 0) }

func (r *resolver) eval(n *node, path string, depth int) (any, error) {
	r.steps++
	if r.steps > maxSteps {
		return nil, r.errAt(n, path, "template takes more than %d steps to resolve", maxSteps)
	}
	if depth > maxDepth {
		return nil, r.errAt(n, path, "intrinsic functions nest deeper than %d levels", maxDepth)
	}
	if n == nil {
		return nil, nil
	}
	switch n.kind {
	case kindNull:
		return nil, nil
	case kindScalar:
		return scalarValue(n), nil
	case kindSeq:
		out := make([]any, 0, len(n.items))
		for _, it := range n.items {
			v, err := r.eval(it, path, depth+1)
			if err != nil {
				return nil, err
			}
			if v != noValue {
				out = append(out, v)
			}
		}
		return out, nil
	case kindMap:
		out := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			v, err := r.eval(n.vals[i], path+"."+k, depth+1)
			if err != nil {
				return nil, err
			}
			if v != noValue {
				out[k] = v
			}
		}
		return out, nil
	case kindFn:
		return r.evalFn(n, path, depth+1)
	}
	return nil, r.errAt(n, path, "unexpected value")
}

func scalarValue(n *node) any {
	if n.quoted {
		return n.str
	}
	switch n.tag {
	case "!!int", "!!float":
		return num(n.str)
	case "!!bool":
		return strings.EqualFold(n.str, "true")
	}
	return n.str
}

// str returns a resolved scalar as CloudFormation stringifies it.
func str(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case num:
		return string(v), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(v)
	case num:
		return string(v)
	case bool:
		return strconv.FormatBool(v)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case noValueT:
		return "AWS::NoValue"
	}
	return fmt.Sprintf("%T", v)
}

func (r *resolver) evalString(n *node, path string, depth int, what string) (string, error) {
	v, err := r.eval(n, path, depth)
	if err != nil {
		return "", err
	}
	s, ok := str(v)
	if !ok {
		return "", r.errAt(n, path, "%s must be a string, not %s", what, describe(v))
	}
	return s, nil
}

func (r *resolver) evalList(n *node, path string, depth int, what string) ([]any, error) {
	v, err := r.eval(n, path, depth)
	if err != nil {
		return nil, err
	}
	l, ok := v.([]any)
	if !ok {
		return nil, r.errAt(n, path, "%s must be a list, not %s", what, describe(v))
	}
	return l, nil
}

// args returns the items of a list argument with exactly want items (or between min and max).
func (r *resolver) args(n *node, path string, min, max int) ([]*node, error) {
	if n.arg == nil || n.arg.kind != kindSeq || len(n.arg.items) < min || len(n.arg.items) > max {
		want := fmt.Sprintf("a list of %d", min)
		if max != min {
			want = fmt.Sprintf("a list of %d to %d", min, max)
		}
		return nil, r.errAt(n, path, "%s takes %s arguments", n.fn, want)
	}
	return n.arg.items, nil
}

func (r *resolver) checkLen(n *node, path string, s string) (string, error) {
	if len(s) > maxStringBytes {
		return "", r.errAt(n, path, "%s produces a string longer than %d bytes", n.fn, maxStringBytes)
	}
	return s, nil
}

// jsonable turns resolved values into what encoding/json renders as CloudFormation would.
func jsonable(v any) any {
	switch v := v.(type) {
	case num:
		return json.Number(v)
	case []any:
		out := make([]any, len(v))
		for i, it := range v {
			out[i] = jsonable(it)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, it := range v {
			out[k] = jsonable(it)
		}
		return out
	}
	return v
}

// sub substitutes ${Var}, ${Resource.Attr} and ${!Literal} in tmpl.
func (r *resolver) sub(n *node, path string, depth int, tmpl string, vars map[string]*node) (any, error) {
	var b strings.Builder
	for {
		before, after, found := strings.Cut(tmpl, "${")
		b.WriteString(before)
		if !found {
			break
		}
		if literal, ok := strings.CutPrefix(after, "!"); ok { // ${!Literal} is the literal ${Literal}
			b.WriteString("${")
			tmpl = literal
			continue
		}
		variable, rest, closed := strings.Cut(after, "}")
		if !closed {
			return nil, r.errAt(n, path, "Fn::Sub: unclosed ${ in the string")
		}
		name := strings.TrimSpace(variable)
		tmpl = rest
		var v any
		var err error
		if vn, ok := vars[name]; ok {
			v, err = r.eval(vn, path, depth+1)
		} else if id, attr, dotted := strings.Cut(name, "."); dotted && !strings.HasPrefix(name, "AWS::") {
			v, err = r.getAtt(n, path, id, attr)
		} else {
			v, err = r.ref(n, path, name)
		}
		if err != nil {
			return nil, err
		}
		s, ok := str(v)
		if !ok {
			return nil, r.errAt(n, path, "Fn::Sub: ${%s} is %s, not a string", name, describe(v))
		}
		b.WriteString(s)
		if b.Len() > maxStringBytes {
			return nil, r.errAt(n, path, "Fn::Sub produces a string longer than %d bytes", maxStringBytes)
		}
	}
	return b.String(), nil
}

// condition evaluates the named condition of the Conditions section, once.
func (r *resolver) condition(at *node, path, name string, depth int) (bool, error) {
	if v, ok := r.conds[name]; ok {
		return v, nil
	}
	def := r.root.get("Conditions").get(name)
	if def == nil {
		return false, r.errAt(at, path, "condition %q is not defined in Conditions", name)
	}
	if r.condBusy[name] {
		return false, r.errAt(at, path, "condition %q depends on itself", name)
	}
	r.condBusy[name] = true
	defer delete(r.condBusy, name)
	v, err := r.cond(def, "Conditions."+name, depth+1)
	if err != nil {
		return false, err
	}
	r.conds[name] = v
	return v, nil
}

// exists reports whether a resource exists: it is declared and its Condition, if any, holds.
func (r *resolver) exists(id string) (bool, error) {
	res, ok := r.resources[id]
	if !ok {
		return false, nil
	}
	c := res.get("Condition")
	if c == nil {
		return true, nil
	}
	if c.kind != kindScalar {
		return false, r.errAt(c, "Resources."+id+".Condition", "Condition must be the name of a condition")
	}
	return r.condition(c, "Resources."+id+".Condition", c.str, 0)
}

func (r *resolver) ref(at *node, path, name string) (any, error) {
	switch name {
	case "AWS::Region":
		return r.opts.region, nil
	case "AWS::AccountId":
		return r.opts.accountID, nil
	case "AWS::Partition":
		return r.opts.partition, nil
	case "AWS::StackName":
		return r.opts.stackName, nil
	case "AWS::StackId":
		return fmt.Sprintf("arn:%s:cloudformation:%s:%s:stack/%s/00000000-0000-0000-0000-000000000000", r.opts.partition, r.opts.region, r.opts.accountID, r.opts.stackName), nil
	case "AWS::URLSuffix":
		return r.opts.urlSuffix(), nil
	case "AWS::NotificationARNs":
		return []any{}, nil
	case "AWS::NoValue":
		return noValue, nil
	}
	if p, ok := r.params[name]; ok {
		return r.paramValue(at, path, p)
	}
	if _, ok := r.resources[name]; ok {
		return r.resourceRef(at, path, name)
	}
	if owner, ok := r.implicitRoleOwner(name); ok {
		return r.roleName(at, path, owner)
	}
	return nil, r.errAt(at, path, "Ref %s: no parameter or resource %q in the template (Unresolved resource dependencies [%s])", name, name, name)
}
