package sam

import (
	"encoding/base64"
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
	opts      Options
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

func (r *resolver) evalFn(n *node, path string, depth int) (any, error) {
	switch n.fn {
	case "Ref":
		name, err := r.evalString(n.arg, path, depth, "the argument of Ref")
		if err != nil {
			return nil, err
		}
		return r.ref(n, path, name)

	case "Fn::GetAtt":
		var id, attr string
		switch {
		case n.arg != nil && n.arg.kind == kindScalar:
			id, attr, _ = strings.Cut(n.arg.str, ".")
		case n.arg != nil && n.arg.kind == kindSeq && len(n.arg.items) == 2:
			var err error
			if id, err = r.evalString(n.arg.items[0], path, depth, "the logical ID in Fn::GetAtt"); err != nil {
				return nil, err
			}
			if attr, err = r.evalString(n.arg.items[1], path, depth, "the attribute in Fn::GetAtt"); err != nil {
				return nil, err
			}
		default:
			return nil, r.errAt(n, path, "Fn::GetAtt takes \"LogicalId.Attribute\" or [LogicalId, Attribute]")
		}
		if id == "" || attr == "" {
			return nil, r.errAt(n, path, "Fn::GetAtt takes \"LogicalId.Attribute\" or [LogicalId, Attribute]")
		}
		return r.getAtt(n, path, id, attr)

	case "Fn::Sub":
		var tmpl string
		vars := map[string]*node{}
		switch {
		case n.arg != nil && n.arg.kind == kindScalar:
			tmpl = n.arg.str
		case n.arg != nil && n.arg.kind == kindSeq && len(n.arg.items) == 2 && n.arg.items[0].kind == kindScalar:
			tmpl = n.arg.items[0].str
			m := n.arg.items[1]
			if m.kind != kindMap {
				return nil, r.errAt(n, path, "the second argument of Fn::Sub must be a mapping of variables")
			}
			for i, k := range m.keys {
				vars[k] = m.vals[i]
			}
		default:
			return nil, r.errAt(n, path, "Fn::Sub takes a string, or [string, {Var: value}]")
		}
		return r.sub(n, path, depth, tmpl, vars)

	case "Fn::Join":
		a, err := r.args(n, path, 2, 2)
		if err != nil {
			return nil, err
		}
		sep, err := r.evalString(a[0], path, depth, "the delimiter of Fn::Join")
		if err != nil {
			return nil, err
		}
		items, err := r.evalList(a[1], path, depth, "the second argument of Fn::Join")
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(items))
		for i, it := range items {
			s, ok := str(it)
			if !ok {
				return nil, r.errAt(a[1], path, "Fn::Join can only join strings; item %d is %s", i, describe(it))
			}
			parts[i] = s
		}
		return r.checkLen(n, path, strings.Join(parts, sep))

	case "Fn::Select":
		a, err := r.args(n, path, 2, 2)
		if err != nil {
			return nil, err
		}
		is, err := r.evalString(a[0], path, depth, "the index of Fn::Select")
		if err != nil {
			return nil, err
		}
		items, err := r.evalList(a[1], path, depth, "the second argument of Fn::Select")
		if err != nil {
			return nil, err
		}
		i, err := strconv.Atoi(is)
		if err != nil || i < 0 || i >= len(items) {
			return nil, r.errAt(n, path, "Fn::Select index %s is out of range for a list of %d", is, len(items))
		}
		return items[i], nil

	case "Fn::Split":
		a, err := r.args(n, path, 2, 2)
		if err != nil {
			return nil, err
		}
		sep, err := r.evalString(a[0], path, depth, "the delimiter of Fn::Split")
		if err != nil {
			return nil, err
		}
		s, err := r.evalString(a[1], path, depth, "the source of Fn::Split")
		if err != nil {
			return nil, err
		}
		if sep == "" {
			return nil, r.errAt(n, path, "Fn::Split needs a non-empty delimiter")
		}
		parts := strings.Split(s, sep)
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil

	case "Fn::If":
		a, err := r.args(n, path, 3, 3)
		if err != nil {
			return nil, err
		}
		name, err := r.evalString(a[0], path, depth, "the condition name in Fn::If")
		if err != nil {
			return nil, err
		}
		ok, err := r.condition(a[0], path, name, depth)
		if err != nil {
			return nil, err
		}
		if ok {
			return r.eval(a[1], path, depth)
		}
		return r.eval(a[2], path, depth)

	case "Fn::Equals", "Fn::And", "Fn::Or", "Fn::Not", "Condition":
		return r.evalCondition(n, path, depth)

	case "Fn::FindInMap":
		a, err := r.args(n, path, 3, 4)
		if err != nil {
			return nil, err
		}
		var keys [3]string
		for i := range keys {
			if keys[i], err = r.evalString(a[i], path, depth, "a key of Fn::FindInMap"); err != nil {
				return nil, err
			}
		}
		v := r.root.get("Mappings").get(keys[0]).get(keys[1]).get(keys[2])
		if v == nil {
			if len(a) == 4 && a[3].kind == kindMap && a[3].get("DefaultValue") != nil {
				return r.eval(a[3].get("DefaultValue"), path, depth)
			}
			return nil, r.errAt(n, path, "Fn::FindInMap: Mappings has no %s.%s.%s", keys[0], keys[1], keys[2])
		}
		return r.eval(v, path, depth)

	case "Fn::Base64":
		s, err := r.evalString(n.arg, path, depth, "the argument of Fn::Base64")
		if err != nil {
			return nil, err
		}
		return r.checkLen(n, path, base64.StdEncoding.EncodeToString([]byte(s)))

	case "Fn::GetAZs":
		region, err := r.evalString(n.arg, path, depth, "the argument of Fn::GetAZs")
		if err != nil {
			return nil, err
		}
		if region == "" {
			region = r.opts.Region
		}
		return []any{region + "a", region + "b", region + "c"}, nil

	case "Fn::ToJsonString":
		v, err := r.eval(n.arg, path, depth)
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(jsonable(v)); err != nil {
			return nil, r.errAt(n, path, "Fn::ToJsonString: %v", err)
		}
		return r.checkLen(n, path, strings.TrimSuffix(b.String(), "\n"))

	case "Fn::Length":
		l, err := r.evalList(n.arg, path, depth, "the argument of Fn::Length")
		if err != nil {
			return nil, err
		}
		return num(strconv.Itoa(len(l))), nil

	case "Fn::ImportValue":
		return nil, r.errAt(n, path, "Fn::ImportValue reads another stack's outputs, which only CloudFormation can resolve; use a parameter and %s instead", r.opts.name(InputParameterOverrides))
	}
	return nil, r.errAt(n, path, "%s cannot be resolved outside CloudFormation", n.fn)
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
		i := strings.Index(tmpl, "${")
		if i < 0 {
			b.WriteString(tmpl)
			break
		}
		b.WriteString(tmpl[:i])
		tmpl = tmpl[i+2:]
		if strings.HasPrefix(tmpl, "!") { // ${!Literal} is the literal ${Literal}
			b.WriteString("${")
			tmpl = tmpl[1:]
			continue
		}
		j := strings.IndexByte(tmpl, '}')
		if j < 0 {
			return nil, r.errAt(n, path, "Fn::Sub: unclosed ${ in the string")
		}
		name := strings.TrimSpace(tmpl[:j])
		tmpl = tmpl[j+1:]
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

// evalCondition evaluates a condition function and returns a bool.
func (r *resolver) evalCondition(n *node, path string, depth int) (any, error) {
	ok, err := r.cond(n, path, depth)
	if err != nil {
		return nil, err
	}
	return ok, nil
}

func (r *resolver) cond(n *node, path string, depth int) (bool, error) {
	r.steps++
	if r.steps > maxSteps || depth > maxDepth {
		return false, r.errAt(n, path, "conditions nest too deep")
	}
	if n != nil && n.kind == kindMap && len(n.keys) == 1 && n.keys[0] == "Condition" {
		n = &node{kind: kindFn, fn: "Condition", arg: n.vals[0], line: n.line}
	}
	if n == nil || n.kind != kindFn {
		v, err := r.eval(n, path, depth+1)
		if err != nil {
			return false, err
		}
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return false, r.errAt(n, path, "a condition must be Fn::Equals, Fn::And, Fn::Or, Fn::Not or Condition, not %s", describe(v))
	}
	switch n.fn {
	case "Condition":
		name, err := r.evalString(n.arg, path, depth+1, "a condition name")
		if err != nil {
			return false, err
		}
		return r.condition(n, path, name, depth+1)
	case "Fn::Equals":
		a, err := r.args(n, path, 2, 2)
		if err != nil {
			return false, err
		}
		x, err := r.eval(a[0], path, depth+1)
		if err != nil {
			return false, err
		}
		y, err := r.eval(a[1], path, depth+1)
		if err != nil {
			return false, err
		}
		xs, ok1 := str(x)
		ys, ok2 := str(y)
		if !ok1 || !ok2 {
			xj, _ := json.Marshal(jsonable(x))
			yj, _ := json.Marshal(jsonable(y))
			return string(xj) == string(yj), nil
		}
		return xs == ys, nil
	case "Fn::And", "Fn::Or":
		a, err := r.args(n, path, 2, 10)
		if err != nil {
			return false, err
		}
		for _, c := range a {
			v, err := r.cond(c, path, depth+1)
			if err != nil {
				return false, err
			}
			if n.fn == "Fn::And" && !v {
				return false, nil
			}
			if n.fn == "Fn::Or" && v {
				return true, nil
			}
		}
		return n.fn == "Fn::And", nil
	case "Fn::Not":
		a, err := r.args(n, path, 1, 1)
		if err != nil {
			return false, err
		}
		v, err := r.cond(a[0], path, depth+1)
		return !v, err
	}
	v, err := r.eval(n, path, depth+1)
	if err != nil {
		return false, err
	}
	if b, ok := v.(bool); ok {
		return b, nil
	}
	return false, r.errAt(n, path, "%s is not a condition", n.fn)
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
		return r.opts.Region, nil
	case "AWS::AccountId":
		return r.opts.AccountID, nil
	case "AWS::Partition":
		return r.opts.Partition, nil
	case "AWS::StackName":
		return r.opts.StackName, nil
	case "AWS::StackId":
		return fmt.Sprintf("arn:%s:cloudformation:%s:%s:stack/%s/00000000-0000-0000-0000-000000000000", r.opts.Partition, r.opts.Region, r.opts.AccountID, r.opts.StackName), nil
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
