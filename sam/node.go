package sam

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Limits that keep a hostile or broken template from taking unbounded time or memory.
const (
	maxTemplateBytes = 1 << 20 // CloudFormation's own limit for a template in S3 is 1 MB
	maxNodes         = 100_000 // values after alias expansion
	maxDepth         = 128     // nesting, and depth of intrinsic evaluation
	maxStringBytes   = 1 << 20 // one resolved string
	maxSteps         = 1_000_000
)

type kind uint8

const (
	kindNull kind = iota
	kindScalar
	kindSeq
	kindMap
	kindFn // an intrinsic function: {"Fn::X": arg}, {"Ref": arg} or !X arg
)

// node is a template value before resolution, with its position in the file.
type node struct {
	kind kind
	// scalar
	str    string
	quoted bool   // a quoted or block scalar: always a string
	tag    string // YAML core tag of a scalar: !!str, !!int, !!float, !!bool, !!null
	// seq
	items []*node
	// map, in document order, with the line of each key
	keys     []string
	vals     []*node
	keyLines []int
	// fn
	fn  string
	arg *node

	line, col int
}

// keyLine is the line of key in map n, or n's line.
func (n *node) keyLine(key string) int {
	if n == nil {
		return 0
	}
	for i, k := range n.keys {
		if k == key && i < len(n.keyLines) {
			return n.keyLines[i]
		}
	}
	return n.line
}

func (n *node) get(key string) *node {
	if n == nil || n.kind != kindMap {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// shortTags maps CloudFormation's YAML short forms to their long names.
var shortTags = map[string]string{
	"!Ref": "Ref", "!Condition": "Condition",
	"!GetAtt": "Fn::GetAtt", "!Sub": "Fn::Sub", "!Join": "Fn::Join", "!Select": "Fn::Select",
	"!Split": "Fn::Split", "!If": "Fn::If", "!Equals": "Fn::Equals", "!And": "Fn::And", "!Or": "Fn::Or",
	"!Not": "Fn::Not", "!FindInMap": "Fn::FindInMap", "!Base64": "Fn::Base64", "!GetAZs": "Fn::GetAZs",
	"!ImportValue": "Fn::ImportValue", "!Cidr": "Fn::Cidr", "!Transform": "Fn::Transform",
	"!Length": "Fn::Length", "!ToJsonString": "Fn::ToJsonString",
}

// isIntrinsicKey reports whether a one-key map with this key is an intrinsic function in long form.
func isIntrinsicKey(k string) bool { return k == "Ref" || strings.HasPrefix(k, "Fn::") }

// parse reads a YAML or JSON template into nodes.
func parse(file string, data []byte) (*node, error) {
	if len(data) > maxTemplateBytes {
		return nil, &Error{File: file, Message: fmt.Sprintf("template is %d bytes; at most %d are allowed", len(data), maxTemplateBytes)}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if jn, jerr := parseJSON(data); jerr == nil { // JSON that YAML refuses (tabs)
			return jn, nil
		}
		return nil, &Error{File: file, Message: "not a valid YAML or JSON template: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	c := converter{file: file}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return &node{kind: kindNull}, nil
		}
		root = root.Content[0]
	}
	return c.convert(root, 0)
}

type converter struct {
	file  string
	nodes int
}

func (c *converter) errorf(y *yaml.Node, format string, args ...any) error {
	return &Error{File: c.file, Line: y.Line, Message: fmt.Sprintf(format, args...)}
}

func (c *converter) convert(y *yaml.Node, depth int) (*node, error) {
	c.nodes++
	if c.nodes > maxNodes {
		return nil, c.errorf(y, "template has more than %d values (after expanding YAML aliases)", maxNodes)
	}
	if depth > maxDepth {
		return nil, c.errorf(y, "template nests deeper than %d levels", maxDepth)
	}
	if y.Kind == yaml.AliasNode {
		if y.Alias == nil {
			return nil, c.errorf(y, "unknown YAML alias")
		}
		return c.convert(y.Alias, depth+1)
	}
	n, err := c.convertPlain(y, depth)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(y.Tag, "!") && !strings.HasPrefix(y.Tag, "!!") {
		name, ok := shortTags[y.Tag]
		if !ok {
			return nil, c.errorf(y, "unknown tag %s: CloudFormation's short forms are !Ref, !GetAtt, !Sub, !Join, !Select, !Split, !If, !Equals, !And, !Or, !Not, !FindInMap, !Base64, !GetAZs, !ImportValue, !Cidr, !Condition", y.Tag)
		}
		if n.kind == kindScalar {
			n.tag, n.quoted = "!!str", true // the argument of a short form is a string
		}
		return &node{kind: kindFn, fn: name, arg: n, line: y.Line, col: y.Column}, nil
	}
	return n, nil
}

func (c *converter) convertPlain(y *yaml.Node, depth int) (*node, error) {
	n := &node{line: y.Line, col: y.Column}
	switch y.Kind {
	case yaml.ScalarNode:
		n.kind, n.str = kindScalar, y.Value
		n.quoted = y.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
		n.tag = y.ShortTag()
		if strings.HasPrefix(y.Tag, "!") && !strings.HasPrefix(y.Tag, "!!") {
			n.tag = "!!str"
		}
		if n.tag == "!!null" && !n.quoted {
			n.kind = kindNull
		}
	case yaml.SequenceNode:
		n.kind = kindSeq
		for _, it := range y.Content {
			cn, err := c.convert(it, depth+1)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, cn)
		}
	case yaml.MappingNode:
		n.kind = kindMap
		for i := 0; i+1 < len(y.Content); i += 2 {
			k, v := y.Content[i], y.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Tag == "!!merge" {
				return nil, c.errorf(k, "YAML merge keys (<<) are not supported by CloudFormation")
			}
			if k.Kind != yaml.ScalarNode {
				return nil, c.errorf(k, "a mapping key must be a plain string")
			}
			for _, seen := range n.keys {
				if seen == k.Value {
					return nil, c.errorf(k, "duplicate key %q", k.Value)
				}
			}
			cv, err := c.convert(v, depth+1)
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, k.Value)
			n.vals = append(n.vals, cv)
			n.keyLines = append(n.keyLines, k.Line)
		}
		if len(n.keys) == 1 && isIntrinsicKey(n.keys[0]) {
			return &node{kind: kindFn, fn: n.keys[0], arg: n.vals[0], line: n.line, col: n.col}, nil
		}
	default:
		return nil, c.errorf(y, "unexpected YAML node")
	}
	return n, nil
}

// parseJSON reads a JSON template (without positions) for the rare JSON that YAML rejects.
func parseJSON(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	budget := maxNodes
	return fromJSON(v, 0, &budget)
}

func fromJSON(v any, depth int, budget *int) (*node, error) {
	*budget--
	if *budget < 0 || depth > maxDepth {
		return nil, fmt.Errorf("template too large")
	}
	switch v := v.(type) {
	case nil:
		return &node{kind: kindNull}, nil
	case string:
		return &node{kind: kindScalar, str: v, tag: "!!str", quoted: true}, nil
	case bool:
		return &node{kind: kindScalar, str: fmt.Sprint(v), tag: "!!bool"}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(v), ".eE") {
			tag = "!!float"
		}
		return &node{kind: kindScalar, str: string(v), tag: tag}, nil
	case []any:
		n := &node{kind: kindSeq}
		for _, it := range v {
			c, err := fromJSON(it, depth+1, budget)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, c)
		}
		return n, nil
	case map[string]any:
		n := &node{kind: kindMap}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			c, err := fromJSON(v[k], depth+1, budget)
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, k)
			n.vals = append(n.vals, c)
		}
		if len(n.keys) == 1 && isIntrinsicKey(n.keys[0]) {
			return &node{kind: kindFn, fn: n.keys[0], arg: n.vals[0]}, nil
		}
		return n, nil
	}
	return nil, fmt.Errorf("unexpected JSON value %T", v)
}
