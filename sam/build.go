package sam

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kinesis-esm/esm/source/dynamostreams"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// builder turns resources into mappings.
type builder struct {
	r         *resolver
	globals   *node
	functions map[string]*Function
}

// template builds every Kinesis mapping of the template, sorted by ID.
func (b *builder) template() (*Template, error) {
	r := b.r
	t := &Template{File: r.file, selector: r.opts.name(InputSelector)}
	for _, id := range r.logicalIDs(typeServerlessFunction) {
		ms, err := b.serverlessEvents(id)
		if err != nil {
			return nil, err
		}
		t.Mappings = append(t.Mappings, ms...)
	}
	for _, id := range r.logicalIDs(typeEventSourceMapping) {
		m, warning, err := b.eventSourceMapping(id)
		if err != nil {
			return nil, err
		}
		if warning != "" {
			t.Warnings = append(t.Warnings, warning)
		}
		if m != nil {
			t.Mappings = append(t.Mappings, *m)
		}
	}
	slices.SortFunc(t.Mappings, func(a, b Mapping) int { return strings.Compare(a.ID, b.ID) })
	if err := checkDuplicates(r.file, t.Mappings); err != nil {
		return nil, err
	}
	return t, nil
}

// serverlessEvents builds the mappings of the Kinesis and DynamoDB events of SAM function fnID.
func (b *builder) serverlessEvents(fnID string) ([]Mapping, error) {
	r := b.r
	ok, err := r.exists(fnID)
	if err != nil || !ok {
		return nil, err
	}
	events := r.property(fnID, "Events")
	if events == nil {
		return nil, nil
	}
	path := "Resources." + fnID + ".Properties.Events"
	if events.kind != kindMap {
		return nil, r.errAt(events, path, "Events must be a mapping of event names to events")
	}
	var out []Mapping
	for i, name := range events.keys {
		ev := events.vals[i]
		evPath := path + "." + name
		t := ev.get("Type")
		if ev.kind != kindMap || t == nil || t.kind != kindScalar {
			return nil, r.errAt(ev, evPath, "an event needs a Type (e.g. Kinesis) and Properties")
		}
		if t.str != "Kinesis" && t.str != "DynamoDB" {
			continue
		}
		fn, err := b.function(fnID)
		if err != nil {
			return nil, err
		}
		props := ev.get("Properties")
		if props == nil || props.kind != kindMap {
			return nil, r.errAt(ev, evPath+".Properties", "Missing required property 'Properties': a %s event needs at least Stream and StartingPosition", t.str)
		}
		for _, k := range props.keys {
			if !slices.Contains(kinesisEventProperties, k) {
				return nil, r.errAt(props.get(k), evPath+".Properties."+k, "property %s not defined for resource of type %s; the properties are %s", k, t.str, strings.Join(kinesisEventProperties, ", "))
			}
		}
		m := &Mapping{ID: fnID + "/" + name, Source: samEvent.source, Function: *fn, event: name, line: events.keyLines[i], path: evPath}
		if err := b.settings(m, props, evPath+".Properties", samEvent); err != nil {
			return nil, err
		}
		out = append(out, *m)
	}
	return out, nil
}

// eventSourceMapping builds the mapping of an AWS::Lambda::EventSourceMapping. It returns nil
// without an error for a mapping of another kind of source, and a warning when the source cannot
// be resolved.
func (b *builder) eventSourceMapping(id string) (*Mapping, string, error) {
	r := b.r
	ok, err := r.exists(id)
	if err != nil || !ok {
		return nil, "", err
	}
	path := "Resources." + id + ".Properties"
	props := r.resources[id].get("Properties")
	src := props.get("EventSourceArn")
	if src == nil {
		return nil, "", r.errAt(r.resources[id], path+".EventSourceArn", "Unrecognized event source.")
	}
	v, err := r.resolve(src, path+".EventSourceArn")
	if err != nil {
		return nil, fmt.Sprintf("%s: skipped: its EventSourceArn cannot be resolved (%v)", id, err), nil
	}
	s, _ := str(v)
	if !isStreamARN(s) {
		return nil, "", nil // an SQS, Kafka, MQ or DocumentDB mapping: not esm's
	}
	kind := "Kinesis"
	if dynamostreams.IsStreamARN(s) {
		kind = "DynamoDB"
	}
	for _, k := range props.keys {
		switch {
		case slices.Contains(esmKinesisProperties, k):
		case slices.Contains(esmOtherProperties, k):
			return nil, "", r.errAt(props.get(k), path+"."+k, "%s does not apply to a %s event source (it is for SQS, Kafka, MQ or DocumentDB sources)", k, kind)
		default:
			return nil, "", r.errAt(props.get(k), path+"."+k, "Encountered unsupported property %s", k)
		}
	}
	fn, err := b.mappedFunction(props.get("FunctionName"), path+".FunctionName")
	if err != nil {
		return nil, "", err
	}
	m := &Mapping{ID: cmp.Or(fn.LogicalID, fn.FunctionName) + "/" + id, Source: esmResource.source, Function: *fn, event: id, line: r.resources[id].line, path: "Resources." + id}
	if err := b.settings(m, props, path, esmResource); err != nil {
		return nil, "", err
	}
	return m, "", nil
}

// stream describes the mapping's stream, linking it to the template's stream resource, if any.
func (b *builder) stream(sa kinesissrc.StreamARN) Stream {
	r := b.r
	s := Stream{Name: sa.Name, Arn: sa.String()}
	if sa.Account != r.opts.accountID {
		return s
	}
	id := r.declared(typeKinesisStream, sa.Name)
	if id == "" {
		return s
	}
	s.LogicalID = id
	if n := r.property(id, "ShardCount"); n != nil {
		if v, err := r.resolve(n, ""); err == nil {
			if c, ok := str(v); ok {
				s.ShardCount, _ = strconv.Atoi(c)
			}
		}
	}
	if n := r.property(id, "StreamModeDetails").get("StreamMode"); n != nil {
		if v, err := r.resolve(n, ""); err == nil {
			s.StreamMode, _ = str(v)
		}
	}
	return s
}

// declared is the logical ID of the template's resource of type typ (one created) whose
// physical name is name; "" when there is none.
func (r *resolver) declared(typ, name string) string {
	for _, id := range r.logicalIDs(typ) {
		if ok, _ := r.exists(id); !ok {
			continue
		}
		if n, err := r.physicalName(nil, "", id); err == nil && n == name {
			return id
		}
	}
	return ""
}
