package sam

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// Mapping is one resolved Kinesis event source mapping: the mapping's settings with Lambda's
// defaults applied, under the names CreateEventSourceMapping returns, plus what esm needs to know
// about the function and the stream.
type Mapping struct {
	// ID is "<function logical ID>/<event name>" for a SAM event, "<function>/<ESM logical ID>" for
	// an AWS::Lambda::EventSourceMapping.
	ID string `json:"Id"`
	// Source is AWS::Serverless::Function (a SAM event) or AWS::Lambda::EventSourceMapping.
	Source   string   `json:"Source"`
	Function Function `json:"Function"`
	Stream   Stream   `json:"Stream"`
	// Consumer is the enhanced fan-out consumer the mapping reads through, when its source is one.
	Consumer *StreamConsumer `json:"Consumer,omitempty"`

	EventSourceArn                 string            `json:"EventSourceArn"`
	StartingPosition               string            `json:"StartingPosition"`
	StartingPositionTimestamp      *time.Time        `json:"StartingPositionTimestamp,omitempty"`
	BatchSize                      int               `json:"BatchSize"`
	MaximumBatchingWindowInSeconds int               `json:"MaximumBatchingWindowInSeconds"`
	ParallelizationFactor          int               `json:"ParallelizationFactor"`
	BisectBatchOnFunctionError     bool              `json:"BisectBatchOnFunctionError"`
	MaximumRetryAttempts           int               `json:"MaximumRetryAttempts"`
	MaximumRecordAgeInSeconds      int               `json:"MaximumRecordAgeInSeconds"`
	TumblingWindowInSeconds        int               `json:"TumblingWindowInSeconds"`
	FunctionResponseTypes          []string          `json:"FunctionResponseTypes"`
	DestinationConfig              DestinationConfig `json:"DestinationConfig"`
	FilterCriteria                 *FilterCriteria   `json:"FilterCriteria,omitempty"`
	KMSKeyArn                      string            `json:"KMSKeyArn,omitempty"`
	MetricsConfig                  *MetricsConfig    `json:"MetricsConfig,omitempty"`
	Enabled                        bool              `json:"Enabled"`

	event string // the event name or the ESM's logical ID
	line  int
	path  string
}

// Function is the mapped function as the template declares it.
type Function struct {
	// LogicalID is empty when an AWS::Lambda::EventSourceMapping names a function outside the template.
	LogicalID    string `json:"LogicalId,omitempty"`
	Type         string `json:"Type,omitempty"`
	FunctionName string `json:"FunctionName"`
	FunctionArn  string `json:"FunctionArn"`
	// Role is the execution role's ARN: the event's invokeIdentityArn. For a SAM function without a
	// Role, the role SAM creates, <LogicalId>Role.
	Role          string   `json:"Role,omitempty"`
	Handler       string   `json:"Handler,omitempty"`
	Runtime       string   `json:"Runtime,omitempty"`
	CodeUri       string   `json:"CodeUri,omitempty"`
	ImageUri      string   `json:"ImageUri,omitempty"`
	PackageType   string   `json:"PackageType,omitempty"`
	Architectures []string `json:"Architectures,omitempty"`
	// Timeout is in seconds, 1–900. Default 3, as in SAM.
	Timeout int `json:"Timeout"`
	// MemorySize is in MB, 128–10240. Default 128.
	MemorySize                   int               `json:"MemorySize"`
	ReservedConcurrentExecutions *int              `json:"ReservedConcurrentExecutions,omitempty"`
	Environment                  map[string]string `json:"Environment,omitempty"`
}

// Stream is the mapping's stream.
type Stream struct {
	// LogicalID is set when the stream is an AWS::Kinesis::Stream of the template.
	LogicalID string `json:"LogicalId,omitempty"`
	Name      string `json:"Name"`
	Arn       string `json:"Arn"`
	// ShardCount and StreamMode are the template's, for a stream it declares.
	ShardCount int    `json:"ShardCount,omitempty"`
	StreamMode string `json:"StreamMode,omitempty"`
}

// DestinationConfig is where discarded batches are described.
type DestinationConfig struct {
	OnFailure OnFailure `json:"OnFailure"`
}

// OnFailure is the on-failure destination: an SQS queue, an SNS topic or an S3 bucket.
type OnFailure struct {
	Destination string `json:"Destination,omitempty"`
	// Type is SAM's DestinationConfig.OnFailure.Type (SQS, SNS, S3 or Kafka), when given; otherwise
	// derived from the ARN.
	Type string `json:"Type,omitempty"`
	// QueueUrl is the queue's URL on the endpoint in use, for an SQS destination.
	QueueUrl string `json:"QueueUrl,omitempty"`
	// Bucket is the bucket's name, for an S3 destination.
	Bucket string `json:"Bucket,omitempty"`
}

// FilterCriteria are the mapping's event filters.
type FilterCriteria struct {
	Filters []Filter `json:"Filters"`
}

// Filter is one filter pattern, a JSON document.
type Filter struct {
	Pattern string `json:"Pattern"`
}

// MetricsConfig lists the opt-in mapping metrics.
type MetricsConfig struct {
	Metrics []string `json:"Metrics"`
}

// PollerConfig is the mapping as poller.Config, for poller.New. The polling cadence fields
// (PollInterval, ShardSyncInterval, …) are left zero: they are esm's, not the template's.
func (m *Mapping) PollerConfig() poller.Config {
	retries, age := m.MaximumRetryAttempts, m.MaximumRecordAgeInSeconds
	c := poller.Config{
		StreamARN:                  m.EventSourceArn,
		FunctionARN:                m.Function.FunctionArn,
		InvokeIdentityARN:          m.Function.Role,
		BatchSize:                  m.BatchSize,
		MaximumBatchingWindow:      time.Duration(m.MaximumBatchingWindowInSeconds) * time.Second,
		StartingPosition:           m.StartingPosition,
		Disabled:                   !m.Enabled,
		MaximumRetryAttempts:       &retries,
		MaximumRecordAgeInSeconds:  &age,
		BisectBatchOnFunctionError: m.BisectBatchOnFunctionError,
		ReportBatchItemFailures:    slices.Contains(m.FunctionResponseTypes, reportBatchItemFailures),
		OnFailureDestination:       m.DestinationConfig.OnFailure.Destination,
		ParallelizationFactor:      m.ParallelizationFactor,
		TumblingWindow:             time.Duration(m.TumblingWindowInSeconds) * time.Second,
	}
	if m.StartingPositionTimestamp != nil {
		c.StartingPositionTimestamp = *m.StartingPositionTimestamp
	}
	if m.FilterCriteria != nil {
		for _, f := range m.FilterCriteria.Filters {
			c.FilterPatterns = append(c.FilterPatterns, f.Pattern)
		}
	}
	return c
}

const reportBatchItemFailures = "ReportBatchItemFailures"

// Properties of a SAM Kinesis event (spec §1.5), in SAM's documentation order.
var kinesisEventProperties = []string{
	"Stream", "StartingPosition", "StartingPositionTimestamp", "BatchSize", "BisectBatchOnFunctionError",
	"DestinationConfig", "Enabled", "FilterCriteria", "FunctionResponseTypes", "KmsKeyArn",
	"MaximumBatchingWindowInSeconds", "MaximumRecordAgeInSeconds", "MaximumRetryAttempts",
	"MetricsConfig", "ParallelizationFactor", "TumblingWindowInSeconds",
}

// Properties of AWS::Lambda::EventSourceMapping that apply to a Kinesis source.
var esmKinesisProperties = []string{
	"EventSourceArn", "FunctionName", "StartingPosition", "StartingPositionTimestamp", "BatchSize",
	"BisectBatchOnFunctionError", "DestinationConfig", "Enabled", "FilterCriteria", "FunctionResponseTypes",
	"KmsKeyArn", "MaximumBatchingWindowInSeconds", "MaximumRecordAgeInSeconds", "MaximumRetryAttempts",
	"MetricsConfig", "ParallelizationFactor", "TumblingWindowInSeconds", "Tags",
}

// Properties of AWS::Lambda::EventSourceMapping for other kinds of source.
var esmOtherProperties = []string{
	"AmazonManagedKafkaEventSourceConfig", "DocumentDBEventSourceConfig", "LoggingConfig",
	"ProvisionedPollerConfig", "Queues", "ScalingConfig", "SchemaRegistryConfig", "SelfManagedEventSource",
	"SelfManagedKafkaEventSourceConfig", "SourceAccessConfigurations", "Topics",
}

// builder turns resources into mappings.
type builder struct {
	r         *resolver
	globals   *node
	functions map[string]*Function
}

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
		if t.str != "Kinesis" {
			continue
		}
		fn, err := b.function(fnID)
		if err != nil {
			return nil, err
		}
		props := ev.get("Properties")
		if props == nil || props.kind != kindMap {
			return nil, r.errAt(ev, evPath+".Properties", "Missing required property 'Properties': a Kinesis event needs at least Stream and StartingPosition")
		}
		for _, k := range props.keys {
			if !slices.Contains(kinesisEventProperties, k) {
				return nil, r.errAt(props.get(k), evPath+".Properties."+k, "property %s not defined for resource of type Kinesis; the properties are %s", k, strings.Join(kinesisEventProperties, ", "))
			}
		}
		m := &Mapping{ID: fnID + "/" + name, Source: typeServerlessFunction, Function: *fn, event: name, line: events.keyLines[i], path: evPath}
		if err := b.settings(m, props, evPath+".Properties", "Stream", true); err != nil {
			return nil, err
		}
		out = append(out, *m)
	}
	return out, nil
}

// eventSourceMapping reads an AWS::Lambda::EventSourceMapping. It returns nil without an error for
// a mapping of another kind of source, and a warning when the source cannot be resolved.
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
	if s, _ := str(v); !isKinesisARN(s) {
		return nil, "", nil // an SQS, DynamoDB, Kafka or MQ mapping: not esm's
	}
	for _, k := range props.keys {
		switch {
		case slices.Contains(esmKinesisProperties, k):
		case slices.Contains(esmOtherProperties, k):
			return nil, "", r.errAt(props.get(k), path+"."+k, "%s does not apply to a Kinesis event source (it is for SQS, Kafka, MQ or DocumentDB sources)", k)
		default:
			return nil, "", r.errAt(props.get(k), path+"."+k, "Encountered unsupported property %s", k)
		}
	}
	fn, err := b.mappedFunction(props.get("FunctionName"), path+".FunctionName")
	if err != nil {
		return nil, "", err
	}
	fnPart := fn.LogicalID
	if fnPart == "" {
		fnPart = fn.FunctionName
	}
	m := &Mapping{ID: fnPart + "/" + id, Source: typeEventSourceMapping, Function: *fn, event: id, line: r.resources[id].line, path: "Resources." + id}
	if err := b.settings(m, props, path, "EventSourceArn", false); err != nil {
		return nil, "", err
	}
	return m, "", nil
}

func isKinesisARN(s string) bool {
	parts := strings.SplitN(s, ":", 6)
	return len(parts) == 6 && parts[0] == "arn" && parts[2] == "kinesis"
}

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
	name, arn := s, ""
	parts := strings.Split(s, ":")
	switch {
	case len(parts) >= 7 && parts[0] == "arn" && parts[2] == "lambda" && parts[5] == "function":
		name, arn = parts[6], s
	case len(parts) >= 3 && parts[1] == "function":
		name = parts[2]
		arn = fmt.Sprintf("arn:%s:lambda:%s:%s", r.opts.Partition, r.opts.Region, s)
	case len(parts) == 1 && s != "":
		arn = fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", r.opts.Partition, r.opts.Region, r.opts.AccountID, s)
	default:
		return nil, r.errAt(n, path, "FunctionName %q is not a function name, ARN or partial ARN", s)
	}
	if len(s) > 140 {
		return nil, r.errAt(n, path, "1 validation error detected: Value '%s' at 'functionName' failed to satisfy constraint: Member must have length less than or equal to 140", s)
	}
	return &Function{FunctionName: name, FunctionArn: arn, Timeout: 3, MemorySize: 128}, nil
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

	p := props2{r: r, props: props, path: path}
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
	if f.Architectures, _, err = p.strings("Architectures"); err != nil {
		return nil, err
	}
	if len(f.Architectures) == 0 {
		f.Architectures = []string{"x86_64"}
	}
	if len(f.Architectures) > 1 || (f.Architectures[0] != "x86_64" && f.Architectures[0] != "arm64") {
		return nil, p.fail("Architectures", nil, "1 validation error detected: Value '[%s]' at 'architectures' failed to satisfy constraint: Member must satisfy constraint: [Member must have length less than or equal to 1, Member must satisfy enum value set: [x86_64, arm64]]", strings.Join(f.Architectures, ", "))
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
	role, ok, err := p.string("Role")
	switch {
	case err != nil:
		return nil, err
	case ok:
		if !roleARN.MatchString(role) {
			return nil, p.fail("Role", nil, "1 validation error detected: Value '%s' at 'role' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", role, roleARNPattern)
		}
		f.Role = role
	case typ == typeLambdaFunction:
		return nil, r.errAt(r.resources[id], path+".Role", "Role is required for an AWS::Lambda::Function: the ARN of its execution role")
	default:
		v, err := r.getAtt(r.resources[id], path, id+"Role", "Arn")
		if err != nil {
			return nil, err
		}
		f.Role, _ = v.(string)
	}
	if f.Environment, err = p.environment(); err != nil {
		return nil, err
	}
	b.functions[id] = f
	return f, nil
}

const roleARNPattern = `arn:(aws[a-zA-Z-]*)?:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+`

var roleARN = regexp.MustCompile(`^` + roleARNPattern + `$`)

const eventSourceARNPattern = `arn:(aws[a-zA-Z0-9-]*):([a-zA-Z0-9\-])+:([a-z]{2}(-gov)?-[a-z]+-\d{1})?:(\d{12})?:(.*)`

var eventSourceARN = regexp.MustCompile(`^` + eventSourceARNPattern + `$`)

const kmsKeyARNPattern = `(arn:(aws[a-zA-Z-]*)?:[a-z0-9-.]+:.*)|()`

var kmsKeyARN = regexp.MustCompile(`^(?:` + kmsKeyARNPattern + `)$`)

// settings reads the mapping's own properties from props into m, checks each, and then checks the
// whole with poller.Config's validation (Lambda's ranges and messages).
func (b *builder) settings(m *Mapping, props *node, path, streamKey string, sam bool) error {
	r := b.r
	p := props2{r: r, props: props, path: path}

	// The stream.
	src, ok, err := p.string(streamKey)
	if err != nil {
		return err
	}
	if !ok || src == "" {
		if sam {
			return r.errAt(props, path+"."+streamKey, "Missing required property 'Stream': the ARN of the Kinesis stream")
		}
		return r.errAt(props, path+"."+streamKey, "Unrecognized event source.")
	}
	if !eventSourceARN.MatchString(src) {
		return p.fail(streamKey, nil, "1 validation error detected: Value '%s' at 'eventSourceArn' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", src, eventSourceARNPattern)
	}
	sa, consumer, err := b.source(src)
	if err != nil {
		return p.fail(streamKey, err, "")
	}
	m.Consumer = consumer
	if sa.Region != r.opts.Region {
		return p.fail(streamKey, nil, "stream %s is in %s but the function runs in %s (AWS::Region, --region): Lambda reads streams of its own region only", src, sa.Region, r.opts.Region)
	}
	m.EventSourceArn = src
	m.Stream = b.stream(sa)

	if m.StartingPosition, _, err = p.string("StartingPosition"); err != nil {
		return err
	}
	if n := props.get("StartingPositionTimestamp"); n != nil {
		v, err := r.resolve(n, path+".StartingPositionTimestamp")
		if err != nil {
			return err
		}
		s, _ := str(v)
		f, perr := strconv.ParseFloat(s, 64)
		if _, isBool := v.(bool); perr != nil || isBool || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e11 {
			return p.fail("StartingPositionTimestamp", nil, "StartingPositionTimestamp must be a time in Unix seconds (e.g. 1700000000 or 1700000000.5), not %s", describe(v))
		}
		sec, frac := math.Modf(f)
		ts := time.Unix(int64(sec), int64(frac*1e9)).UTC()
		m.StartingPositionTimestamp = &ts
	}
	if m.BatchSize, err = p.intRange("BatchSize", poller.DefaultBatchSize, "batchSize", 1, poller.MaxBatchSize); err != nil {
		return err
	}
	if m.MaximumBatchingWindowInSeconds, err = p.intRange("MaximumBatchingWindowInSeconds", 0, "maximumBatchingWindowInSeconds", 0, 300); err != nil {
		return err
	}
	if m.ParallelizationFactor, err = p.intRange("ParallelizationFactor", 1, "parallelizationFactor", 1, 10); err != nil {
		return err
	}
	if m.TumblingWindowInSeconds, err = p.intRange("TumblingWindowInSeconds", 0, "tumblingWindowInSeconds", 0, 900); err != nil {
		return err
	}
	if m.MaximumRetryAttempts, err = p.intRange("MaximumRetryAttempts", -1, "maximumRetryAttempts", -1, 10000); err != nil {
		return err
	}
	if m.MaximumRecordAgeInSeconds, err = p.intRange("MaximumRecordAgeInSeconds", -1, "maximumRecordAgeInSeconds", -1, 604800); err != nil {
		return err
	}
	if m.BisectBatchOnFunctionError, _, err = p.bool("BisectBatchOnFunctionError"); err != nil {
		return err
	}
	enabled, ok, err := p.bool("Enabled")
	if err != nil {
		return err
	}
	m.Enabled = enabled || !ok

	if m.FunctionResponseTypes, _, err = p.strings("FunctionResponseTypes"); err != nil {
		return err
	}
	if m.FunctionResponseTypes == nil {
		m.FunctionResponseTypes = []string{}
	}
	if n := len(m.FunctionResponseTypes); n > 1 {
		return p.fail("FunctionResponseTypes", nil, "1 validation error detected: Value '[%s]' at 'functionResponseTypes' failed to satisfy constraint: Member must have length less than or equal to 1", strings.Join(m.FunctionResponseTypes, ", "))
	}
	for _, t := range m.FunctionResponseTypes {
		if t != reportBatchItemFailures {
			return p.fail("FunctionResponseTypes", nil, "1 validation error detected: Value '[%s]' at 'functionResponseTypes' failed to satisfy constraint: Member must satisfy constraint: [Member must satisfy enum value set: [ReportBatchItemFailures]]", t)
		}
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
	if m.FilterCriteria, err = p.filterCriteria(sam); err != nil {
		return err
	}
	if m.DestinationConfig, err = p.destinationConfig(sam); err != nil {
		return err
	}

	// Lambda's own validation, on the settings as poller.Config.
	c := m.PollerConfig()
	if err := c.Validate(); err != nil {
		var ve *poller.ValidationError
		if errors.As(err, &ve) {
			key := ve.Field
			if strings.EqualFold(key, "EventSourceArn") {
				key = streamKey
			}
			for _, k := range props.keys {
				if strings.EqualFold(k, key) {
					return p.fail(k, err, "")
				}
			}
			return &Error{File: r.file, Line: props.line, Path: path + "." + key, Message: ve.Message, Err: err}
		}
		return &Error{File: r.file, Line: props.line, Path: path, Message: err.Error(), Err: err}
	}
	if ts := m.StartingPositionTimestamp; ts != nil && ts.After(r.opts.Now()) {
		return p.fail("StartingPositionTimestamp", nil, "StartingPositionTimestamp %s is in the future", ts.Format(time.RFC3339))
	}
	return nil
}

// stream describes the mapping's stream, linking it to the template's stream resource, if any.
func (b *builder) stream(sa poller.StreamARN) Stream {
	r := b.r
	s := Stream{Name: sa.Name, Arn: sa.String()}
	if sa.Account != r.opts.AccountID {
		return s
	}
	for _, id := range r.logicalIDs(typeKinesisStream) {
		if ok, _ := r.exists(id); !ok {
			continue
		}
		name, err := r.physicalName(nil, "", id)
		if err != nil || name != sa.Name {
			continue
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
		break
	}
	return s
}

// props2 reads typed properties of one resource or event, resolving intrinsics.
type props2 struct {
	r     *resolver
	props *node
	path  string
}

// fail reports a problem with property key. With err set, its message is used and it is wrapped.
func (p props2) fail(key string, err error, format string, args ...any) *Error {
	e := p.r.errAt(nil, p.path+"."+key, format, args...)
	e.Line = p.props.keyLine(key)
	if err != nil {
		e.Message, e.Err = err.Error(), err
	}
	return e
}

// value resolves property key; ok is false when it is absent or AWS::NoValue.
func (p props2) value(key string) (v any, ok bool, err error) {
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

func (p props2) string(key string) (string, bool, error) {
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

func (p props2) strings(key string) ([]string, bool, error) {
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
func (p props2) int(key string) (int, bool, error) {
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
func (p props2) intRange(key string, def int, apiName string, lo, hi int64) (int, error) {
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

func (p props2) bool(key string) (bool, bool, error) {
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
func (p props2) code(key string) (string, error) {
	v, ok, err := p.value(key)
	if err != nil || !ok {
		return "", err
	}
	if s, ok := str(v); ok {
		return s, nil
	}
	if m, ok := v.(map[string]any); ok {
		bucket, _ := str(m["Bucket"])
		if bucket == "" {
			bucket, _ = str(m["S3Bucket"])
		}
		k, _ := str(m["Key"])
		if k == "" {
			k, _ = str(m["S3Key"])
		}
		if bucket != "" && k != "" {
			return "s3://" + bucket + "/" + k, nil
		}
		if z, ok := str(m["ZipFile"]); ok {
			_ = z
			return "inline", nil
		}
		if img, ok := str(m["ImageUri"]); ok {
			return img, nil
		}
	}
	return "", p.fail(key, nil, "%s must be a path or an S3 location {Bucket, Key}, not %s", key, describe(v))
}

func (p props2) environment() (map[string]string, error) {
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

var metricNames = []string{"EventCount", "ErrorCount", "KafkaMetrics"}

func (p props2) metricsConfig() (*MetricsConfig, error) {
	v, ok, err := p.value("MetricsConfig")
	if err != nil || !ok {
		return nil, err
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		return nil, p.fail("MetricsConfig", nil, "MetricsConfig must be a mapping {Metrics: [EventCount]}, not %s", describe(v))
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

func describeRaw(v any) string {
	if s, ok := str(v); ok {
		return s
	}
	return describe(v)
}

func (p props2) filterCriteria(sam bool) (*FilterCriteria, error) {
	v, ok, err := p.value("FilterCriteria")
	if err != nil || !ok {
		return nil, err
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		return nil, p.fail("FilterCriteria", nil, "FilterCriteria field has a wrong format: want {Filters: [{Pattern: '<JSON>'}]}, not %s", describe(v))
	}
	for k := range m {
		if k != "Filters" {
			if sam {
				return nil, p.fail("FilterCriteria", nil, "FilterCriteria field has a wrong format: %s is not allowed; the only key is Filters", k)
			}
			return nil, p.fail("FilterCriteria", nil, "Encountered unsupported property FilterCriteria.%s: the only property is Filters", k)
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

var destinationTypes = []string{"SQS", "SNS", "S3", "Kafka"}

func (p props2) destinationConfig(sam bool) (DestinationConfig, error) {
	var dc DestinationConfig
	n := p.props.get("DestinationConfig")
	if n == nil {
		return dc, nil
	}
	v, ok, err := p.value("DestinationConfig")
	if err != nil || !ok {
		return dc, err
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		return dc, p.fail("DestinationConfig", nil, "DestinationConfig must be {OnFailure: {Destination: <ARN>}}, not %s", describe(v))
	}
	for k := range m {
		switch k {
		case "OnFailure":
		case "OnSuccess":
			return dc, p.fail("DestinationConfig", nil, "Unsupported DestinationConfig parameter for given event source mapping type.")
		default:
			return dc, p.fail("DestinationConfig", nil, "Encountered unsupported property DestinationConfig.%s: the only property is OnFailure", k)
		}
	}
	of, ok := m["OnFailure"].(map[string]any)
	if !ok {
		if m["OnFailure"] == nil {
			return dc, nil
		}
		return dc, p.fail("DestinationConfig", nil, "DestinationConfig.OnFailure must be {Destination: <ARN>}, not %s", describe(m["OnFailure"]))
	}
	for k := range of {
		if k != "Destination" && !(sam && k == "Type") {
			return dc, p.fail("DestinationConfig", nil, "Encountered unsupported property DestinationConfig.OnFailure.%s", k)
		}
	}
	if t, present := of["Type"]; present {
		if tn := n.get("OnFailure").get("Type"); tn != nil && tn.kind == kindFn {
			return dc, p.fail("DestinationConfig", nil, "DestinationConfig.OnFailure.Type must be written out (SQS, SNS, S3 or Kafka): SAM does not resolve intrinsic functions there")
		}
		ts, _ := str(t)
		if !slices.Contains(destinationTypes, ts) {
			return dc, p.fail("DestinationConfig", nil, "DestinationConfig.OnFailure.Type %s: The only valid values for 'Type' are 'SQS', 'SNS', 'S3', and 'Kafka'", describe(t))
		}
		dc.OnFailure.Type = ts
	}
	if d, present := of["Destination"]; present && d != nil {
		ds, ok := str(d)
		if !ok {
			return dc, p.fail("DestinationConfig", nil, "DestinationConfig.OnFailure.Destination must be an ARN, not %s", describe(d))
		}
		if len(ds) > 350 {
			return dc, p.fail("DestinationConfig", nil, "1 validation error detected: Value '%s' at 'destinationConfig.onFailure.destination' failed to satisfy constraint: Member must have length less than or equal to 350", ds)
		}
		dc.OnFailure.Destination = ds
	}
	if dc.OnFailure.Destination == "" {
		return dc, nil
	}
	parts := strings.SplitN(dc.OnFailure.Destination, ":", 6)
	if len(parts) == 6 {
		switch parts[2] {
		case "sqs":
			if dc.OnFailure.Type == "" {
				dc.OnFailure.Type = "SQS"
			}
			o := p.r.opts
			o.Region, o.AccountID = parts[3], parts[4]
			dc.OnFailure.QueueUrl = (&resolver{opts: o}).queueURL(parts[5])
		case "sns":
			if dc.OnFailure.Type == "" {
				dc.OnFailure.Type = "SNS"
			}
		case "s3":
			if dc.OnFailure.Type == "" {
				dc.OnFailure.Type = "S3"
			}
			dc.OnFailure.Bucket = parts[5]
		}
	}
	return dc, nil
}
