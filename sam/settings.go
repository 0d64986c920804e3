package sam

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/source/dynamostreams"
)

const reportBatchItemFailures = "ReportBatchItemFailures"

// settings reads the mapping's own properties from props into m, checks each, and then checks the
// whole with poller.Config's validation (Lambda's ranges and messages).
func (b *builder) settings(m *Mapping, props *node, path string, kind mappingKind) error {
	p := propReader{r: b.r, props: props, path: path}
	if err := b.eventSource(m, p, kind); err != nil {
		return err
	}
	var err error
	if m.StartingPosition, _, err = p.string("StartingPosition"); err != nil {
		return err
	}
	if m.StartingPositionTimestamp, err = p.unixTime("StartingPositionTimestamp"); err != nil {
		return err
	}
	if err := poller.CheckStartingPosition(m.EventSourceArn, m.StartingPosition); err != nil {
		return p.fail("StartingPosition", err, "")
	}
	for _, s := range []struct {
		dst          *int
		key, apiName string
		def          int
		lo, hi       int64
	}{
		{&m.BatchSize, "BatchSize", "batchSize", poller.DefaultBatchSize, 1, poller.MaxBatchSize},
		{&m.MaximumBatchingWindowInSeconds, "MaximumBatchingWindowInSeconds", "maximumBatchingWindowInSeconds", 0, 0, 300},
		{&m.ParallelizationFactor, "ParallelizationFactor", "parallelizationFactor", 1, 1, 10},
		{&m.TumblingWindowInSeconds, "TumblingWindowInSeconds", "tumblingWindowInSeconds", 0, 0, 900},
		{&m.MaximumRetryAttempts, "MaximumRetryAttempts", "maximumRetryAttempts", -1, -1, 10000},
		{&m.MaximumRecordAgeInSeconds, "MaximumRecordAgeInSeconds", "maximumRecordAgeInSeconds", -1, -1, 604800},
	} {
		if *s.dst, err = p.intRange(s.key, s.def, s.apiName, s.lo, s.hi); err != nil {
			return err
		}
	}
	if m.BisectBatchOnFunctionError, _, err = p.bool("BisectBatchOnFunctionError"); err != nil {
		return err
	}
	enabled, ok, err := p.bool("Enabled")
	if err != nil {
		return err
	}
	m.Enabled = enabled || !ok
	if m.FunctionResponseTypes, err = p.functionResponseTypes(); err != nil {
		return err
	}
	if m.KMSKeyArn, _, err = p.string("KmsKeyArn"); err != nil {
		return err
	}
	if !kmsKeyARN.MatchString(m.KMSKeyArn) {
		return p.fail("KmsKeyArn", nil, "1 validation error detected: Value '%s' at 'kMSKeyArn' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", m.KMSKeyArn, kmsKeyARNPattern)
	}
	if m.MetricsConfig, err = p.metricsConfig(); err != nil {
		return err
	}
	if m.FilterCriteria, err = p.filterCriteria(kind); err != nil {
		return err
	}
	if m.DestinationConfig, err = p.destinationConfig(kind); err != nil {
		return err
	}
	if err := p.lambdaValidation(m, kind); err != nil {
		return err
	}
	if ts := m.StartingPositionTimestamp; ts != nil && ts.After(b.r.opts.now()) {
		return p.fail("StartingPositionTimestamp", nil, "StartingPositionTimestamp %s is in the future", ts.Format(time.RFC3339))
	}
	return nil
}

// eventSource reads the mapping's stream (or consumer) ARN, which must be in the function's region.
func (b *builder) eventSource(m *Mapping, p propReader, kind mappingKind) error {
	r, key := b.r, kind.sourceKey
	src, ok, err := p.string(key)
	if err != nil {
		return err
	}
	if !ok || src == "" {
		return r.errAt(p.props, p.path+"."+key, "%s", kind.missingSource)
	}
	if !eventSourceARN.MatchString(src) {
		return p.fail(key, nil, "1 validation error detected: Value '%s' at 'eventSourceArn' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", src, eventSourceARNPattern)
	}
	region := ""
	if dynamostreams.IsStreamARN(src) {
		sa, err := dynamostreams.ParseStreamARN(src)
		if err != nil {
			return p.fail(key, err, "")
		}
		region, m.Stream = sa.Region, b.tableStream(sa)
	} else {
		sa, consumer, err := b.source(src)
		if err != nil {
			return p.fail(key, err, "")
		}
		region, m.Consumer, m.Stream = sa.Region, consumer, b.stream(sa)
	}
	if region != r.opts.region {
		return p.fail(key, nil, "stream %s is in %s but the function runs in %s (AWS::Region, %s): Lambda reads streams of its own region only", src, region, r.opts.region, r.opts.name(InputRegion))
	}
	m.EventSourceArn = src
	return nil
}

// unixTime reads a time in Unix seconds, with a fraction.
func (p propReader) unixTime(key string) (*time.Time, error) {
	n := p.props.get(key)
	if n == nil {
		return nil, nil
	}
	v, err := p.r.resolve(n, p.path+"."+key)
	if err != nil {
		return nil, err
	}
	s, _ := str(v)
	f, perr := strconv.ParseFloat(s, 64)
	if _, isBool := v.(bool); perr != nil || isBool || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e11 {
		return nil, p.fail(key, nil, "%s must be a time in Unix seconds (e.g. 1700000000 or 1700000000.5), not %s", key, describe(v))
	}
	sec, frac := math.Modf(f)
	ts := time.Unix(int64(sec), int64(frac*1e9)).UTC()
	return &ts, nil
}

// functionResponseTypes reads FunctionResponseTypes: empty, or [ReportBatchItemFailures].
func (p propReader) functionResponseTypes() ([]string, error) {
	const key = "FunctionResponseTypes"
	types, _, err := p.strings(key)
	if err != nil {
		return nil, err
	}
	if types == nil {
		types = []string{}
	}
	if len(types) > 1 {
		return nil, p.fail(key, nil, "1 validation error detected: Value '[%s]' at 'functionResponseTypes' failed to satisfy constraint: Member must have length less than or equal to 1", strings.Join(types, ", "))
	}
	for _, t := range types {
		if t != reportBatchItemFailures {
			return nil, p.fail(key, nil, "1 validation error detected: Value '[%s]' at 'functionResponseTypes' failed to satisfy constraint: Member must satisfy constraint: [Member must satisfy enum value set: [ReportBatchItemFailures]]", t)
		}
	}
	return types, nil
}

// lambdaValidation checks the mapping as poller.Config, with Lambda's ranges and messages, and
// places the error at the property it names.
func (p propReader) lambdaValidation(m *Mapping, kind mappingKind) error {
	err := m.PollerConfig().Validate(m.EventSourceArn)
	if err == nil {
		return nil
	}
	var ve *poller.ValidationError
	if !errors.As(err, &ve) {
		return &Error{File: p.r.file, Line: p.props.line, Path: p.path, Message: err.Error(), Err: err}
	}
	key := ve.Field
	if strings.EqualFold(key, "EventSourceArn") {
		key = kind.sourceKey
	}
	if i := slices.IndexFunc(p.props.keys, func(k string) bool { return strings.EqualFold(k, key) }); i >= 0 {
		return p.fail(p.props.keys[i], err, "")
	}
	return &Error{File: p.r.file, Line: p.props.line, Path: p.path + "." + key, Message: ve.Message, Err: err}
}

var metricNames = []string{"EventCount", "ErrorCount", "KafkaMetrics"}

// metricsConfig reads MetricsConfig: {Metrics: [...]} of Lambda's metric names.
func (p propReader) metricsConfig() (*MetricsConfig, error) {
	m, ok, err := p.mapping("MetricsConfig", "MetricsConfig must be a mapping {Metrics: [EventCount]}, not %s")
	if err != nil || !ok {
		return nil, err
	}
	for k := range m {
		if k != "Metrics" {
			return nil, p.fail("MetricsConfig", nil, "Encountered unsupported property MetricsConfig.%s: the only property is Metrics", k)
		}
	}
	list, _ := m["Metrics"].([]any)
	out := &MetricsConfig{Metrics: []string{}}
	for _, it := range list {
		s, _ := str(it)
		if !slices.Contains(metricNames, s) {
			return nil, p.fail("MetricsConfig", nil, "1 validation error detected: Value '[%s]' at 'metricsConfig.metrics' failed to satisfy constraint: Member must satisfy constraint: [Member must satisfy enum value set: [EventCount, ErrorCount, KafkaMetrics]]", describeRaw(it))
		}
		out.Metrics = append(out.Metrics, s)
	}
	return out, nil
}

// describeRaw is a scalar as written, anything else described.
func describeRaw(v any) string {
	if s, ok := str(v); ok {
		return s
	}
	return describe(v)
}

// filterCriteria reads FilterCriteria: {Filters: [{Pattern: '<JSON>'}]}; the patterns' syntax is
// checked with the whole mapping (lambdaValidation).
func (p propReader) filterCriteria(kind mappingKind) (*FilterCriteria, error) {
	m, ok, err := p.mapping("FilterCriteria", "FilterCriteria field has a wrong format: want {Filters: [{Pattern: '<JSON>'}]}, not %s")
	if err != nil || !ok {
		return nil, err
	}
	for k := range m {
		if k != "Filters" {
			return nil, p.fail("FilterCriteria", nil, kind.unknownFilterKey, k)
		}
	}
	raw, present := m["Filters"]
	if !present {
		return nil, nil
	}
	list, isList := raw.([]any)
	if !isList {
		return nil, p.fail("FilterCriteria", nil, "FilterCriteria.Filters must be a list of {Pattern: '<JSON>'}, not %s", describe(raw))
	}
	if len(list) == 0 {
		return nil, nil // accepted, and omitted from the mapping, as Lambda does
	}
	fc := &FilterCriteria{}
	for i, it := range list {
		f, ok := it.(map[string]any)
		if !ok {
			return nil, p.fail("FilterCriteria", nil, "FilterCriteria.Filters[%d] must be {Pattern: '<JSON>'}, not %s", i, describe(it))
		}
		for k := range f {
			if k != "Pattern" {
				return nil, p.fail("FilterCriteria", nil, "Encountered unsupported property FilterCriteria.Filters[%d].%s: the only property is Pattern", i, k)
			}
		}
		pat, ok := f["Pattern"].(string) // its syntax is checked by poller.Config's validation
		if !ok {
			return nil, p.fail("FilterCriteria", nil, "FilterCriteria.Filters[%d].Pattern must be a JSON string, not %s", i, describe(f["Pattern"]))
		}
		fc.Filters = append(fc.Filters, Filter{Pattern: pat})
	}
	return fc, nil
}
