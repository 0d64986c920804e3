package sam

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// param is one entry of the Parameters section with its value, if it has one.
type param struct {
	name  string
	def   *node
	typ   string
	value string
	set   bool
}

// ParseParameterOverrides reads SAM's --parameter-overrides syntax: "Key=Value Key2=Value2", values
// quoted with ' or " when they contain spaces, or the long form
// "ParameterKey=Key,ParameterValue=Value ParameterKey=Key2,ParameterValue=Value2". Later values win.
func ParseParameterOverrides(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, tok := range splitOverrides(s) {
		if tok.err != nil {
			return nil, tok.err
		}
		t := tok.text
		if long, isLong := strings.CutPrefix(t, "ParameterKey="); isLong {
			k, v, ok := strings.Cut(long, ",ParameterValue=")
			if !ok || k == "" {
				return nil, fmt.Errorf("parameter override %q: want ParameterKey=Name,ParameterValue=Value", t)
			}
			out[k] = unquote(v)
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("parameter override %q: want Name=Value", t)
		}
		out[k] = unquote(v)
	}
	return out, nil
}

type overrideToken struct {
	text string
	err  error
}

// splitOverrides splits at whitespace outside quotes; quotes stay in the token.
func splitOverrides(s string) []overrideToken {
	var toks []overrideToken
	var b strings.Builder
	var quote rune
	flush := func() {
		if b.Len() > 0 {
			toks = append(toks, overrideToken{text: b.String()})
			b.Reset()
		}
	}
	for _, c := range s {
		switch {
		case quote != 0:
			b.WriteRune(c)
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
			b.WriteRune(c)
		case unicode.IsSpace(c):
			flush()
		default:
			b.WriteRune(c)
		}
	}
	if quote != 0 {
		return append(toks, overrideToken{err: fmt.Errorf("parameter overrides %q: unclosed %c quote", s, quote)})
	}
	flush()
	return toks
}

func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

var pseudoParameters = []string{"AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::StackName", "AWS::URLSuffix"}

// loadParameters reads the Parameters section, applies the overrides and checks every value that
// is set against the parameter's constraints, with CloudFormation's messages.
func (r *resolver) loadParameters(overrides map[string]string) error {
	sec := r.root.get("Parameters")
	if sec != nil && sec.kind != kindMap {
		return r.errAt(sec, "Parameters", "Parameters must be a mapping of parameter names to their definitions")
	}
	var unknown []string
	for k := range overrides {
		if sec.get(k) == nil && !slices.Contains(pseudoParameters, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return &Error{File: r.file, Path: r.opts.name(InputParameterOverrides), Message: fmt.Sprintf("Parameters: [%s] do not exist in the template", strings.Join(unknown, ", "))}
	}
	if sec == nil {
		return nil
	}
	for i, name := range sec.keys {
		def := sec.vals[i]
		path := "Parameters." + name
		if def.kind != kindMap {
			return r.errAt(def, path, "a parameter must be a mapping with at least a Type")
		}
		p := &param{name: name, def: def, typ: "String"}
		if t := def.get("Type"); t != nil {
			if t.kind != kindScalar {
				return r.errAt(t, path+".Type", "Type must be a string")
			}
			p.typ = t.str
		}
		if d := def.get("Default"); d != nil {
			v, err := r.resolve(d, path+".Default")
			if err != nil {
				return err
			}
			s, err := paramString(v)
			if err != nil {
				return r.errAt(d, path+".Default", "%v", err)
			}
			p.value, p.set = s, true
		}
		if v, ok := overrides[name]; ok {
			p.value, p.set = v, true
		}
		if p.set {
			if err := r.checkParameter(p); err != nil {
				return err
			}
		}
		r.params[name] = p
	}
	return nil
}

func paramString(v any) (string, error) {
	if l, ok := v.([]any); ok { // a list default for a list type
		parts := make([]string, len(l))
		for i, it := range l {
			s, ok := str(it)
			if !ok {
				return "", fmt.Errorf("a default must be a string, a number or a list of them")
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	}
	s, ok := str(v)
	if !ok {
		return "", fmt.Errorf("a default must be a string, a number or a list of them, not %s", describe(v))
	}
	return s, nil
}

func isListType(t string) bool {
	return t == "CommaDelimitedList" || strings.HasPrefix(t, "List<") ||
		strings.HasPrefix(t, "AWS::SSM::Parameter::Value<List<") || t == "AWS::SSM::Parameter::Value<CommaDelimitedList>"
}

// checkParameter applies AllowedValues, AllowedPattern, MinLength, MaxLength, MinValue and
// MaxValue as CloudFormation does, with its messages.
func (r *resolver) checkParameter(p *param) error {
	path := "Parameters." + p.name
	fail := func(n *node, format string, args ...any) error {
		return r.errAt(n, path, "value %q: %s", p.value, fmt.Sprintf(format, args...))
	}
	values := []string{p.value}
	if isListType(p.typ) {
		values = strings.Split(p.value, ",")
	}
	numeric := p.typ == "Number" || p.typ == "List<Number>"
	for _, v := range values {
		if numeric {
			if _, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
				return fail(p.def, "Parameter '%s' must be a number", p.name)
			}
		}
		if av := p.def.get("AllowedValues"); av != nil {
			allowed, err := r.resolve(av, path+".AllowedValues")
			if err != nil {
				return err
			}
			list, _ := allowed.([]any)
			found := false
			for _, a := range list {
				if s, _ := str(a); s == v {
					found = true
				}
			}
			if !found {
				names := make([]string, 0, len(list))
				for _, a := range list {
					s, _ := str(a)
					names = append(names, s)
				}
				return fail(av, "Parameter '%s' must be one of AllowedValues [%s]", p.name, strings.Join(names, ", "))
			}
		}
		if ap := p.def.get("AllowedPattern"); ap != nil {
			pat, _ := str(scalarValue(ap))
			re, err := regexp.Compile("^(?:" + pat + ")$")
			if err != nil {
				return r.errAt(ap, path+".AllowedPattern", "AllowedPattern %q is not a regular expression esm understands: %v", pat, err)
			}
			if !re.MatchString(v) {
				return fail(ap, "Parameter '%s' must match pattern %s", p.name, pat)
			}
		}
		for _, c := range []struct {
			key string
			bad func(limit float64) bool
			msg string
		}{
			{"MinLength", func(l float64) bool { return float64(utf8.RuneCountInString(v)) < l }, "must contain at least %s characters"},
			{"MaxLength", func(l float64) bool { return float64(utf8.RuneCountInString(v)) > l }, "must contain at most %s characters"},
			{"MinValue", func(l float64) bool { f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64); return f < l }, "must be a number not less than %s"},
			{"MaxValue", func(l float64) bool { f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64); return f > l }, "must be a number not greater than %s"},
		} {
			ln := p.def.get(c.key)
			if ln == nil {
				continue
			}
			ls, _ := str(scalarValue(ln))
			limit, err := strconv.ParseFloat(ls, 64)
			if err != nil {
				return r.errAt(ln, path+"."+c.key, "%s must be a number, not %q", c.key, ls)
			}
			if c.bad(limit) {
				return fail(ln, "Parameter '%s' "+c.msg, p.name, ls)
			}
		}
	}
	return nil
}

// paramValue is what Ref returns for a parameter: a string, or a list for list types.
func (r *resolver) paramValue(at *node, path string, p *param) (any, error) {
	if !p.set {
		return nil, r.errAt(at, path, "Parameters: [%s] must have values: give it a Default or pass %s %s=...", p.name, r.opts.name(InputParameterOverrides), p.name)
	}
	if isListType(p.typ) {
		parts := strings.Split(p.value, ",")
		out := make([]any, len(parts))
		for i, s := range parts {
			out[i] = strings.TrimSpace(s)
		}
		return out, nil
	}
	return p.value, nil
}
