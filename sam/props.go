package sam

import (
	"cmp"
	"math"
	"strconv"
	"strings"

	"github.com/kinesis-esm/esm/poller"
)

// propReader reads typed properties of one resource or event, resolving intrinsics.
type propReader struct {
	r     *resolver
	props *node
	path  string
}

// fail reports a problem with property key. With err set, its message is used and it is wrapped.
func (p propReader) fail(key string, err error, format string, args ...any) *Error {
	e := p.r.errAt(nil, p.path+"."+key, format, args...)
	e.Line = p.props.keyLine(key)
	if err != nil {
		e.Message, e.Err = err.Error(), err
	}
	return e
}

// value resolves property key; ok is false when it is absent or AWS::NoValue.
func (p propReader) value(key string) (v any, ok bool, err error) {
	n := p.props.get(key)
	if n == nil {
		return nil, false, nil
	}
	v, err = p.r.resolve(n, p.path+"."+key)
	if err != nil || v == noValue || v == nil {
		return nil, false, err
	}
	return v, true, nil
}

// mapping resolves property key as a mapping; notMapping is the message otherwise (its %s says
// what the value is).
func (p propReader) mapping(key, notMapping string) (map[string]any, bool, error) {
	v, ok, err := p.value(key)
	if err != nil || !ok {
		return nil, false, err
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		return nil, false, p.fail(key, nil, notMapping, describe(v))
	}
	return m, true, nil
}

func (p propReader) string(key string) (string, bool, error) {
	v, ok, err := p.value(key)
	if err != nil || !ok {
		return "", false, err
	}
	s, isStr := str(v)
	if !isStr {
		return "", false, p.fail(key, nil, "%s must be a string, not %s", key, describe(v))
	}
	return s, true, nil
}

func (p propReader) strings(key string) ([]string, bool, error) {
	v, ok, err := p.value(key)
	if err != nil || !ok {
		return nil, false, err
	}
	l, isList := v.([]any)
	if !isList {
		return nil, false, p.fail(key, nil, "%s must be a list of strings, not %s", key, describe(v))
	}
	out := make([]string, 0, len(l))
	for _, it := range l {
		s, ok := str(it)
		if !ok {
			return nil, false, p.fail(key, nil, "%s must be a list of strings; it holds %s", key, describe(it))
		}
		out = append(out, s)
	}
	return out, true, nil
}

// int reads an integer: a number, or a string holding one (CloudFormation accepts both).
func (p propReader) int(key string) (int, bool, error) {
	v, ok, err := p.value(key)
	if err != nil || !ok {
		return 0, false, err
	}
	s, isScalar := str(v)
	_, isBool := v.(bool)
	i, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if !isScalar || isBool || perr != nil {
		return 0, false, p.fail(key, nil, "%s must be an integer, not %s", key, describe(v))
	}
	if i > math.MaxInt32 || i < math.MinInt32 {
		return int(min(max(i, math.MinInt32-1), math.MaxInt32+1)), true, nil
	}
	return int(i), true, nil
}

// intRange reads an integer with a default and checks it against [lo, hi] with Lambda's message.
func (p propReader) intRange(key string, def int, apiName string, lo, hi int64) (int, error) {
	v, ok, err := p.int(key)
	if err != nil {
		return 0, err
	}
	if !ok {
		return def, nil
	}
	if int64(v) < lo || int64(v) > hi {
		if key == "MaximumRecordAgeInSeconds" {
			return 0, p.fail(key, nil, "MaximumRecordAgeInSeconds must be either -1 (forever) or between 60 and 604800 (inclusive); got %d", v)
		}
		return 0, p.fail(key, poller.RangeError(apiName, int64(v), lo, hi), "")
	}
	return v, nil
}

func (p propReader) bool(key string) (bool, bool, error) {
	v, ok, err := p.value(key)
	if err != nil || !ok {
		return false, false, err
	}
	switch v := v.(type) {
	case bool:
		return v, true, nil
	case string:
		switch strings.ToLower(v) {
		case "true":
			return true, true, nil
		case "false":
			return false, true, nil
		}
	}
	return false, false, p.fail(key, nil, "%s must be true or false, not %s", key, describe(v))
}

// code renders CodeUri (a path or an S3 location) or Code as a string.
func (p propReader) code(key string) (string, error) {
	v, ok, err := p.value(key)
	if err != nil || !ok {
		return "", err
	}
	if s, ok := str(v); ok {
		return s, nil
	}
	if m, ok := v.(map[string]any); ok {
		field := func(k string) string { s, _ := str(m[k]); return s }
		bucket, key := cmp.Or(field("Bucket"), field("S3Bucket")), cmp.Or(field("Key"), field("S3Key"))
		if bucket != "" && key != "" {
			return "s3://" + bucket + "/" + key, nil
		}
		if _, ok := str(m["ZipFile"]); ok {
			return "inline", nil
		}
		if img, ok := str(m["ImageUri"]); ok {
			return img, nil
		}
	}
	return "", p.fail(key, nil, "%s must be a path or an S3 location {Bucket, Key}, not %s", key, describe(v))
}

func (p propReader) environment() (map[string]string, error) {
	env := p.props.get("Environment")
	if env == nil {
		return nil, nil
	}
	vars := env.get("Variables")
	path := p.path + ".Environment.Variables"
	if vars == nil {
		return nil, nil
	}
	if vars.kind != kindMap {
		v, err := p.r.resolve(vars, path)
		if err != nil {
			return nil, err
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, p.r.errAt(vars, path, "Variables must be a mapping of names to strings, not %s", describe(v))
		}
		out := map[string]string{}
		for k, it := range m {
			s, ok := str(it)
			if !ok {
				return nil, p.r.errAt(vars, path+"."+k, "%s must be a string, not %s", k, describe(it))
			}
			out[k] = s
		}
		return out, nil
	}
	out := map[string]string{}
	for i, k := range vars.keys {
		v, err := p.r.resolve(vars.vals[i], path+"."+k)
		if err != nil {
			return nil, err
		}
		if v == noValue {
			continue
		}
		s, ok := str(v)
		if !ok {
			return nil, p.r.errAt(vars.vals[i], path+"."+k, "%s must be a string, not %s", k, describe(v))
		}
		out[k] = s
	}
	return out, nil
}
