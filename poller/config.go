package poller

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/kinesis-esm/esm/filter"
	"github.com/kinesis-esm/esm/source"
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
	DefaultPollGrid       = 50 * time.Millisecond // or PollInterval, when that is shorter
	DefaultShardSync      = 60 * time.Second
	DefaultMinPollSpacing = 200 * time.Millisecond // Kinesis allows 5 GetRecords/s per shard
	DefaultShutdownGrace  = 30 * time.Second
	DefaultClaimInterval  = time.Second
	DefaultMaxFilters     = 5
)

// Config is an event source mapping's settings: Lambda's, esm's own two (OnDestinationFailure,
// MaxFilters) and the poller's runtime knobs (PollInterval to ClaimInterval). The stream is the
// Source's, the function's ARN is WithFunctionARN's. A zero field means its default, given in its
// comment (Defaults). Validate checks it alone; New checks it with its source.
type Config struct {
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

	// PollInterval is the pause between polls of a shard that is caught up. Default: the source's
	// (source.Limits: 250 ms for DynamoDB Streams), else 1 s, as Lambda.
	PollInterval time.Duration
	// PollGrid: a caught-up shard's polls start on multiples of PollGrid (counted from the Unix
	// epoch), so that the polls of many idle shards are made together. The next poll is the
	// multiple nearest PollInterval after the last, so the mean pace is still PollInterval, and
	// never sooner after it than MinPollSpacing (or PollInterval, when that is shorter). Behind
	// shards, retries and subscriptions are not aligned. At most PollInterval. Default 50 ms, or
	// PollInterval when that is shorter.
	PollGrid time.Duration
	// MinPollSpacing is the least time between two reads of one shard while it is behind.
	// Default: the source's (source.Limits), else 200 ms (Kinesis allows five reads per second
	// per shard).
	MinPollSpacing time.Duration
	// ShardSyncInterval is how often ListShards runs to find shards nobody announced. Default 60 s.
	ShardSyncInterval time.Duration
	// ShutdownGrace bounds how long a stop waits for in-flight invocations. Default 30 s.
	ShutdownGrace time.Duration
	// ClaimInterval is how often a worker sharing the mapping through a Coordinator claims
	// leases and refreshes the shards' progress from the lease table. Default: the pace the
	// Coordinator calls for (its ClaimInterval method, as lease.Dynamo has), else 1 s.
	ClaimInterval time.Duration
}

// ValidationError is a configuration field outside what Lambda accepts (source.ValidationError):
// its message names the field, the value and what is allowed, in Lambda's own words where AWS
// recorded them.
type ValidationError = source.ValidationError

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = source.ErrInvalidConfig

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

// Validation. A Config holds Lambda's settings and the poller's runtime knobs; the stream's ARNs
// are its Source's, checked where the source is made. There are two ways into the checks, and a
// Config keeps no mark of a past one: Validate checks the settings alone (esm validate, the API's
// answers), New the whole mapping as it starts (and NewBatchEncoder, which encodes as New's
// poller would). Both run settingRules, fed by the source's kind where sources differ.

// Validate checks every setting and runtime knob against Lambda's ranges for a mapping of the
// source sourceARN, with its zero fields at their defaults (Defaults), and returns the first
// problem, in the order Lambda reports them; every error wraps ErrInvalidConfig. The source's
// kind decides the rules that differ between sources (see sourceRules); "" is a Kinesis stream.
func (c Config) Validate(sourceARN string) error {
	_, err := c.Defaults().check(time.Now(), sourceARN)
	return err
}

// Defaults returns c with every zero field at its default, each given in the field's comment:
// the configuration New runs, and the one the API describes. It checks nothing (Validate does).
// ClaimInterval stays zero: New takes its Coordinator's pace.
func (c Config) Defaults() Config {
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.ParallelizationFactor = cmp.Or(c.ParallelizationFactor, 1)
	c.OnDestinationFailure = cmp.Or(c.OnDestinationFailure, DestinationFailureBlock)
	c.MaxFilters = cmp.Or(c.MaxFilters, DefaultMaxFilters)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	if c.PollGrid == 0 {
		c.PollGrid = min(DefaultPollGrid, c.PollInterval)
	}
	c.MinPollSpacing = cmp.Or(c.MinPollSpacing, DefaultMinPollSpacing)
	c.ShardSyncInterval = cmp.Or(c.ShardSyncInterval, DefaultShardSync)
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, DefaultShutdownGrace)
	return c
}

// settle is the check of a whole mapping, New's and NewBatchEncoder's: cfg with its defaults,
// checked with the clock now for the source src, and its compiled filters.
func settle(src Source, cfg Config, now time.Time) (Config, *filter.Filters, error) {
	if src == nil {
		return cfg, nil, &ValidationError{Field: "EventSourceArn", Message: "Unrecognized event source."}
	}
	// The pace the source's limits give comes before the engine's defaults (DynamoDB Streams:
	// four polls a second).
	lim := src.Limits()
	cfg.PollInterval = cmp.Or(cfg.PollInterval, lim.PollInterval)
	cfg.MinPollSpacing = cmp.Or(cfg.MinPollSpacing, lim.MinPollSpacing)
	cfg = cfg.Defaults()
	filters, err := cfg.check(now, src.Identity().ARN)
	return cfg, filters, err
}

// check runs settingRules over c, whose defaults are applied, and returns its compiled filters.
func (c Config) check(now time.Time, sourceARN string) (*filter.Filters, error) {
	st := checkState{now: now, rules: rulesOf(sourceARN)}
	for _, rule := range settingRules {
		if err := rule(&c, &st); err != nil {
			return nil, err
		}
	}
	return st.filters, nil
}

// sourceRules are what a kind of source allows of the settings, where Lambda's rules differ
// between sources: the data that feeds the rules, so that Validate stays one function.
type sourceRules struct {
	// arn is the source's, as the messages name it.
	arn string
	// atTimestamp: the source can start AT_TIMESTAMP (a Kinesis stream; a DynamoDB stream
	// cannot, as Lambda refuses it).
	atTimestamp bool
}

// rulesOf are the rules of the source sourceARN's kind: a DynamoDB stream's for
// arn:…:dynamodb:…, a Kinesis stream's otherwise.
func rulesOf(sourceARN string) sourceRules {
	a, err := arn.Parse(sourceARN)
	return sourceRules{arn: sourceARN, atTimestamp: err != nil || a.Service != "dynamodb"}
}

// startingPosition refuses a starting position the source's kind does not have: AT_TIMESTAMP of a
// DynamoDB stream, with Lambda's message.
func (r sourceRules) startingPosition(position string) error {
	if position == AtTimestamp && !r.atTimestamp {
		return &ValidationError{Field: "StartingPosition", Message: "Unsupported starting position for arn type: " + r.arn}
	}
	return nil
}

// CheckStartingPosition is the rule of starting positions that differs between sources, alone:
// a DynamoDB stream's mapping (sourceARN arn:…:dynamodb:…) refuses AT_TIMESTAMP with Lambda's
// "Unsupported starting position for arn type: <arn>"; anything else passes (Validate words a
// missing or unknown position, and runs this rule in its place). For the callers that check it
// before the other settings, in Lambda's order: the API and templates.
func CheckStartingPosition(sourceARN, position string) error {
	return rulesOf(sourceARN).startingPosition(position)
}

// claimInterval is New's default ClaimInterval: the Coordinator's pace, else DefaultClaimInterval.
func (p *Poller) claimInterval() time.Duration {
	if pace, ok := p.coord.(interface{ ClaimInterval() time.Duration }); ok && pace.ClaimInterval() > 0 {
		return pace.ClaimInterval()
	}
	return DefaultClaimInterval
}

// checkState is what the rules share: the clock, the source's rules, and the filters the filter
// rule compiled.
type checkState struct {
	now     time.Time
	rules   sourceRules
	filters *filter.Filters
}

// A settingRule checks one setting (or a few that go together), its default applied.
type settingRule func(c *Config, st *checkState) error

// settingRules are the checks of Lambda's settings and the runtime knobs, in the order Lambda
// reports its errors: the first that fails is the answer.
var settingRules = []settingRule{
	intRange("batchSize", func(c *Config) *int { return &c.BatchSize }, 1, MaxBatchSize),
	secondsRange("maximumBatchingWindowInSeconds", func(c *Config) *time.Duration { return &c.MaximumBatchingWindow }, MaxBatchingWindow),
	checkStartingPosition,
	func(c *Config, _ *checkState) error {
		if v := c.MaximumRetryAttempts; v != nil && (*v < -1 || *v > 10000) {
			return RangeError("maximumRetryAttempts", int64(*v), -1, 10000)
		}
		return nil
	},
	func(c *Config, _ *checkState) error {
		if v := c.MaximumRecordAgeInSeconds; v != nil && *v != -1 && (*v < 60 || *v > 604800) {
			return &ValidationError{Field: "MaximumRecordAgeInSeconds", Message: fmt.Sprintf(
				"MaximumRecordAgeInSeconds must be either -1 (forever) or between 60 and 604800 (inclusive); got %d", *v)}
		}
		return nil
	},
	func(c *Config, _ *checkState) error {
		if c.OnFailureDestination == "" {
			return nil
		}
		return checkDestinationARN(c.OnFailureDestination)
	},
	checkOnDestinationFailure,
	intRange("parallelizationFactor", func(c *Config) *int { return &c.ParallelizationFactor }, 1, 10),
	secondsRange("tumblingWindowInSeconds", func(c *Config) *time.Duration { return &c.TumblingWindow }, 900*time.Second),
	checkFilters,
	positive("PollInterval", func(c *Config) *time.Duration { return &c.PollInterval }),
	positive("PollGrid", func(c *Config) *time.Duration { return &c.PollGrid }),
	checkPollGrid,
	positive("ShardSyncInterval", func(c *Config) *time.Duration { return &c.ShardSyncInterval }),
	positive("ShutdownGrace", func(c *Config) *time.Duration { return &c.ShutdownGrace }),
	positive("ClaimInterval", func(c *Config) *time.Duration { return &c.ClaimInterval }),
	func(c *Config, _ *checkState) error {
		if c.MinPollSpacing < 0 {
			return &ValidationError{Field: "MinPollSpacing", Message: fmt.Sprintf("MinPollSpacing %s must not be negative", c.MinPollSpacing)}
		}
		return nil
	},
}

// intRange is the rule of a count in [min, max], worded as Lambda's API.
func intRange(field string, f func(*Config) *int, min, max int) settingRule {
	return func(c *Config, _ *checkState) error {
		if v := *f(c); v < min || v > max {
			return RangeError(field, int64(v), int64(min), int64(max))
		}
		return nil
	}
}

// secondsRange is the rule of a duration of whole seconds in [0, max], worded as Lambda's API.
func secondsRange(field string, f func(*Config) *time.Duration, max time.Duration) settingRule {
	return func(c *Config, _ *checkState) error {
		if d := *f(c); d < 0 || d > max {
			return RangeError(field, int64(d/time.Second), 0, int64(max/time.Second))
		}
		return nil
	}
}

// positive is the rule of a duration that must not be negative.
func positive(field string, f func(*Config) *time.Duration) settingRule {
	return func(c *Config, _ *checkState) error {
		if d := *f(c); d < 0 {
			return &ValidationError{Field: field, Message: fmt.Sprintf("%s %s must be positive", field, d)}
		}
		return nil
	}
}

// checkPollGrid checks PollGrid against PollInterval (both past their rules); its default is
// never longer than PollInterval.
func checkPollGrid(c *Config, _ *checkState) error {
	if c.PollGrid > c.PollInterval {
		return &ValidationError{Field: "PollGrid", Message: fmt.Sprintf("PollGrid %s must be at most PollInterval %s", c.PollGrid, c.PollInterval)}
	}
	return nil
}

func checkStartingPosition(c *Config, st *checkState) error {
	switch c.StartingPosition {
	case "":
		return &ValidationError{Field: "StartingPosition", Message: "1 validation error detected: Value null at 'startingPosition' failed to satisfy constraint: Member must not be null."}
	case TrimHorizon, Latest:
		if !c.StartingPositionTimestamp.IsZero() {
			return &ValidationError{Field: "StartingPositionTimestamp", Message: fmt.Sprintf(
				"StartingPositionTimestamp is only allowed with StartingPosition AT_TIMESTAMP, not %s", c.StartingPosition)}
		}
	case AtTimestamp:
		if err := st.rules.startingPosition(c.StartingPosition); err != nil {
			return err
		}
		if c.StartingPositionTimestamp.IsZero() {
			return &ValidationError{Field: "StartingPositionTimestamp", Message: "Need to specify a timestamp: StartingPositionTimestamp is required with StartingPosition AT_TIMESTAMP"}
		}
		if c.StartingPositionTimestamp.After(st.now) {
			return &ValidationError{Field: "StartingPositionTimestamp", Message: fmt.Sprintf(
				"StartingPositionTimestamp %s is in the future", c.StartingPositionTimestamp.UTC().Format(time.RFC3339))}
		}
	default:
		return &ValidationError{Field: "StartingPosition", Message: fmt.Sprintf(
			"1 validation error detected: Value '%s' at 'startingPosition' failed to satisfy constraint: Member must satisfy enum value set: [LATEST, AT_TIMESTAMP, TRIM_HORIZON]", c.StartingPosition)}
	}
	return nil
}

func checkOnDestinationFailure(c *Config, _ *checkState) error {
	switch c.OnDestinationFailure {
	case DestinationFailureBlock, DestinationFailureDrop:
	default:
		return &ValidationError{Field: "OnDestinationFailure", Message: fmt.Sprintf(
			"OnDestinationFailure %q: want %s (hold the shard until the destination takes the record) or %s (drop the records, as Lambda does)",
			c.OnDestinationFailure, DestinationFailureBlock, DestinationFailureDrop)}
	}
	return nil
}

// checkFilters checks the filter quota and the patterns, and compiles them.
func checkFilters(c *Config, st *checkState) error {
	if c.MaxFilters < 1 || c.MaxFilters > 10 {
		return &ValidationError{Field: "MaxFilters", Message: fmt.Sprintf("MaxFilters %d: the filter quota is between 1 and 10", c.MaxFilters)}
	}
	if len(c.FilterPatterns) > c.MaxFilters {
		return &ValidationError{Field: "FilterCriteria", Message: fmt.Sprintf(
			"FilterCriteria has %d filters; at most %d are allowed", len(c.FilterPatterns), c.MaxFilters)}
	}
	if len(c.FilterPatterns) == 0 {
		return nil
	}
	filters, err := filter.Compile(c.FilterPatterns)
	if err != nil {
		// Lambda's own text; the detail (which filter, where, why) goes after it.
		msg := err.Error()
		var pe *filter.PatternError
		if errors.As(err, &pe) {
			msg += " " + pe.Detail()
		}
		return &ValidationError{Field: "FilterCriteria", Message: msg, Err: err}
	}
	st.filters = filters
	return nil
}

// checkDestinationARN accepts the on-failure destinations Lambda allows for a Kinesis mapping:
// an SQS queue, an SNS topic or an S3 bucket. A FIFO queue or topic is refused: Lambda accepts
// one, but its message has no message group id, so every delivery fails (a blocking shard would
// wait for good).
func checkDestinationARN(dest string) error {
	if a, err := arn.Parse(dest); err == nil {
		switch a.Service {
		case "sqs", "sns":
			if a.Region != "" && strings.HasSuffix(a.Resource, ".fifo") {
				kind := map[string]string{"sqs": "queue", "sns": "topic"}[a.Service]
				return &ValidationError{Field: "DestinationConfig", Message: fmt.Sprintf(
					"DestinationConfig.OnFailure.Destination %s is a FIFO %s: it cannot take Lambda's on-failure message, which has no message group id, so every delivery would fail; use a standard %s",
					dest, kind, kind)}
			}
			if a.Region != "" && a.Resource != "" {
				return nil
			}
		case "s3":
			if a.Resource != "" {
				return nil
			}
		}
	}
	return &ValidationError{Field: "DestinationConfig", Message: fmt.Sprintf(
		"DestinationConfig.OnFailure.Destination %q must be the ARN of an SQS queue, an SNS topic or an S3 bucket", dest)}
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

// ClaimInterval is how often the poller claims leases through its Coordinator: Config's, or its
// default.
func (p *Poller) ClaimInterval() time.Duration { return p.cfg.ClaimInterval }
