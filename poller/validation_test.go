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
		FilterPatterns: []string{`{"data": {"a": ["x"]}}`, `{"data": 1}`}}.Validate()
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

// withDefaults is the configuration as the poller runs it (Check with the clock now).
func (c Config) withDefaults(now time.Time) (Config, error) {
	checked, err := c.check(now)
	return checked.cfg, err
}

// TestCheckedCarriesWhatNewNeeds: Check gives the configuration with its defaults and the
// compiled filters.
func TestCheckedCarriesWhatNewNeeds(t *testing.T) {
	c, err := Config{StartingPosition: Latest,
		FilterPatterns: []string{`{"data": {"a": ["x"]}}`}}.Check()
	if err != nil {
		t.Fatal(err)
	}
	if c.Filters() == nil || c.Config().BatchSize != DefaultBatchSize {
		t.Fatalf("checked %+v", c)
	}
	none, err := Config{StartingPosition: Latest}.Check()
	if err != nil || none.Filters() != nil {
		t.Fatalf("without patterns: filters %v, %v", none.Filters(), err)
	}
}

// TestCheckSettingsOnce: the settings a check accepted are not checked again while unchanged, and
// are once changed.
func TestCheckSettingsOnce(t *testing.T) {
	if _, err := (Config{StartingPosition: Latest, BatchSize: 10001}).CheckSettings(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("CheckSettings accepted BatchSize 10001: %v", err)
	}
	ts := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	s, err := Config{StartingPosition: AtTimestamp, StartingPositionTimestamp: ts, FilterPatterns: []string{`{"data": {"a": ["x"]}}`}}.CheckSettings()
	if err != nil || s.BatchSize != DefaultBatchSize {
		t.Fatalf("settings %+v, %v", s, err)
	}
	before := ts.Add(-time.Hour) // the timestamp is in this clock's future: a check of the settings would refuse it
	c, err := s.check(before)
	if err != nil || c.Filters() == nil {
		t.Fatalf("the settings were checked again: %v", err)
	}
	s.BatchSize = 0 // changed: checked (and defaulted) again
	if c, err := s.check(before); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a changed setting was not checked again: %+v %v", c.Config(), err)
	}
}

// TestNewDoesNotCheckAgain: New runs a configuration Check accepted without checking it again
// (here a timestamp the poller's clock puts in the future, which New refuses in a value nobody
// checked), and checks a value changed since.
func TestNewDoesNotCheckAgain(t *testing.T) {
	ts := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	cfg := Config{StartingPosition: AtTimestamp, StartingPositionTimestamp: ts}
	before := WithClock(func() time.Time { return ts.Add(-time.Hour) })
	inv := inprocess.New(func() error { return nil })
	if _, err := New(kinesisSource(fakekinesis.New(), "arn:aws:kinesis:us-east-1:111111111111:stream/s"), cfg, NewMemoryStore(), inv, before); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New accepted a timestamp in its clock's future: %v", err)
	}
	checked, err := cfg.Check()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(kinesisSource(fakekinesis.New(), testStreamARN), checked.Config(), NewMemoryStore(), inv, before); err != nil {
		t.Fatalf("New checked the configuration again: %v", err)
	}
	changed := checked.Config()
	changed.StartingPositionTimestamp = ts.Add(time.Second)
	if _, err := New(kinesisSource(fakekinesis.New(), testStreamARN), changed, NewMemoryStore(), inv, before); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New did not check a configuration changed after its check: %v", err)
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
