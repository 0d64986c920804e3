package esmapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/sam"
	"github.com/kinesis-esm/esm/source/dynamostreams"
	kinesissrc "github.com/kinesis-esm/esm/source/kinesis"
)

// States of a mapping, as Lambda names them.
const (
	StateCreating  = "Creating"
	StateEnabling  = "Enabling"
	StateEnabled   = "Enabled"
	StateDisabling = "Disabling"
	StateDisabled  = "Disabled"
	StateUpdating  = "Updating"
	StateDeleting  = "Deleting"
)

// LastProcessingResult values.
const (
	ResultNone    = "No records processed"
	ResultOK      = "OK"
	ResultProblem = "PROBLEM: " // followed by what went wrong
)

// userAction is the StateTransitionReason of every change made through the API.
const userAction = "User action"

// EventSourceMapping is a Kinesis mapping as the API returns it (Lambda's
// EventSourceMappingConfiguration): every field AWS returns for a Kinesis mapping, in AWS's order.
type EventSourceMapping struct {
	BatchSize                      int               `json:"BatchSize"`
	BisectBatchOnFunctionError     bool              `json:"BisectBatchOnFunctionError"`
	DestinationConfig              DestinationConfig `json:"DestinationConfig"`
	EventSourceArn                 string            `json:"EventSourceArn"`
	EventSourceMappingArn          string            `json:"EventSourceMappingArn"`
	FilterCriteria                 *FilterCriteria   `json:"FilterCriteria,omitempty"`
	FunctionArn                    string            `json:"FunctionArn"`
	FunctionResponseTypes          []string          `json:"FunctionResponseTypes"`
	KMSKeyArn                      string            `json:"KMSKeyArn,omitempty"`
	LastModified                   Timestamp         `json:"LastModified"`
	LastProcessingResult           string            `json:"LastProcessingResult"`
	MaximumBatchingWindowInSeconds int               `json:"MaximumBatchingWindowInSeconds"`
	MaximumRecordAgeInSeconds      int               `json:"MaximumRecordAgeInSeconds"`
	MaximumRetryAttempts           int               `json:"MaximumRetryAttempts"`
	MetricsConfig                  *MetricsConfig    `json:"MetricsConfig,omitempty"`
	ParallelizationFactor          int               `json:"ParallelizationFactor"`
	StartingPosition               string            `json:"StartingPosition"`
	StartingPositionTimestamp      *Timestamp        `json:"StartingPositionTimestamp,omitempty"`
	State                          string            `json:"State"`
	StateTransitionReason          string            `json:"StateTransitionReason"`
	TumblingWindowInSeconds        int               `json:"TumblingWindowInSeconds"`
	UUID                           string            `json:"UUID"`
}

// DestinationConfig is the mapping's on-failure destination; {"OnFailure": {}} when it has none.
type DestinationConfig struct {
	OnFailure OnFailure `json:"OnFailure"`
}

// OnFailure names the SQS queue, SNS topic or S3 bucket of discarded batches.
type OnFailure struct {
	Destination string `json:"Destination,omitempty"`
}

// FilterCriteria, Filter and MetricsConfig are the template's types: the same members, in JSON
// as the API carries them.
type (
	FilterCriteria = sam.FilterCriteria
	Filter         = sam.Filter
	MetricsConfig  = sam.MetricsConfig
)

// Timestamp is a time as the Lambda API's JSON carries it: Unix epoch seconds, fractional.
type Timestamp struct{ time.Time }

// MarshalJSON writes epoch seconds with millisecond precision.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)), nil
}

// UnmarshalJSON reads epoch seconds (a number, possibly fractional).
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e11 {
		return fmt.Errorf("timestamp %s: want Unix epoch seconds", b)
	}
	// Milliseconds, as it is written back: what is accepted is what is kept.
	t.Time = time.UnixMilli(int64(math.Round(f * 1000))).UTC()
	return nil
}

// destinationIn is DestinationConfig as a request gives it; OnSuccess is refused.
type destinationIn struct {
	OnFailure *struct {
		Destination *string `json:"Destination"`
	} `json:"OnFailure"`
	OnSuccess json.RawMessage `json:"OnSuccess"`
}

// settingsIn are the members Create and Update share.
type settingsIn struct {
	FunctionName                   *string         `json:"FunctionName"`
	Enabled                        *bool           `json:"Enabled"`
	BatchSize                      *int            `json:"BatchSize"`
	FilterCriteria                 *FilterCriteria `json:"FilterCriteria"`
	MaximumBatchingWindowInSeconds *int            `json:"MaximumBatchingWindowInSeconds"`
	ParallelizationFactor          *int            `json:"ParallelizationFactor"`
	DestinationConfig              *destinationIn  `json:"DestinationConfig"`
	MaximumRecordAgeInSeconds      *int            `json:"MaximumRecordAgeInSeconds"`
	BisectBatchOnFunctionError     *bool           `json:"BisectBatchOnFunctionError"`
	MaximumRetryAttempts           *int            `json:"MaximumRetryAttempts"`
	TumblingWindowInSeconds        *int            `json:"TumblingWindowInSeconds"`
	FunctionResponseTypes          *[]string       `json:"FunctionResponseTypes"`
	KMSKeyArn                      *string         `json:"KMSKeyArn"`
	MetricsConfig                  *MetricsConfig  `json:"MetricsConfig"`
	ScalingConfig                  json.RawMessage `json:"ScalingConfig"`
	ProvisionedPollerConfig        json.RawMessage `json:"ProvisionedPollerConfig"`
	LoggingConfig                  json.RawMessage `json:"LoggingConfig"`
	SourceAccessConfigurations     json.RawMessage `json:"SourceAccessConfigurations"`
	DocumentDBEventSourceConfig    json.RawMessage `json:"DocumentDBEventSourceConfig"`
	AmazonManagedKafkaConfig       json.RawMessage `json:"AmazonManagedKafkaEventSourceConfig"`
	SelfManagedKafkaConfig         json.RawMessage `json:"SelfManagedKafkaEventSourceConfig"`
}

// createRequest is CreateEventSourceMapping's body.
type createRequest struct {
	settingsIn
	EventSourceArn            *string           `json:"EventSourceArn"`
	StartingPosition          *string           `json:"StartingPosition"`
	StartingPositionTimestamp *Timestamp        `json:"StartingPositionTimestamp"`
	Tags                      map[string]string `json:"Tags"`
	Topics                    json.RawMessage   `json:"Topics"`
	Queues                    json.RawMessage   `json:"Queues"`
	SelfManagedEventSource    json.RawMessage   `json:"SelfManagedEventSource"`
}

// updateRequest is UpdateEventSourceMapping's body. It has no member for the stream or the
// starting position: those cannot change, as in AWS.
type updateRequest struct {
	settingsIn
}

// maxBody bounds a request body; Lambda's requests are far smaller.
const maxBody = 1 << 20

// decodeBody parses a JSON request body into v. An empty body is an empty request.
func decodeBody(body []byte, v any) *APIError {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &APIError{Status: 400, Type: Serialization, Message: "Could not parse the request body: " + err.Error()}
	}
	return nil
}

// parseCreate parses a CreateEventSourceMapping body. It is the parser the fuzz test drives.
func parseCreate(body []byte) (*createRequest, *APIError) {
	var r createRequest
	if e := decodeBody(body, &r); e != nil {
		return nil, e
	}
	return &r, nil
}

// parseUpdate parses an UpdateEventSourceMapping body.
func parseUpdate(body []byte) (*updateRequest, *APIError) {
	var r updateRequest
	if e := decodeBody(body, &r); e != nil {
		return nil, e
	}
	return &r, nil
}

// Patterns and lengths of the API model.
var (
	arnPattern          = `arn:(aws[a-zA-Z0-9-]*):([a-zA-Z0-9\-])+:([a-z]{2}(-gov)?-[a-z]+-\d{1})?:(\d{12})?:(.*)`
	arnRE               = regexp.MustCompile(`^` + arnPattern + `$`)
	functionNamePattern = `(arn:(aws[a-zA-Z-]*)?:lambda:)?([a-z]{2}(-gov)?-[a-z]+-\d{1}:)?(\d{12}:)?(function:)?([a-zA-Z0-9-_]+)(:(\$LATEST|[a-zA-Z0-9-_]+))?`
	functionNameRE      = regexp.MustCompile(`^` + functionNamePattern + `$`)
)

func nullError(member string) *APIError {
	return validation("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", member)
}

// checkModel applies the API model's own constraints on the members only the API has (the
// mapping's settings are poller's to check).
func (s *settingsIn) checkModel() *APIError {
	if s.FunctionName != nil {
		n := *s.FunctionName
		switch {
		case len(n) < 1:
			return validation("1 validation error detected: Value '%s' at 'functionName' failed to satisfy constraint: Member must have length greater than or equal to 1", n)
		case len(n) > 140:
			return validation("1 validation error detected: Value '%s' at 'functionName' failed to satisfy constraint: Member must have length less than or equal to 140", n)
		case !functionNameRE.MatchString(n):
			return validation("1 validation error detected: Value '%s' at 'functionName' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", n, functionNamePattern)
		}
	}
	if v := s.MaximumRecordAgeInSeconds; v != nil && (*v < -1 || *v > 604800) {
		return fromConfig(poller.RangeError("maximumRecordAgeInSeconds", int64(*v), -1, 604800))
	}
	if t := s.FunctionResponseTypes; t != nil && len(*t) > 1 {
		return validation("1 validation error detected: Value '[%s]' at 'functionResponseTypes' failed to satisfy constraint: Member must have length less than or equal to 1", strings.Join(*t, ", "))
	}
	if d := s.DestinationConfig; d != nil && d.OnFailure != nil && d.OnFailure.Destination != nil && len(*d.OnFailure.Destination) > 350 {
		return validation("1 validation error detected: Value '%s' at 'destinationConfig.onFailure.destination' failed to satisfy constraint: Member must have length less than or equal to 350", *d.OnFailure.Destination)
	}
	if f := s.FilterCriteria; f != nil {
		for i, p := range f.Filters {
			if len(p.Pattern) > 4096 {
				return validation("1 validation error detected: Value '%s' at 'filterCriteria.filters.%d.member.pattern' failed to satisfy constraint: Member must have length less than or equal to 4096", p.Pattern, i+1)
			}
		}
	}
	return nil
}

// checkKinesis refuses what applies to other kinds of source only (spec §1.2: recommended
// InvalidParameterValueException, AWS's answer is unconfirmed) and OnSuccess destinations.
func (s *settingsIn) checkKinesis() *APIError {
	if d := s.DestinationConfig; d != nil && len(d.OnSuccess) > 0 && string(d.OnSuccess) != "null" {
		return invalidParameter(msgOnSuccess)
	}
	for name, raw := range map[string]json.RawMessage{
		"ScalingConfig": s.ScalingConfig, "ProvisionedPollerConfig": s.ProvisionedPollerConfig, "LoggingConfig": s.LoggingConfig,
		"SourceAccessConfigurations": s.SourceAccessConfigurations, "DocumentDBEventSourceConfig": s.DocumentDBEventSourceConfig,
		"AmazonManagedKafkaEventSourceConfig": s.AmazonManagedKafkaConfig, "SelfManagedKafkaEventSourceConfig": s.SelfManagedKafkaConfig,
	} {
		if len(raw) > 0 && string(raw) != "null" {
			return invalidParameter("%s is not supported for a Kinesis event source mapping.", name)
		}
	}
	return nil
}

// reportBatchItemFailures is the one FunctionResponseTypes value Lambda accepts.
const reportBatchItemFailures = "ReportBatchItemFailures"

// apply sets on mc the settings the request gives, in Lambda's terms: an explicit 0 where 0 is
// out of range (BatchSize, ParallelizationFactor) is refused, not taken for the default, and
// FunctionResponseTypes takes ReportBatchItemFailures alone; every value is then mc.Validate's to
// check.
func (s *settingsIn) apply(mc *poller.Config) error {
	if s.BatchSize != nil {
		if *s.BatchSize == 0 {
			return poller.RangeError("batchSize", 0, 1, poller.MaxBatchSize)
		}
		mc.BatchSize = *s.BatchSize
	}
	if s.ParallelizationFactor != nil {
		if *s.ParallelizationFactor == 0 {
			return poller.RangeError("parallelizationFactor", 0, 1, 10)
		}
		mc.ParallelizationFactor = *s.ParallelizationFactor
	}
	if t := s.FunctionResponseTypes; t != nil {
		for _, v := range *t {
			if v != reportBatchItemFailures {
				return &poller.ValidationError{Field: "FunctionResponseTypes", Message: "1 validation error detected: Value '[" + v +
					"]' at 'functionResponseTypes' failed to satisfy constraint: Member must satisfy constraint: [Member must satisfy enum value set: [ReportBatchItemFailures]]"}
			}
		}
		mc.ReportBatchItemFailures = len(*t) > 0
	}
	setIf(&mc.MaximumBatchingWindow, s.MaximumBatchingWindowInSeconds, seconds)
	setIf(&mc.TumblingWindow, s.TumblingWindowInSeconds, seconds)
	setIf(&mc.BisectBatchOnFunctionError, s.BisectBatchOnFunctionError, same)
	setIf(&mc.MaximumRetryAttempts, s.MaximumRetryAttempts, ptr)
	setIf(&mc.MaximumRecordAgeInSeconds, s.MaximumRecordAgeInSeconds, ptr)
	if s.Enabled != nil {
		mc.Disabled = !*s.Enabled
	}
	if d := s.DestinationConfig; d != nil && d.OnFailure != nil {
		mc.OnFailureDestination = "" // {"OnFailure": {}} removes it
		setIf(&mc.OnFailureDestination, d.OnFailure.Destination, same)
	}
	if f := s.FilterCriteria; f != nil { // an empty list removes the filters
		mc.FilterPatterns = nil
		for _, p := range f.Filters {
			mc.FilterPatterns = append(mc.FilterPatterns, p.Pattern)
		}
	}
	return nil
}

// setIf sets *dst to conv(*v) when the request gives v.
func setIf[T, V any](dst *T, v *V, conv func(V) T) {
	if v != nil {
		*dst = conv(*v)
	}
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }
func same[T any](v T) T           { return v }
func ptr(n int) *int              { return &n }

// apply sets on mc the settings a create request gives: those an update may give too, and where
// the mapping starts.
func (r *createRequest) apply(mc *poller.Config) error {
	if r.StartingPosition != nil {
		mc.StartingPosition, mc.StartingPositionTimestamp = *r.StartingPosition, time.Time{}
	}
	if r.StartingPositionTimestamp != nil {
		mc.StartingPositionTimestamp = r.StartingPositionTimestamp.Time
	}
	return r.settingsIn.apply(mc)
}

// settings sets on mc every setting of the stored mapping, which was checked when it was stored.
func (m *EventSourceMapping) settings(enabled bool, mc *poller.Config) {
	mc.BatchSize, mc.MaximumBatchingWindow = m.BatchSize, seconds(m.MaximumBatchingWindowInSeconds)
	mc.StartingPosition, mc.StartingPositionTimestamp = m.StartingPosition, time.Time{}
	if m.StartingPositionTimestamp != nil {
		mc.StartingPositionTimestamp = m.StartingPositionTimestamp.Time
	}
	mc.Disabled, mc.ParallelizationFactor, mc.BisectBatchOnFunctionError = !enabled, m.ParallelizationFactor, m.BisectBatchOnFunctionError
	mc.MaximumRetryAttempts, mc.MaximumRecordAgeInSeconds = ptr(m.MaximumRetryAttempts), ptr(m.MaximumRecordAgeInSeconds)
	mc.TumblingWindow = seconds(m.TumblingWindowInSeconds)
	mc.ReportBatchItemFailures = slices.Contains(m.FunctionResponseTypes, reportBatchItemFailures)
	mc.OnFailureDestination = m.DestinationConfig.OnFailure.Destination
	mc.FilterPatterns = nil
	if m.FilterCriteria != nil {
		for _, f := range m.FilterCriteria.Filters {
			mc.FilterPatterns = append(mc.FilterPatterns, f.Pattern)
		}
	}
}

// describe fills the mapping's source and settings from the EventSourceArn source and mc, which
// has its defaults applied (poller.Config.Defaults: the one place where the API learns Lambda's
// defaults). Its FunctionArn is the caller's to set.
func (m *EventSourceMapping) describe(source string, mc poller.Config) {
	m.EventSourceArn = source
	m.BatchSize = mc.BatchSize
	m.MaximumBatchingWindowInSeconds = int(mc.MaximumBatchingWindow / time.Second)
	m.ParallelizationFactor = mc.ParallelizationFactor
	m.BisectBatchOnFunctionError = mc.BisectBatchOnFunctionError
	m.MaximumRetryAttempts = mc.RetryAttempts()
	m.MaximumRecordAgeInSeconds = mc.RecordAgeSeconds()
	m.TumblingWindowInSeconds = int(mc.TumblingWindow / time.Second)
	m.FunctionResponseTypes = []string{}
	if mc.ReportBatchItemFailures {
		m.FunctionResponseTypes = []string{reportBatchItemFailures}
	}
	m.DestinationConfig = DestinationConfig{OnFailure: OnFailure{Destination: mc.OnFailureDestination}}
	m.FilterCriteria = nil
	if len(mc.FilterPatterns) > 0 {
		m.FilterCriteria = &FilterCriteria{}
		for _, p := range mc.FilterPatterns {
			m.FilterCriteria.Filters = append(m.FilterCriteria.Filters, Filter{Pattern: p})
		}
	}
	m.StartingPosition = mc.StartingPosition
	m.StartingPositionTimestamp = nil
	if !mc.StartingPositionTimestamp.IsZero() {
		m.StartingPositionTimestamp = &Timestamp{mc.StartingPositionTimestamp}
	}
}

// sourceWhere is where an EventSourceArn's stream is: the partition, region and account of a
// function its mapping names without them.
type sourceWhere struct{ Partition, Region, Account string }

// sourceStream is where the stream of an EventSourceArn is: a Kinesis stream's ARN or an
// enhanced fan-out consumer's, or a DynamoDB stream's.
func sourceStream(arn string) (sourceWhere, error) {
	switch {
	case dynamostreams.IsStreamARN(arn):
		a, err := dynamostreams.ParseStreamARN(arn)
		return sourceWhere{a.Partition, a.Region, a.Account}, err
	case kinesissrc.IsConsumerARN(arn):
		ca, err := kinesissrc.ParseConsumerARN(arn)
		return sourceWhere{ca.Stream.Partition, ca.Stream.Region, ca.Stream.Account}, err
	}
	a, err := kinesissrc.ParseStreamARN(arn)
	return sourceWhere{a.Partition, a.Region, a.Account}, err
}

// functionRef is a FunctionName parsed: a name, function ARN, qualified ARN or partial ARN.
type functionRef struct {
	partition, region, account string // empty when not given
	name, qualifier            string
}

func parseFunctionName(s string) functionRef {
	var r functionRef
	if a, err := arn.Parse(s); err == nil && strings.HasPrefix(a.Resource, "function:") {
		r.partition, r.region, r.account = a.Partition, a.Region, a.AccountID
		name := strings.TrimPrefix(a.Resource, "function:") // NAME[:QUALIFIER]
		r.name, r.qualifier, _ = strings.Cut(name, ":")
		return r
	}
	parts := strings.Split(s, ":") // a partial ARN, ACCOUNT:function:NAME[:QUALIFIER], is no ARN
	switch {
	case len(parts) >= 3 && parts[1] == "function":
		r.account, r.name = parts[0], parts[2]
		if len(parts) > 3 {
			r.qualifier = parts[3]
		}
	default:
		r.name = parts[0]
		if len(parts) > 1 {
			r.qualifier = parts[1]
		}
	}
	return r
}

// arn is the function's ARN, qualified when a qualifier was given, in the stream's partition,
// region and account where the name did not say.
func (r functionRef) arn(stream sourceWhere) string {
	p, reg, acct := stream.Partition, stream.Region, stream.Account
	if r.partition != "" {
		p = r.partition
	}
	if r.region != "" {
		reg = r.region
	}
	if r.account != "" {
		acct = r.account
	}
	a := fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", p, reg, acct, r.name)
	if r.qualifier != "" {
		a += ":" + r.qualifier
	}
	return a
}

// mappingARN is the EventSourceMappingArn of the mapping uuid on stream.
func mappingARN(stream sourceWhere, uuid string) string {
	return fmt.Sprintf("arn:%s:lambda:%s:%s:event-source-mapping:%s", stream.Partition, stream.Region, stream.Account, uuid)
}
