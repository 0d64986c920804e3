package poller

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kinesis-esm/esm/filter"
)

// Starting positions, as Lambda names them.
const (
	TrimHorizon = "TRIM_HORIZON"
	Latest      = "LATEST"
	AtTimestamp = "AT_TIMESTAMP"
)

// What to do when the on-failure destination cannot take a record (Config.OnDestinationFailure).
const (
	DestinationFailureBlock = "block" // retry the delivery, holding the shard: nothing is lost
	DestinationFailureDrop  = "drop"  // drop the records and move on, as Lambda does
)

// Limits Lambda applies to a Kinesis event source mapping.
const (
	MaxBatchSize          = 10000
	DefaultBatchSize      = 100
	MaxBatchingWindow     = 300 * time.Second
	MaxPayloadBytes       = 6 * 1024 * 1024 // the synchronous invoke request limit
	DefaultPollInterval   = time.Second
	DefaultShardSync      = 60 * time.Second
	DefaultMinPollSpacing = 200 * time.Millisecond // Kinesis allows 5 GetRecords/s per shard
	DefaultShutdownGrace  = 30 * time.Second
)

// Config is one event source mapping. A zero field means its default, given in its comment.
type Config struct {
	// StreamARN is the stream's ARN, arn:aws:kinesis:<region>:<account>:stream/<name>. Required.
	// An enhanced fan-out consumer ARN given here (as Lambda's EventSourceArn may be) moves to
	// ConsumerARN, and StreamARN becomes its stream's.
	StreamARN string
	// ConsumerARN, when set, is the stream's enhanced fan-out consumer the mapping reads through
	// (SubscribeToShard; see SubscribeAPI):
	// arn:aws:kinesis:<region>:<account>:stream/<name>/consumer/<consumer>:<creation epoch seconds>.
	ConsumerARN string
	// FunctionARN is the mapped function's ARN (used in the on-failure record and the handler's
	// context). Optional.
	FunctionARN string
	// InvokeIdentityARN is the event's invokeIdentityArn: the function's execution role.
	// Default: arn:aws:iam::<stream account>:role/esm.
	InvokeIdentityARN string
	// BatchSize is the most records in one invocation, 1–10000. Default 100.
	BatchSize int
	// MaximumBatchingWindow is how long to gather records before invoking, 0–300 s. Default 0:
	// invoke as soon as any record is read.
	MaximumBatchingWindow time.Duration
	// StartingPosition is TRIM_HORIZON, LATEST or AT_TIMESTAMP. Required, as in Lambda.
	StartingPosition string
	// StartingPositionTimestamp goes with AT_TIMESTAMP, and only with it; not in the future.
	StartingPositionTimestamp time.Time
	// Disabled pauses the mapping: nothing is polled or invoked (Lambda's Enabled: false).
	Disabled bool

	// MaximumRetryAttempts is how often a failed batch is retried before it is discarded: -1
	// (until the records expire) or 0–10000. nil means -1, Lambda's default.
	MaximumRetryAttempts *int
	// MaximumRecordAgeInSeconds discards records older than this: -1 (never) or 60–604800. nil
	// means -1, Lambda's default.
	MaximumRecordAgeInSeconds *int
	// BisectBatchOnFunctionError splits a batch that failed with a function error in two halves
	// and retries each.
	BisectBatchOnFunctionError bool
	// ReportBatchItemFailures honours partial batch responses (FunctionResponseTypes:
	// [ReportBatchItemFailures]).
	ReportBatchItemFailures bool
	// OnFailureDestination is the ARN of the SQS queue, SNS topic or S3 bucket that receives a
	// record of each discarded batch (DestinationConfig.OnFailure.Destination). Optional.
	OnFailureDestination string
	// OnDestinationFailure is what happens when the on-failure destination cannot take a record:
	// DestinationFailureBlock (the default) retries the delivery and holds the shard until it
	// succeeds, so nothing is lost; DestinationFailureDrop drops the records and moves on, as
	// Lambda does. Either way each failed send counts in DestinationDeliveryFailures.
	OnDestinationFailure string
	// ParallelizationFactor is how many batches of one shard may be in flight at once, 1–10.
	// Default 1.
	ParallelizationFactor int
	// TumblingWindow is the length of tumbling windows, 0–900 s. Default 0: no windows. A windowed
	// mapping runs one batch in flight per shard whatever its ParallelizationFactor (see New).
	TumblingWindow time.Duration
	// FilterPatterns are the FilterCriteria patterns (JSON), OR-ed. At most MaxFilters.
	FilterPatterns []string
	// MaxFilters is the filter quota: 5 by default (Lambda's), at most 10.
	MaxFilters int

	// PollInterval is the pause between polls of a shard that is caught up. Default 1 s, as Lambda.
	PollInterval time.Duration
	// MinPollSpacing is the least time between two GetRecords calls on one shard while it is
	// behind. Default 200 ms (Kinesis allows five reads per second per shard).
	MinPollSpacing time.Duration
	// ShardSyncInterval is how often ListShards runs to find shards nobody announced. Default 60 s.
	ShardSyncInterval time.Duration
	// ShutdownGrace bounds how long a stop waits for in-flight invocations. Default 30 s.
	ShutdownGrace time.Duration
	// ClaimInterval is how often a worker sharing the mapping through a Coordinator claims
	// leases and refreshes the shards' progress from the lease table. Default 1 s.
	ClaimInterval time.Duration
}

// ValidationError is a configuration field outside what Lambda accepts. Its message names the
// field, the value and what is allowed, in Lambda's own words where AWS recorded them.
type ValidationError struct {
	Field   string
	Message string
	// Err is the error the message was made from, when there is one: a filter pattern's
	// *filter.PatternError, the on-failure destination's error.
	Err error
}

func (e *ValidationError) Error() string { return e.Message }

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid configuration")

// Unwrap returns ErrInvalidConfig and, when there is one, the error behind the message.
func (e *ValidationError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidConfig, e.Err}
	}
	return []error{ErrInvalidConfig}
}

// RangeError is the error for a number outside [min, max], worded as Lambda's API words it.
func RangeError(field string, value, min, max int64) *ValidationError {
	bound := fmt.Sprintf("greater than or equal to %d", min)
	if value > max {
		bound = fmt.Sprintf("less than or equal to %d", max)
	}
	return &ValidationError{Field: field, Message: fmt.Sprintf(
		"1 validation error detected: Value '%v' at '%s' failed to satisfy constraint: Member must have value %s",
		value, field, bound)}
}

// StreamARN is a parsed Kinesis stream ARN.
type StreamARN struct {
	Partition, Region, Account, Name string
}

// ParseStreamARN parses arn:<partition>:kinesis:<region>:<account>:stream/<name>.
func ParseStreamARN(s string) (StreamARN, error) {
	parts := strings.SplitN(s, ":", 6)
	var name string
	isStream := len(parts) == 6
	if isStream {
		name, isStream = strings.CutPrefix(parts[5], "stream/")
	}
	if !isStream || parts[0] != "arn" || parts[2] != "kinesis" {
		return StreamARN{}, &ValidationError{Field: "EventSourceArn", Message: fmt.Sprintf(
			"EventSourceArn %q is not a Kinesis stream ARN (arn:aws:kinesis:<region>:<account>:stream/<name>)", s)}
	}
	if name == "" || strings.Contains(name, "/") {
		return StreamARN{}, &ValidationError{Field: "EventSourceArn", Message: fmt.Sprintf(
			"EventSourceArn %q: stream name missing, or not a stream ARN (a consumer ARN is ConsumerARN's)", s)}
	}
	if parts[3] == "" {
		return StreamARN{}, &ValidationError{Field: "EventSourceArn", Message: fmt.Sprintf("EventSourceArn %q has no region", s)}
	}
	return StreamARN{Partition: parts[1], Region: parts[3], Account: parts[4], Name: name}, nil
}

func (a StreamARN) String() string {
	return fmt.Sprintf("arn:%s:kinesis:%s:%s:stream/%s", a.Partition, a.Region, a.Account, a.Name)
}

// Checked is a configuration that passed validation, as the poller runs it: every zero field set
// to its default, with the stream's parsed ARN and the compiled filters. Config.Check makes one,
// and NewChecked runs it without checking it again.
type Checked struct {
	cfg     Config
	given   Config // as the caller gave it (ForStream defaults the stream's fields again)
	stream  StreamARN
	filters *filter.Filters // nil without FilterPatterns: every record is invoked
	ok      bool            // made by check
}

// Check checks every field against Lambda's ranges (the error names the first field that is
// wrong, and wraps ErrInvalidConfig) and returns the configuration as the poller runs it.
func (c Config) Check() (Checked, error) { return c.check(time.Now()) }

// Config is the configuration with every default applied.
func (c Checked) Config() Config { return c.cfg }

// Stream is the parsed StreamARN (a consumer's stream when the mapping reads through one).
func (c Checked) Stream() StreamARN { return c.stream }

// Filters are the compiled FilterPatterns; nil when there are none.
func (c Checked) Filters() *filter.Filters { return c.filters }

// ForStream returns the configuration reading streamARN, through consumerARN when it is set (a
// caller that checked the settings first may find the stream only afterwards). Only the stream's
// fields are checked again, and the defaults that come from the stream (InvokeIdentityARN) are
// taken again.
func (c Checked) ForStream(streamARN, consumerARN string) (Checked, error) {
	given := c.given
	given.StreamARN, given.ConsumerARN = streamARN, consumerARN
	cfg := c.cfg
	cfg.StreamARN, cfg.ConsumerARN, cfg.InvokeIdentityARN = streamARN, consumerARN, given.InvokeIdentityARN
	arn, err := cfg.checkStream()
	if err != nil {
		return Checked{}, err
	}
	c.cfg, c.given, c.stream = cfg, given, arn
	return c, nil
}

// WithFunctionARN returns the configuration with FunctionARN arn (which has no constraint).
func (c Checked) WithFunctionARN(arn string) Checked {
	c.cfg.FunctionARN, c.given.FunctionARN = arn, arn
	return c
}

// WithClaimIntervalDefault returns the configuration with ClaimInterval d unless the caller gave
// one: the pace of the Coordinator the mapping is shared through. d must be positive.
func (c Checked) WithClaimIntervalDefault(d time.Duration) (Checked, error) {
	if c.given.ClaimInterval != 0 {
		return c, nil
	}
	if d <= 0 {
		return c, &ValidationError{Field: "ClaimInterval", Message: fmt.Sprintf("ClaimInterval %s must be positive", d)}
	}
	c.cfg.ClaimInterval = d
	return c, nil
}

// withDefaults returns the configuration with every zero field set to its default, after checking
// every field; the error names the first field that is wrong.
func (c Config) withDefaults(now time.Time) (Config, error) {
	checked, err := c.check(now)
	if err != nil {
		return c, err
	}
	return checked.cfg, nil
}

// check checks the stream's fields, then the others, in the order Lambda reports them.
func (c Config) check(now time.Time) (Checked, error) {
	given := c
	arn, err := c.checkStream()
	if err != nil {
		return Checked{}, err
	}
	filters, err := c.checkSettings(now)
	if err != nil {
		return Checked{}, err
	}
	return Checked{cfg: c, given: given, stream: arn, filters: filters, ok: true}, nil
}

// checkStream checks StreamARN and ConsumerARN and sets the default that depends on the stream,
// InvokeIdentityARN.
func (c *Config) checkStream() (StreamARN, error) {
	if c.StreamARN == "" {
		return StreamARN{}, &ValidationError{Field: "EventSourceArn", Message: "Unrecognized event source."}
	}
	if err := c.splitConsumerARN(); err != nil {
		return StreamARN{}, err
	}
	arn, err := ParseStreamARN(c.StreamARN)
	if err != nil {
		return StreamARN{}, err
	}
	if c.InvokeIdentityARN == "" {
		c.InvokeIdentityARN = fmt.Sprintf("arn:%s:iam::%s:role/esm", arn.Partition, arn.Account)
	}
	return arn, nil
}

// checkSettings checks every field but the stream's and sets their defaults; it returns the
// compiled filters (nil without FilterPatterns).
func (c *Config) checkSettings(now time.Time) (*filter.Filters, error) {
	switch {
	case c.BatchSize == 0:
		c.BatchSize = DefaultBatchSize
	case c.BatchSize < 1 || c.BatchSize > MaxBatchSize:
		return nil, RangeError("batchSize", int64(c.BatchSize), 1, MaxBatchSize)
	}
	if c.MaximumBatchingWindow < 0 || c.MaximumBatchingWindow > MaxBatchingWindow {
		return nil, RangeError("maximumBatchingWindowInSeconds", int64(c.MaximumBatchingWindow/time.Second), 0, 300)
	}
	switch c.StartingPosition {
	case "":
		return nil, &ValidationError{Field: "StartingPosition", Message: "1 validation error detected: Value null at 'startingPosition' failed to satisfy constraint: Member must not be null."}
	case TrimHorizon, Latest:
		if !c.StartingPositionTimestamp.IsZero() {
			return nil, &ValidationError{Field: "StartingPositionTimestamp", Message: fmt.Sprintf(
				"StartingPositionTimestamp is only allowed with StartingPosition AT_TIMESTAMP, not %s", c.StartingPosition)}
		}
	case AtTimestamp:
		if c.StartingPositionTimestamp.IsZero() {
			return nil, &ValidationError{Field: "StartingPositionTimestamp", Message: "Need to specify a timestamp: StartingPositionTimestamp is required with StartingPosition AT_TIMESTAMP"}
		}
		if c.StartingPositionTimestamp.After(now) {
			return nil, &ValidationError{Field: "StartingPositionTimestamp", Message: fmt.Sprintf(
				"StartingPositionTimestamp %s is in the future", c.StartingPositionTimestamp.UTC().Format(time.RFC3339))}
		}
	default:
		return nil, &ValidationError{Field: "StartingPosition", Message: fmt.Sprintf(
			"1 validation error detected: Value '%s' at 'startingPosition' failed to satisfy constraint: Member must satisfy enum value set: [LATEST, AT_TIMESTAMP, TRIM_HORIZON]", c.StartingPosition)}
	}
	if v := c.MaximumRetryAttempts; v != nil && (*v < -1 || *v > 10000) {
		return nil, RangeError("maximumRetryAttempts", int64(*v), -1, 10000)
	}
	if v := c.MaximumRecordAgeInSeconds; v != nil && *v != -1 && (*v < 60 || *v > 604800) {
		return nil, &ValidationError{Field: "MaximumRecordAgeInSeconds", Message: fmt.Sprintf(
			"MaximumRecordAgeInSeconds must be either -1 (forever) or between 60 and 604800 (inclusive); got %d", *v)}
	}
	if c.OnFailureDestination != "" {
		if err := checkDestinationARN(c.OnFailureDestination); err != nil {
			return nil, err
		}
	}
	switch c.OnDestinationFailure {
	case "":
		c.OnDestinationFailure = DestinationFailureBlock
	case DestinationFailureBlock, DestinationFailureDrop:
	default:
		return nil, &ValidationError{Field: "OnDestinationFailure", Message: fmt.Sprintf(
			"OnDestinationFailure %q: want %s (hold the shard until the destination takes the record) or %s (drop the records, as Lambda does)",
			c.OnDestinationFailure, DestinationFailureBlock, DestinationFailureDrop)}
	}
	switch {
	case c.ParallelizationFactor == 0:
		c.ParallelizationFactor = 1
	case c.ParallelizationFactor < 1 || c.ParallelizationFactor > 10:
		return nil, RangeError("parallelizationFactor", int64(c.ParallelizationFactor), 1, 10)
	}
	if c.TumblingWindow < 0 || c.TumblingWindow > 900*time.Second {
		return nil, RangeError("tumblingWindowInSeconds", int64(c.TumblingWindow/time.Second), 0, 900)
	}
	switch {
	case c.MaxFilters == 0:
		c.MaxFilters = 5
	case c.MaxFilters < 1 || c.MaxFilters > 10:
		return nil, &ValidationError{Field: "MaxFilters", Message: fmt.Sprintf("MaxFilters %d: the filter quota is between 1 and 10", c.MaxFilters)}
	}
	if len(c.FilterPatterns) > c.MaxFilters {
		return nil, &ValidationError{Field: "FilterCriteria", Message: fmt.Sprintf(
			"FilterCriteria has %d filters; at most %d are allowed", len(c.FilterPatterns), c.MaxFilters)}
	}
	filters, err := filter.Compile(c.FilterPatterns)
	if err != nil {
		// Lambda's own text; the detail (which filter, where, why) goes after it.
		msg := err.Error()
		var pe *filter.PatternError
		if errors.As(err, &pe) {
			msg += " " + pe.Detail()
		}
		return nil, &ValidationError{Field: "FilterCriteria", Message: msg, Err: err}
	}
	if err := durationDefault(&c.PollInterval, DefaultPollInterval, "PollInterval"); err != nil {
		return nil, err
	}
	if err := durationDefault(&c.ShardSyncInterval, DefaultShardSync, "ShardSyncInterval"); err != nil {
		return nil, err
	}
	if err := durationDefault(&c.ShutdownGrace, DefaultShutdownGrace, "ShutdownGrace"); err != nil {
		return nil, err
	}
	if err := durationDefault(&c.ClaimInterval, time.Second, "ClaimInterval"); err != nil {
		return nil, err
	}
	if c.MinPollSpacing < 0 {
		return nil, &ValidationError{Field: "MinPollSpacing", Message: fmt.Sprintf("MinPollSpacing %s must not be negative", c.MinPollSpacing)}
	}
	c.MinPollSpacing = cmp.Or(c.MinPollSpacing, DefaultMinPollSpacing)
	if len(c.FilterPatterns) == 0 {
		return nil, nil
	}
	return filters, nil
}

// checkDestinationARN accepts the on-failure destinations Lambda allows for a Kinesis mapping:
// an SQS queue, an SNS topic or an S3 bucket. A FIFO queue or topic is refused: Lambda accepts
// one, but its message has no message group id, so every delivery fails (a blocking shard would
// wait for good).
func checkDestinationARN(arn string) error {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) == 6 && parts[0] == "arn" {
		switch parts[2] {
		case "sqs", "sns":
			if parts[3] != "" && strings.HasSuffix(parts[5], ".fifo") {
				kind := map[string]string{"sqs": "queue", "sns": "topic"}[parts[2]]
				return &ValidationError{Field: "DestinationConfig", Message: fmt.Sprintf(
					"DestinationConfig.OnFailure.Destination %s is a FIFO %s: it cannot take Lambda's on-failure message, which has no message group id, so every delivery would fail; use a standard %s",
					arn, kind, kind)}
			}
			if parts[3] != "" && parts[5] != "" {
				return nil
			}
		case "s3":
			if parts[5] != "" {
				return nil
			}
		}
	}
	return &ValidationError{Field: "DestinationConfig", Message: fmt.Sprintf(
		"DestinationConfig.OnFailure.Destination %q must be the ARN of an SQS queue, an SNS topic or an S3 bucket", arn)}
}

// RetryAttempts returns MaximumRetryAttempts with its default applied.
func (c Config) RetryAttempts() int {
	if c.MaximumRetryAttempts == nil {
		return -1
	}
	return *c.MaximumRetryAttempts
}

// RecordAgeSeconds returns MaximumRecordAgeInSeconds with its default applied.
func (c Config) RecordAgeSeconds() int {
	if c.MaximumRecordAgeInSeconds == nil {
		return -1
	}
	return *c.MaximumRecordAgeInSeconds
}

func durationDefault(d *time.Duration, def time.Duration, field string) error {
	switch {
	case *d < 0:
		return &ValidationError{Field: field, Message: fmt.Sprintf("%s %s must be positive", field, *d)}
	case *d == 0:
		*d = def
	}
	return nil
}

// Validate checks every field against Lambda's ranges and returns the first problem.
func (c Config) Validate() error {
	_, err := c.withDefaults(time.Now())
	return err
}

// WithDefaults returns the configuration as the poller runs it: every zero field set to its
// default, after checking every field (the error names the first field that is wrong).
func (c Config) WithDefaults() (Config, error) { return c.withDefaults(time.Now()) }

// NewChecked is New for a configuration Config.Check made: it is not checked again.
func NewChecked(c Checked, kin KinesisAPI, store Store, inv Invoker, opts ...Option) (*Poller, error) {
	if !c.ok {
		return nil, &ValidationError{Field: "Config", Message: "poller: NewChecked takes a configuration made by Config.Check"}
	}
	return New(c.given, kin, store, inv, append(opts, func(p *Poller) { p.checked = &c })...)
}

// check is New's validation of cfg, unless NewChecked gave a checked configuration.
func (p *Poller) check(cfg Config) (Checked, error) {
	if p.checked != nil {
		return *p.checked, nil
	}
	return cfg.check(p.now())
}
