package poller

import (
	"errors"
	"testing"
	"time"

	"github.com/kinesis-esm/esm/fake/fakekinesis"
	"github.com/kinesis-esm/esm/filter"
	"github.com/kinesis-esm/esm/invoke/inprocess"
)

// TestValidationErrorKeepsItsCause: a filter pattern's *filter.PatternError is behind the
// ValidationError, next to ErrInvalidConfig.
func TestValidationErrorKeepsItsCause(t *testing.T) {
	err := Config{StartingPosition: Latest,
		FilterPatterns: []string{`{"data": {"a": ["x"]}}`, `{"data": 1}`}}.Validate("")
	var ve *ValidationError
	var pe *filter.PatternError
	if !errors.As(err, &ve) || ve.Field != "FilterCriteria" || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v, want a FilterCriteria ValidationError wrapping ErrInvalidConfig", err)
	}
	if !errors.As(err, &pe) || pe.Index != 1 || ve.Err != error(pe) {
		t.Fatalf("the PatternError is not kept: %#v", ve)
	}
	if err := (&ValidationError{Field: "X", Message: "m"}); !errors.Is(err, ErrInvalidConfig) || len(err.Unwrap()) != 1 {
		t.Fatalf("a ValidationError without a cause unwraps to %v", err.Unwrap())
	}
}

// withDefaults is the configuration as the poller runs it (checked with the clock now).
func (c Config) withDefaults(now time.Time) (Config, error) {
	c = c.Defaults()
	_, err := c.check(now, "")
	return c, err
}

// TestDefaultsAndFilters: Defaults gives the configuration with its defaults and checks nothing;
// the check compiles the filters New runs (none without patterns).
func TestDefaultsAndFilters(t *testing.T) {
	d := Config{BatchSize: -1}.Defaults()
	if d.BatchSize != -1 || d.ParallelizationFactor != 1 || d.OnDestinationFailure != DestinationFailureBlock || d.PollGrid != DefaultPollGrid {
		t.Fatalf("Defaults %+v", d)
	}
	c := Config{StartingPosition: Latest, FilterPatterns: []string{`{"data": {"a": ["x"]}}`}}.Defaults()
	if filters, err := c.check(time.Now(), ""); err != nil || filters == nil || c.BatchSize != DefaultBatchSize {
		t.Fatalf("filters %v, %v; %+v", filters, err, c)
	}
	if filters, err := (Config{StartingPosition: Latest}).Defaults().check(time.Now(), ""); err != nil || filters != nil {
		t.Fatalf("without patterns: filters %v, %v", filters, err)
	}
}

// TestValidateBySourceKind: one Validate, fed by the source's kind where Lambda's rules differ: a
// DynamoDB stream takes no AT_TIMESTAMP (Lambda's InvalidParameterValueException names the ARN),
// a Kinesis stream does, and the settings without a source are a Kinesis stream's.
func TestValidateBySourceKind(t *testing.T) {
	const table = "arn:aws:dynamodb:us-east-1:000000000000:table/orders/stream/2026-01-01T00:00:00.000"
	at := Config{StartingPosition: AtTimestamp, StartingPositionTimestamp: time.Now().Add(-time.Hour)}
	var ve *ValidationError
	if err := at.Validate(table); !errors.As(err, &ve) || ve.Field != "StartingPosition" || ve.Message != "Unsupported starting position for arn type: "+table {
		t.Fatalf("AT_TIMESTAMP on a DynamoDB stream: %v", err)
	}
	for _, src := range []string{"", testStreamARN, "orders"} {
		if err := at.Validate(src); err != nil {
			t.Errorf("AT_TIMESTAMP for %q: %v", src, err)
		}
	}
	if err := (Config{StartingPosition: TrimHorizon, BatchSize: 10001}).Validate(table); !errors.As(err, &ve) || ve.Field != "batchSize" {
		t.Fatalf("BatchSize 10001 on a DynamoDB stream: %v", err)
	}
}

// TestNewChecksTheWholeMapping: New checks the mapping itself, with its own clock, whatever was
// checked before (a Config keeps no mark of a check): a timestamp Validate accepted is refused
// by a poller whose clock puts it in the future.
func TestNewChecksTheWholeMapping(t *testing.T) {
	ts := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	cfg := Config{StartingPosition: AtTimestamp, StartingPositionTimestamp: ts}
	if err := cfg.Validate(testStreamARN); err != nil {
		t.Fatal(err)
	}
	before := WithClock(func() time.Time { return ts.Add(-time.Hour) })
	inv := inprocess.New(func() error { return nil })
	if _, err := New(kinesisSource(fakekinesis.New(), testStreamARN), cfg, NewMemoryStore(), inv, before); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New accepted a timestamp in its clock's future: %v", err)
	}
	if _, err := New(nil, cfg, NewMemoryStore(), inv); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New without a source: %v", err)
	}
}

// pacedStore is a Coordinator with the pace it calls for.
type pacedStore struct {
	Store
	Coordinator
	pace time.Duration
}

func (p pacedStore) ClaimInterval() time.Duration { return p.pace }

// TestClaimIntervalFromTheCoordinator: a mapping that sets no ClaimInterval claims at its
// Coordinator's pace (lease.Dynamo's ClaimInterval), else every second; one it sets wins.
func TestClaimIntervalFromTheCoordinator(t *testing.T) {
	cfg := Config{StartingPosition: Latest}
	inv := inprocess.New(func() error { return nil })
	paced := pacedStore{Store: NewMemoryStore(), pace: 300 * time.Millisecond}
	for _, tt := range []struct {
		given time.Duration
		opts  []Option
		want  time.Duration
	}{
		{0, nil, DefaultClaimInterval},
		{0, []Option{WithCoordinator(paced)}, 300 * time.Millisecond},
		{time.Minute, []Option{WithCoordinator(paced)}, time.Minute},
	} {
		c := cfg
		c.ClaimInterval = tt.given
		p, err := New(kinesisSource(fakekinesis.New(), testStreamARN), c, paced, inv, tt.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if p.cfg.ClaimInterval != tt.want {
			t.Errorf("ClaimInterval given %s: %s, want %s", tt.given, p.cfg.ClaimInterval, tt.want)
		}
	}
}
