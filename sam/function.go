package sam

import (
	"fmt"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/kinesis-esm/esm/poller"
)

// mappedFunction resolves an ESM's FunctionName: !Ref or !GetAtt of a template function, a name,
// an ARN or a partial ARN.
func (b *builder) mappedFunction(n *node, path string) (*Function, error) {
	r := b.r
	if n == nil {
		return nil, r.errAt(nil, path, "Function does not exist: FunctionName is required")
	}
	if n.kind == kindFn && (n.fn == "Ref" || n.fn == "Fn::GetAtt") && n.arg != nil {
		id := n.arg.str
		if n.arg.kind == kindSeq && len(n.arg.items) > 0 {
			id = n.arg.items[0].str
		}
		id, _, _ = strings.Cut(id, ".")
		if t := r.resourceType(id); t == typeServerlessFunction || t == typeLambdaFunction {
			return b.function(id)
		}
	}
	s, err := r.evalString(n, path, 0, "FunctionName")
	if err != nil {
		return nil, err
	}
	for _, id := range r.logicalIDs(typeServerlessFunction, typeLambdaFunction) {
		if ok, _ := r.exists(id); !ok {
			continue
		}
		name, err := r.physicalName(n, path, id)
		if err != nil {
			continue
		}
		arn, _ := r.getAtt(n, path, id, "Arn")
		if s == name || s == arn {
			return b.function(id)
		}
	}
	// A function outside the template: its name, ARN (maybe qualified) or partial ARN.
	name, fnARN := s, ""
	a, err := arn.Parse(s)
	fnName, isFunction := strings.CutPrefix(a.Resource, "function:")
	parts := strings.Split(s, ":") // a partial ARN, ACCOUNT:function:NAME[:QUALIFIER], is no ARN
	switch {
	case err == nil && a.Service == "lambda" && isFunction:
		name, _, _ = strings.Cut(fnName, ":") // without the qualifier
		fnARN = s
	case len(parts) >= 3 && parts[1] == "function":
		name = parts[2]
		fnARN = fmt.Sprintf("arn:%s:lambda:%s:%s", r.opts.partition, r.opts.region, s)
	case len(parts) == 1 && s != "":
		fnARN = fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", r.opts.partition, r.opts.region, r.opts.accountID, s)
	default:
		return nil, r.errAt(n, path, "FunctionName %q is not a function name, ARN or partial ARN", s)
	}
	if len(s) > 140 {
		return nil, r.errAt(n, path, "1 validation error detected: Value '%s' at 'functionName' failed to satisfy constraint: Member must have length less than or equal to 140", s)
	}
	return &Function{FunctionName: name, FunctionArn: fnARN, Timeout: 3, MemorySize: 128}, nil
}

// function reads a function resource (with Globals for a SAM function), once.
func (b *builder) function(id string) (*Function, error) {
	if f, ok := b.functions[id]; ok {
		return f, nil
	}
	r := b.r
	typ := r.resourceType(id)
	props := r.resources[id].get("Properties")
	if typ == typeServerlessFunction {
		props = mergeGlobals(b.globals, props)
	}
	path := "Resources." + id + ".Properties"
	f := &Function{LogicalID: id, Type: typ}
	var err error
	if f.FunctionName, err = r.physicalName(r.resources[id], path+".FunctionName", id); err != nil {
		return nil, err
	}
	arn, err := r.getAtt(r.resources[id], path, id, "Arn")
	if err != nil {
		return nil, err
	}
	f.FunctionArn, _ = arn.(string)

	p := propReader{r: r, props: props, path: path}
	for _, s := range []struct {
		key string
		dst *string
	}{{"Handler", &f.Handler}, {"Runtime", &f.Runtime}, {"ImageUri", &f.ImageUri}, {"PackageType", &f.PackageType}} {
		if *s.dst, _, err = p.string(s.key); err != nil {
			return nil, err
		}
	}
	codeKey := "CodeUri"
	if typ == typeLambdaFunction {
		codeKey = "Code"
	}
	if f.CodeUri, err = p.code(codeKey); err != nil {
		return nil, err
	}
	if f.Architectures, err = p.architectures(); err != nil {
		return nil, err
	}
	if f.Timeout, err = p.intRange("Timeout", 3, "timeout", 1, 900); err != nil {
		return nil, err
	}
	if f.MemorySize, err = p.intRange("MemorySize", 128, "memorySize", 128, 10240); err != nil {
		return nil, err
	}
	if v, ok, err := p.int("ReservedConcurrentExecutions"); err != nil {
		return nil, err
	} else if ok {
		if v < 0 {
			return nil, p.fail("ReservedConcurrentExecutions", poller.RangeError("reservedConcurrentExecutions", int64(v), 0, math.MaxInt32), "")
		}
		f.ReservedConcurrentExecutions = &v
	}
	if f.Role, err = b.role(id, typ, p); err != nil {
		return nil, err
	}
	if f.Environment, err = p.environment(); err != nil {
		return nil, err
	}
	b.functions[id] = f
	return f, nil
}

// architectures reads Architectures: one of x86_64 (the default) and arm64.
func (p propReader) architectures() ([]string, error) {
	archs, _, err := p.strings("Architectures")
	if err != nil {
		return nil, err
	}
	if len(archs) == 0 {
		return []string{"x86_64"}, nil
	}
	if len(archs) > 1 || (archs[0] != "x86_64" && archs[0] != "arm64") {
		return nil, p.fail("Architectures", nil, "1 validation error detected: Value '[%s]' at 'architectures' failed to satisfy constraint: Member must satisfy constraint: [Member must have length less than or equal to 1, Member must satisfy enum value set: [x86_64, arm64]]", strings.Join(archs, ", "))
	}
	return archs, nil
}

// role is the ARN of function id's execution role: its Role, or for a SAM function without one
// the role SAM creates.
func (b *builder) role(id, typ string, p propReader) (string, error) {
	role, ok, err := p.string("Role")
	switch {
	case err != nil:
		return "", err
	case ok:
		if !roleARN.MatchString(role) {
			return "", p.fail("Role", nil, "1 validation error detected: Value '%s' at 'role' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", role, roleARNPattern)
		}
		return role, nil
	case typ == typeLambdaFunction:
		return "", b.r.errAt(b.r.resources[id], p.path+".Role", "Role is required for an AWS::Lambda::Function: the ARN of its execution role")
	}
	v, err := b.r.getAtt(b.r.resources[id], p.path, id+"Role", "Arn")
	if err != nil {
		return "", err
	}
	arn, _ := v.(string) // getAtt of a role's Arn is a string
	return arn, nil
}
