package poller

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
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

// Config is one event source mapping. A zero field means its default, given in its comment.
type Config struct {
	// FunctionARN is the mapped function's ARN (used in the on-failure record and the handler's
	// context). Optional.
	FunctionARN string
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
	// PollGrid: a caught-up shard's polls start on multiples of PollGrid (counted from the Unix
	// epoch), so that the polls of many idle shards are made together. The next poll is the
	// multiple nearest PollInterval after the last, so the mean pace is still PollInterval, and
	// never sooner after it than MinPollSpacing (or PollInterval, when that is shorter). Behind
	// shards, retries and subscriptions are not aligned. At most PollInterval. Default 50 ms, or
	// PollInterval when that is shorter.
	PollGrid time.Duration
	// MinPollSpacing is the least time between two GetRecords calls on one shard while it is
	// behind. Default 200 ms (Kinesis allows five reads per second per shard).
	MinPollSpacing time.Duration
	// ShardSyncInterval is how often ListShards runs to find shards nobody announced. Default 60 s.
	ShardSyncInterval time.Duration
	// ShutdownGrace bounds how long a stop waits for in-flight invocations. Default 30 s.
	ShutdownGrace time.Duration
	// ClaimInterval is how often a worker sharing the mapping through a Coordinator claims
	// leases and refreshes the shards' progress from the lease table. Default: the pace the
	// Coordinator calls for (its ClaimInterval method, as lease.Dynamo has), else 1 s.
	ClaimInterval time.Duration

	// checked is what a check accepted of this value (see Check): it is not checked again while
	// the fields it covers are unchanged.
	checked *checkedMark
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
// are its Source's, checked where the source is made (source/kinesis.New). Check and
// CheckSettings record in the value what they accepted; a later check of the value (New's)
// checks only the settings that changed since.

// Checked is a configuration that passed Check, as the poller runs it: every zero field set to
// its default, with the compiled filters.
type Checked struct {
	cfg     Config
	filters *filter.Filters // nil without FilterPatterns: every record is invoked
}

// Config is the configuration with every default applied. It is marked as checked: New does not
// check it again unless its fields were changed.
func (c Checked) Config() Config { return c.cfg }

// Filters are the compiled FilterPatterns; nil when there are none.
func (c Checked) Filters() *filter.Filters { return c.filters }

// Validate checks every field against Lambda's ranges and returns the first problem, in the order
// Lambda reports them; every error wraps ErrInvalidConfig.
func (c Config) Validate() error {
	_, err := c.Check()
	return err
}

// Check checks every field, as Validate does, and returns the configuration as the poller runs it.
func (c Config) Check() (Checked, error) { return c.check(time.Now()) }

// CheckSettings is Check's configuration alone: c with the defaults applied.
func (c Config) CheckSettings() (Config, error) {
	checked, err := c.check(time.Now())
	return checked.cfg, err
}

// checkedMark is what a check accepted.
type checkedMark struct {
	settings Config          // the settings as accepted, defaults applied (settingsOf)
	filters  *filter.Filters // compiled from settings.FilterPatterns
	// defaultGrid: settings.PollGrid is the default (PollGrid was zero), which depends on
	// PollInterval: a check after PollInterval changed chooses it again (unless PollGrid changed
	// too: then it is the caller's).
	defaultGrid bool
}

// settingsOf is c's settings alone: without the function's ARN (it has no constraint) and the
// mark, its pointers and slices copied.
func settingsOf(c Config) Config {
	c.FunctionARN, c.checked = "", nil
	if c.MaximumRetryAttempts != nil {
		c.MaximumRetryAttempts = new(*c.MaximumRetryAttempts)
	}
	if c.MaximumRecordAgeInSeconds != nil {
		c.MaximumRecordAgeInSeconds = new(*c.MaximumRecordAgeInSeconds)
	}
	c.FilterPatterns = slices.Clip(slices.Clone(c.FilterPatterns))
	return c
}

// check checks what c's mark does not cover and returns c marked.
func (c Config) check(now time.Time) (Checked, error) {
	var mark checkedMark
	old := c.checked
	if old != nil && reflect.DeepEqual(settingsOf(c), old.settings) {
		mark.settings, mark.filters, mark.defaultGrid = old.settings, old.filters, old.defaultGrid
	} else {
		if old != nil && old.defaultGrid && c.PollGrid == old.settings.PollGrid {
			c.PollGrid = 0 // the default a check chose: chosen again, for the PollInterval now set
		}
		st := checkState{now: now}
		for _, rule := range settingRules {
			if err := rule(&c, &st); err != nil {
				return Checked{}, err
			}
		}
		mark.settings, mark.filters, mark.defaultGrid = settingsOf(c), st.filters, st.defaultGrid
	}
	c.checked = &mark
	return Checked{cfg: c, filters: mark.filters}, nil
}

// check is New's check of cfg: Check with the poller's clock, and the Coordinator's pace as the
// default ClaimInterval.
func (p *Poller) check(cfg Config) (Checked, error) {
	c, err := cfg.check(p.now())
	if err != nil || c.cfg.ClaimInterval != 0 {
		return c, err
	}
	c.cfg.ClaimInterval = DefaultClaimInterval
	if pace, ok := p.coord.(interface{ ClaimInterval() time.Duration }); ok && pace.ClaimInterval() > 0 {
		c.cfg.ClaimInterval = pace.ClaimInterval()
	}
	return c, nil
}

// checkState is what the rules share: the clock, the filters the filter rule compiled, and
// whether PollGrid got its default.
type checkState struct {
	now         time.Time
	filters     *filter.Filters
	defaultGrid bool // checkPollGrid set PollGrid's default
}

// A settingRule checks one setting (or a few that go together) and sets its default.
type settingRule func(c *Config, st *checkState) error

// settingRules are the checks of Lambda's settings and the runtime knobs, in the order Lambda
// reports its errors: the first that fails is the answer.
var settingRules = []settingRule{
	intRange("batchSize", func(c *Config) *int { return &c.BatchSize }, 1, MaxBatchSize, DefaultBatchSize),
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
	intRange("parallelizationFactor", func(c *Config) *int { return &c.ParallelizationFactor }, 1, 10, 1),
	secondsRange("tumblingWindowInSeconds", func(c *Config) *time.Duration { return &c.TumblingWindow }, 900*time.Second),
	checkFilters,
	positive("PollInterval", func(c *Config) *time.Duration { return &c.PollInterval }, DefaultPollInterval),
	positive("PollGrid", func(c *Config) *time.Duration { return &c.PollGrid }, 0), // 0: see checkPollGrid
	checkPollGrid,
	positive("ShardSyncInterval", func(c *Config) *time.Duration { return &c.ShardSyncInterval }, DefaultShardSync),
	positive("ShutdownGrace", func(c *Config) *time.Duration { return &c.ShutdownGrace }, DefaultShutdownGrace),
	positive("ClaimInterval", func(c *Config) *time.Duration { return &c.ClaimInterval }, 0), // 0: see Poller.check
	func(c *Config, _ *checkState) error {
		if c.MinPollSpacing < 0 {
			return &ValidationError{Field: "MinPollSpacing", Message: fmt.Sprintf("MinPollSpacing %s must not be negative", c.MinPollSpacing)}
		}
		if c.MinPollSpacing == 0 {
			c.MinPollSpacing = DefaultMinPollSpacing
		}
		return nil
	},
}

// intRange is the rule of a count in [min, max] that is def when zero, worded as Lambda's API.
func intRange(field string, f func(*Config) *int, min, max, def int) settingRule {
	return func(c *Config, _ *checkState) error {
		switch v := f(c); {
		case *v == 0:
			*v = def
		case *v < min || *v > max:
			return RangeError(field, int64(*v), int64(min), int64(max))
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

// positive is the rule of a duration that must not be negative and is def when zero.
func positive(field string, f func(*Config) *time.Duration, def time.Duration) settingRule {
	return func(c *Config, _ *checkState) error {
		switch d := f(c); {
		case *d < 0:
			return &ValidationError{Field: field, Message: fmt.Sprintf("%s %s must be positive", field, *d)}
		case *d == 0:
			*d = def
		}
		return nil
	}
}

// checkPollGrid checks PollGrid against PollInterval (both past their rules, so PollInterval has
// its default) and sets its default, which is never longer than PollInterval.
func checkPollGrid(c *Config, st *checkState) error {
	switch {
	case c.PollGrid == 0:
		c.PollGrid = min(DefaultPollGrid, c.PollInterval)
		st.defaultGrid = true
	case c.PollGrid > c.PollInterval:
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
	case "":
		c.OnDestinationFailure = DestinationFailureBlock
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
	switch {
	case c.MaxFilters == 0:
		c.MaxFilters = DefaultMaxFilters
	case c.MaxFilters < 1 || c.MaxFilters > 10:
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
