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
	err := Config{StreamARN: "arn:aws:kinesis:us-east-1:123456789012:stream/s", StartingPosition: Latest,
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

// TestCheckedCarriesWhatNewNeeds: Check gives the configuration with its defaults, the parsed
// stream ARN and the compiled filters; ForStream checks and defaults only the stream's fields.
func TestCheckedCarriesWhatNewNeeds(t *testing.T) {
	c, err := Config{StreamARN: "arn:aws:kinesis:us-east-1:111111111111:stream/probe", StartingPosition: Latest,
		FilterPatterns: []string{`{"data": {"a": ["x"]}}`}}.Check()
	if err != nil {
		t.Fatal(err)
	}
	if c.Stream() != (StreamARN{Partition: "aws", Region: "us-east-1", Account: "111111111111", Name: "probe"}) ||
		c.Filters() == nil || c.Config().BatchSize != DefaultBatchSize || c.Config().InvokeIdentityARN != "arn:aws:iam::111111111111:role/esm" {
		t.Fatalf("checked %+v", c)
	}
	c, err = c.ForStream("arn:aws:kinesis:eu-west-1:222222222222:stream/real", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Stream().Name != "real" || c.Config().InvokeIdentityARN != "arn:aws:iam::222222222222:role/esm" || c.Filters() == nil {
		t.Fatalf("ForStream kept the probe's stream defaults: %+v", c)
	}
	if _, err := c.ForStream("arn:aws:kinesis:eu-west-1:222222222222:stream/real/consumer/c:x", ""); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("ForStream accepted a bad consumer ARN: %v", err)
	}
	none, err := Config{StreamARN: "arn:aws:kinesis:us-east-1:111111111111:stream/s", StartingPosition: Latest}.Check()
	if err != nil || none.Filters() != nil {
		t.Fatalf("without patterns: filters %v, %v", none.Filters(), err)
	}
	if c, _ = c.WithClaimIntervalDefault(3 * time.Second); c.Config().ClaimInterval != 3*time.Second {
		t.Fatalf("ClaimInterval %s, want the coordinator's default", c.Config().ClaimInterval)
	}
	given, _ := Config{StreamARN: "arn:aws:kinesis:us-east-1:111111111111:stream/s", StartingPosition: Latest, ClaimInterval: time.Minute}.Check()
	if given, _ = given.WithClaimIntervalDefault(3 * time.Second); given.Config().ClaimInterval != time.Minute {
		t.Fatalf("ClaimInterval %s, want the one given", given.Config().ClaimInterval)
	}
}

// TestNewCheckedDoesNotCheckAgain: NewChecked runs what Check accepted (here a timestamp the
// poller's clock puts in the future, which New refuses), and refuses a Checked that Check did not
// make.
func TestNewCheckedDoesNotCheckAgain(t *testing.T) {
	ts := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	cfg := Config{StreamARN: "arn:aws:kinesis:us-east-1:111111111111:stream/s", StartingPosition: AtTimestamp, StartingPositionTimestamp: ts}
	before := WithClock(func() time.Time { return ts.Add(-time.Hour) })
	inv := inprocess.New(func() error { return nil })
	if _, err := New(cfg, fakekinesis.New(), NewMemoryStore(), inv, before); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New accepted a timestamp in its clock's future: %v", err)
	}
	checked, err := cfg.Check()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewChecked(checked, fakekinesis.New(), NewMemoryStore(), inv, before); err != nil {
		t.Fatalf("NewChecked checked the configuration again: %v", err)
	}
	if _, err := NewChecked(Checked{}, fakekinesis.New(), NewMemoryStore(), inv); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewChecked accepted a Checked that Check did not make: %v", err)
	}
}
