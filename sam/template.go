package sam

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Defaults for the pseudo parameters, the values sam local uses.
const (
	DefaultRegion    = "us-east-1"
	DefaultAccountID = "123456789012"
	DefaultStackName = "local"
)

// Option sets how Load and Parse resolve a template; nil Options are ignored. Without any, a
// template resolves as sam local resolves it.
type Option func(*options)

// options are the Options given, with their defaults (see newOptions).
type options struct {
	parameterOverrides map[string]string
	region             string
	accountID          string
	partition          string
	stackName          string
	endpointURL        string
	now                func() time.Time
	inputNames         map[Input]string
}

// WithParameterOverrides replaces the parameters' defaults (see ParseParameterOverrides). The
// pseudo parameters AWS::Region, AWS::AccountId, AWS::Partition, AWS::StackName and
// AWS::URLSuffix may be overridden too, and win over WithRegion, WithAccountID, WithPartition and
// WithStackName.
func WithParameterOverrides(overrides map[string]string) Option {
	return func(o *options) { o.parameterOverrides = overrides }
}

// WithRegion sets AWS::Region (default DefaultRegion).
func WithRegion(region string) Option { return func(o *options) { o.region = region } }

// WithAccountID sets AWS::AccountId (default DefaultAccountID).
func WithAccountID(id string) Option { return func(o *options) { o.accountID = id } }

// WithPartition sets AWS::Partition (default: aws, aws-cn or aws-us-gov, from the region).
func WithPartition(partition string) Option { return func(o *options) { o.partition = partition } }

// WithStackName sets AWS::StackName (default DefaultStackName).
func WithStackName(name string) Option { return func(o *options) { o.stackName = name } }

// WithEndpointURL builds queue URLs on url (a local emulator) instead of SQS's regional URLs.
func WithEndpointURL(url string) Option { return func(o *options) { o.endpointURL = url } }

// WithClock sets the clock for "StartingPositionTimestamp is in the future" (default time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithInputNames gives the caller's names for its inputs, which messages that say what to change
// use (a command gives its flags). An input without one is called by Input.String.
func WithInputNames(names map[Input]string) Option { return func(o *options) { o.inputNames = names } }

// newOptions applies opts, then the defaults.
func newOptions(opts ...Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	o.withDefaults()
	return o
}

func (o *options) withDefaults() {
	pick := func(dst *string, key, def string) {
		if v, ok := o.parameterOverrides[key]; ok {
			*dst = v
		}
		if *dst == "" {
			*dst = def
		}
	}
	pick(&o.region, "AWS::Region", DefaultRegion)
	pick(&o.accountID, "AWS::AccountId", DefaultAccountID)
	pick(&o.stackName, "AWS::StackName", DefaultStackName)
	pick(&o.partition, "AWS::Partition", partitionOf(o.region))
	if o.now == nil {
		o.now = time.Now
	}
}

func (o options) urlSuffix() string {
	if v, ok := o.parameterOverrides["AWS::URLSuffix"]; ok {
		return v
	}
	if o.partition == "aws-cn" {
		return "amazonaws.com.cn"
	}
	return "amazonaws.com"
}

func partitionOf(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov"
	}
	return "aws"
}

// Template is a template's resolved Kinesis event source mappings.
type Template struct {
	// File is the template's path as given.
	File string `json:"File"`
	// Mappings are every Kinesis mapping the template declares, sorted by ID.
	Mappings []Mapping `json:"Mappings"`
	// Warnings are things esm skipped, e.g. an AWS::Lambda::EventSourceMapping whose source it
	// could not resolve.
	Warnings []string `json:"Warnings,omitempty"`

	selector string // what messages call Select's selector (WithInputNames)
}

// Load reads and resolves the template at path.
func Load(path string, opts ...Option) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read template: %w", err)
	}
	return Parse(path, data, opts...)
}

// Parse resolves a template given as bytes; file names it in messages.
func Parse(file string, data []byte, opts ...Option) (*Template, error) {
	root, err := parse(file, data)
	if err != nil {
		return nil, err
	}
	r, err := newResolver(file, root, newOptions(opts...))
	if err != nil {
		return nil, err
	}
	globals, err := r.functionGlobals()
	if err != nil {
		return nil, err
	}
	b := builder{r: r, globals: globals, functions: map[string]*Function{}}
	return b.template()
}

// newResolver checks the template's outline (a Resources section of typed resources, SAM's
// transform when it has SAM resources) and its parameters, and returns its resolver.
func newResolver(file string, root *node, opts options) (*resolver, error) {
	r := &resolver{
		file: file, root: root, opts: opts,
		params: map[string]*param{}, resources: map[string]*node{},
		conds: map[string]bool{}, condBusy: map[string]bool{},
		names: map[string]string{}, nameBusy: map[string]bool{},
	}
	if root.kind != kindMap {
		return nil, &Error{File: file, Line: root.line, Message: "a template is a mapping with a Resources section"}
	}
	res := root.get("Resources")
	if res == nil || res.kind != kindMap || len(res.keys) == 0 {
		return nil, r.errAt(res, "Resources", "Template format error: At least one Resources member must be defined.")
	}
	serverless := false
	for i, id := range res.keys {
		rn := res.vals[i]
		t := rn.get("Type")
		if rn.kind != kindMap || t == nil || t.kind != kindScalar || t.str == "" {
			return nil, r.errAt(rn, "Resources."+id, "a resource needs a Type (e.g. AWS::Serverless::Function)")
		}
		if p := rn.get("Properties"); p != nil && p.kind != kindMap {
			return nil, r.errAt(p, "Resources."+id+".Properties", "Properties must be a mapping")
		}
		if strings.HasPrefix(t.str, "AWS::Serverless::") {
			serverless = true
		}
		r.resources[id] = rn
	}
	if serverless && !hasServerlessTransform(root.get("Transform")) {
		return nil, r.errAt(root, "Transform", "the template has AWS::Serverless resources but no 'Transform: AWS::Serverless-2016-10-31' (CloudFormation would reject it: Unrecognized resource types)")
	}
	if err := r.loadParameters(opts.parameterOverrides); err != nil {
		return nil, err
	}
	return r, nil
}

func hasServerlessTransform(n *node) bool {
	if n == nil {
		return false
	}
	if n.kind == kindScalar {
		return n.str == "AWS::Serverless-2016-10-31"
	}
	for _, it := range n.items {
		if it.kind == kindScalar && it.str == "AWS::Serverless-2016-10-31" {
			return true
		}
	}
	return false
}

// functionGlobals returns Globals.Function, checked.
func (r *resolver) functionGlobals() (*node, error) {
	g := r.root.get("Globals")
	if g == nil {
		return nil, nil
	}
	if g.kind != kindMap {
		return nil, r.errAt(g, "Globals", "Globals must be a mapping")
	}
	f := g.get("Function")
	if f == nil {
		return nil, nil
	}
	if f.kind != kindMap {
		return nil, r.errAt(f, "Globals.Function", "Globals.Function must be a mapping of properties")
	}
	if ev := f.get("Events"); ev != nil {
		return nil, r.errAt(ev, "Globals.Function.Events", "'Events' is not a supported property of 'Function' in Globals: declare events on each function")
	}
	return f, nil
}

// mergeGlobals applies SAM's Globals rules: the resource's value wins for scalars, mappings are
// merged key by key, and lists are concatenated (globals first).
func mergeGlobals(global, local *node) *node {
	switch {
	case global == nil:
		return local
	case local == nil:
		return global
	case global.kind == kindMap && local.kind == kindMap:
		out := &node{kind: kindMap, line: local.line, col: local.col}
		for i, k := range global.keys {
			out.keys = append(out.keys, k)
			out.vals = append(out.vals, mergeGlobals(global.vals[i], local.get(k)))
		}
		for i, k := range local.keys {
			if global.get(k) == nil {
				out.keys = append(out.keys, k)
				out.vals = append(out.vals, local.vals[i])
			}
		}
		return out
	case global.kind == kindSeq && local.kind == kindSeq:
		out := &node{kind: kindSeq, line: local.line, col: local.col}
		out.items = append(append(out.items, global.items...), local.items...)
		return out
	}
	return local
}

func checkDuplicates(file string, ms []Mapping) error {
	seen := map[string]string{}
	for _, m := range ms {
		key := m.EventSourceArn + "|" + m.Function.FunctionArn
		if other, ok := seen[key]; ok {
			return &Error{File: file, Line: m.line, Path: m.path, Message: fmt.Sprintf(
				"The event source arn (\" %s \") and function (\" %s \") provided mapping already exists (%s and %s map the same stream to the same function)",
				m.EventSourceArn, m.Function.FunctionName, other, m.ID)}
		}
		seen[key] = m.ID
	}
	return nil
}

// Select returns the mapping a selector (the esm command's --function) names: a function's logical ID or name (when
// it has one Kinesis mapping), "<function>/<event>" (the event's name, or the logical ID of an
// AWS::Lambda::EventSourceMapping), or an ESM's logical ID. An empty selector picks the only
// mapping. Otherwise the *SelectionError lists the candidates.
func (t *Template) Select(selector string) (*Mapping, error) {
	var matched []int
	for i, m := range t.Mappings {
		if selector == "" || m.matches(selector) {
			matched = append(matched, i)
		}
	}
	if len(matched) == 1 {
		return &t.Mappings[matched[0]], nil
	}
	e := &SelectionError{File: t.File, Selector: selector, name: t.selector}
	if len(matched) == 0 {
		e.NoMatch = true
		for _, m := range t.Mappings {
			e.Candidates = append(e.Candidates, m.ID)
		}
		return nil, e
	}
	for _, i := range matched {
		e.Candidates = append(e.Candidates, t.Mappings[i].ID)
	}
	return nil, e
}

// Narrow keeps only the mapping selector names (see Select) in t.Mappings; an empty selector keeps
// every mapping when there is one or more. A selection that fails leaves t as it was, and its
// error (wrapping the *SelectionError) ends with the template's warnings, which often say why a
// mapping is missing.
func (t *Template) Narrow(selector string) error {
	if selector == "" && len(t.Mappings) > 0 {
		return nil
	}
	m, err := t.Select(selector)
	if err != nil {
		if len(t.Warnings) > 0 {
			return fmt.Errorf("%w (%s)", err, strings.Join(t.Warnings, "; "))
		}
		return err
	}
	t.Mappings = []Mapping{*m}
	return nil
}

// SelectFunction returns a mapping of the function a selector names, as Select does, except that
// an empty selector also accepts several mappings when they all name one function (esm invoke
// needs the function, not the mapping): the first of them is returned.
func (t *Template) SelectFunction(selector string) (*Mapping, error) {
	m, err := t.Select(selector)
	if err == nil {
		return m, nil
	}
	var se *SelectionError
	if selector == "" && errors.As(err, &se) && len(t.Mappings) > 1 {
		first := t.Mappings[0].Function.FunctionArn
		for _, o := range t.Mappings[1:] {
			if o.Function.FunctionArn != first {
				return nil, err
			}
		}
		return &t.Mappings[0], nil
	}
	return nil, err
}

func (m *Mapping) matches(sel string) bool {
	if sel == m.ID {
		return true
	}
	fn, ev, hasEvent := strings.Cut(sel, "/")
	fnMatch := fn != "" && (fn == m.Function.LogicalID || fn == m.Function.FunctionName)
	if !hasEvent {
		return fnMatch || (m.Source == typeEventSourceMapping && sel == m.event)
	}
	return fnMatch && ev == m.event
}

// WriteJSON writes the template's mappings as indented JSON (what esm validate --json prints).
func (t *Template) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(t)
}
