package sam

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
)

// An intrinsic evaluates one intrinsic function: n is the function's node (n.fn its name, n.arg
// its argument), path the property for messages, depth the evaluation's depth so far.
type intrinsic func(r *resolver, n *node, path string, depth int) (any, error)

// intrinsics are the intrinsic functions esm evaluates, by their long names. Set in init: the
// functions evaluate their arguments through eval, which looks them up here.
var intrinsics map[string]intrinsic

// A condition evaluates one condition function (Fn::Equals, Fn::And, …) to a bool.
type condition func(r *resolver, n *node, path string, depth int) (bool, error)

// conditions are the condition functions, by their long names, which also evaluate as intrinsics.
var conditions map[string]condition

func init() {
	conditions = map[string]condition{
		"Condition":  condNamed,
		"Fn::Equals": condEquals,
		"Fn::And":    condAndOr,
		"Fn::Or":     condAndOr,
		"Fn::Not":    condNot,
	}
	intrinsics = map[string]intrinsic{
		"Ref":              fnRef,
		"Fn::GetAtt":       fnGetAtt,
		"Fn::Sub":          fnSub,
		"Fn::Join":         fnJoin,
		"Fn::Select":       fnSelect,
		"Fn::Split":        fnSplit,
		"Fn::If":           fnIf,
		"Fn::FindInMap":    fnFindInMap,
		"Fn::Base64":       fnBase64,
		"Fn::GetAZs":       fnGetAZs,
		"Fn::ToJsonString": fnToJSONString,
		"Fn::Length":       fnLength,
		"Fn::ImportValue":  fnImportValue,
	}
	for name := range conditions {
		intrinsics[name] = fnCondition
	}
}

// evalFn evaluates the intrinsic function n.
func (r *resolver) evalFn(n *node, path string, depth int) (any, error) {
	if f, ok := intrinsics[n.fn]; ok {
		return f(r, n, path, depth)
	}
	return nil, r.errAt(n, path, "%s cannot be resolved outside CloudFormation", n.fn)
}

func fnRef(r *resolver, n *node, path string, depth int) (any, error) {
	name, err := r.evalString(n.arg, path, depth, "the argument of Ref")
	if err != nil {
		return nil, err
	}
	return r.ref(n, path, name)
}

func fnGetAtt(r *resolver, n *node, path string, depth int) (any, error) {
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
	}
	if id == "" || attr == "" {
		return nil, r.errAt(n, path, "Fn::GetAtt takes \"LogicalId.Attribute\" or [LogicalId, Attribute]")
	}
	return r.getAtt(n, path, id, attr)
}

func fnSub(r *resolver, n *node, path string, depth int) (any, error) {
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
}

// stringAndList evaluates the arguments [string, list] of Fn::Join and Fn::Select.
func (r *resolver) stringAndList(n *node, path string, depth int, first string) (string, []any, error) {
	a, err := r.args(n, path, 2, 2)
	if err != nil {
		return "", nil, err
	}
	s, err := r.evalString(a[0], path, depth, first+" of "+n.fn)
	if err != nil {
		return "", nil, err
	}
	items, err := r.evalList(a[1], path, depth, "the second argument of "+n.fn)
	return s, items, err
}

func fnJoin(r *resolver, n *node, path string, depth int) (any, error) {
	sep, items, err := r.stringAndList(n, path, depth, "the delimiter")
	if err != nil {
		return nil, err
	}
	parts := make([]string, len(items))
	for i, it := range items {
		s, ok := str(it)
		if !ok {
			return nil, r.errAt(n.arg.items[1], path, "Fn::Join can only join strings; item %d is %s", i, describe(it))
		}
		parts[i] = s
	}
	return r.checkLen(n, path, strings.Join(parts, sep))
}

func fnSelect(r *resolver, n *node, path string, depth int) (any, error) {
	is, items, err := r.stringAndList(n, path, depth, "the index")
	if err != nil {
		return nil, err
	}
	i, err := strconv.Atoi(is)
	if err != nil || i < 0 || i >= len(items) {
		return nil, r.errAt(n, path, "Fn::Select index %s is out of range for a list of %d", is, len(items))
	}
	return items[i], nil
}

func fnSplit(r *resolver, n *node, path string, depth int) (any, error) {
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
}

func fnIf(r *resolver, n *node, path string, depth int) (any, error) {
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
}

func fnFindInMap(r *resolver, n *node, path string, depth int) (any, error) {
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
}

func fnBase64(r *resolver, n *node, path string, depth int) (any, error) {
	s, err := r.evalString(n.arg, path, depth, "the argument of Fn::Base64")
	if err != nil {
		return nil, err
	}
	return r.checkLen(n, path, base64.StdEncoding.EncodeToString([]byte(s)))
}

func fnGetAZs(r *resolver, n *node, path string, depth int) (any, error) {
	region, err := r.evalString(n.arg, path, depth, "the argument of Fn::GetAZs")
	if err != nil {
		return nil, err
	}
	if region == "" {
		region = r.opts.region
	}
	return []any{region + "a", region + "b", region + "c"}, nil
}

func fnToJSONString(r *resolver, n *node, path string, depth int) (any, error) {
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
}

func fnLength(r *resolver, n *node, path string, depth int) (any, error) {
	l, err := r.evalList(n.arg, path, depth, "the argument of Fn::Length")
	if err != nil {
		return nil, err
	}
	return num(strconv.Itoa(len(l))), nil
}

func fnImportValue(r *resolver, n *node, path string, _ int) (any, error) {
	return nil, r.errAt(n, path, "Fn::ImportValue reads another stack's outputs, which only CloudFormation can resolve; use a parameter and %s instead", r.opts.name(InputParameterOverrides))
}

// fnCondition evaluates a condition function where a value is expected: to a bool.
func fnCondition(r *resolver, n *node, path string, depth int) (any, error) {
	ok, err := r.cond(n, path, depth)
	if err != nil {
		return nil, err
	}
	return ok, nil
}

// cond evaluates a condition: a condition function, {Condition: name}, or a value that resolves
// to a bool.
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
	if c, ok := conditions[n.fn]; ok {
		return c(r, n, path, depth+1)
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

// The condition functions get the depth of their arguments.

func condNamed(r *resolver, n *node, path string, depth int) (bool, error) {
	name, err := r.evalString(n.arg, path, depth, "a condition name")
	if err != nil {
		return false, err
	}
	return r.condition(n, path, name, depth)
}

func condEquals(r *resolver, n *node, path string, depth int) (bool, error) {
	a, err := r.args(n, path, 2, 2)
	if err != nil {
		return false, err
	}
	x, err := r.eval(a[0], path, depth)
	if err != nil {
		return false, err
	}
	y, err := r.eval(a[1], path, depth)
	if err != nil {
		return false, err
	}
	xs, ok1 := str(x)
	ys, ok2 := str(y)
	if !ok1 || !ok2 {
		xj, _ := json.Marshal(jsonable(x)) // resolved values always encode
		yj, _ := json.Marshal(jsonable(y))
		return string(xj) == string(yj), nil
	}
	return xs == ys, nil
}

// condAndOr is Fn::And and Fn::Or: 2 to 10 conditions, evaluated until one decides.
func condAndOr(r *resolver, n *node, path string, depth int) (bool, error) {
	a, err := r.args(n, path, 2, 10)
	if err != nil {
		return false, err
	}
	and := n.fn == "Fn::And"
	for _, c := range a {
		v, err := r.cond(c, path, depth)
		if err != nil {
			return false, err
		}
		if v != and {
			return v, nil
		}
	}
	return and, nil
}

func condNot(r *resolver, n *node, path string, depth int) (bool, error) {
	a, err := r.args(n, path, 1, 1)
	if err != nil {
		return false, err
	}
	v, err := r.cond(a[0], path, depth)
	return !v, err
}
